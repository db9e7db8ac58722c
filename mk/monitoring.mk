# monitoring.mk - the alert rules of deploy/monitoring: tests/monitoring/test-rules.sh runs
# promtool check rules and the firing/not-firing cases of rules-test.yml, and checks the
# PrometheusRule is the rules file.  tests/monitoring/test-prometheus.sh runs a real Prometheus
# scraping a real agent with the rules loaded and watches an alert fire and resolve (about 15 s,
# root).  Each skips (77) without its tools, unless CI=true.
CHECK_SCRIPTS += tests/monitoring/test-rules.sh tests/monitoring/test-prometheus.sh

.PHONY: check-monitoring
check-monitoring:
	CHECK_SCRIPTS="tests/monitoring/test-rules.sh tests/monitoring/test-prometheus.sh" BUILD=$(BUILD) tests/run-tests.sh
