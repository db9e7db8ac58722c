# monitoring.mk - the alert rules of deploy/monitoring: tests/monitoring/test-rules.sh runs
# promtool check rules and the firing/not-firing cases of rules-test.yml, and checks the
# PrometheusRule is the rules file.  tests/monitoring/test-prometheus.sh runs a real Prometheus
# scraping a real agent with the rules loaded and watches an alert fire and resolve (about 15 s,
# root); tests/monitoring/test-alert-server-down.sh does the same for the storage-server alert
# with a real Ceph cluster whose monitor is frozen (about 30 s; once, in the half without the
# sanitizer: the agent's rbd paths are the rbd tests' in both).  Each skips (77) without its
# tools, unless CI=true.
MONITORING_SCRIPTS := tests/monitoring/test-rules.sh tests/monitoring/test-prometheus.sh \
	tests/monitoring/test-alert-server-down.sh
CHECK_SCRIPTS += tests/monitoring/test-rules.sh tests/monitoring/test-prometheus.sh
ifneq ($(SANITIZE),1)
CHECK_SCRIPTS += tests/monitoring/test-alert-server-down.sh
endif

.PHONY: check-monitoring
check-monitoring:
	CHECK_SCRIPTS="$(MONITORING_SCRIPTS)" BUILD=$(BUILD) tests/run-tests.sh
