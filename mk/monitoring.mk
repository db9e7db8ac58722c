# monitoring.mk - the alert rules of deploy/monitoring: tests/monitoring/test-rules.sh runs
# promtool check rules and the firing/not-firing cases of rules-test.yml, and checks the
# PrometheusRule is the rules file.  Seconds.  Skips (77) without promtool, unless CI=true.
CHECK_SCRIPTS += tests/monitoring/test-rules.sh

.PHONY: check-monitoring
check-monitoring:
	CHECK_SCRIPTS="tests/monitoring/test-rules.sh" BUILD=$(BUILD) tests/run-tests.sh
