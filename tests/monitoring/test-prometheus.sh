#!/bin/bash
# test-prometheus.sh - a real Prometheus (Debian's prometheus) on 127.0.0.1 scrapes a real
# agent's /metrics with deploy/monitoring/volagent.rules.yml loaded (each `for:` cut to 5s so
# the test takes seconds): a local volume whose directory is missing makes
# VolagentVolumesNotSetUp pending then firing in Prometheus's /api/v1/alerts, and creating the
# directory resolves it.  Also check-promql.py: every metric and label name in the rules and
# the Grafana dashboard is one the agent's scrape shows (a renamed metric must fail it).
# Both servers are stopped by PID on any exit.  Root (the agent mounts, in its own mount
# namespace).  Skips (77) without prometheus, root or the built agent, unless CI=true.
# Closing line: "N passed, N failed".
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/vm/testlib.sh"
t_agent_bin
command -v prometheus >/dev/null || t_skip "test-prometheus: prometheus not installed"
[ "$(id -u)" = 0 ] || t_skip "test-prometheus: needs root (the agent mounts)"
scale=${TEST_TIME_SCALE:-1}

T=$(mktemp -d /tmp/vprom.XXXXXX)
agent_pid= prom_pid=
cleanup() {
	[ -z "$prom_pid" ] || { kill "$prom_pid" 2>/dev/null; wait "$prom_pid" 2>/dev/null; }
	[ -z "$agent_pid" ] || { kill "$agent_pid" 2>/dev/null; wait "$agent_pid" 2>/dev/null; }
	rm -rf "$T"
}
trap cleanup EXIT

. "$top/tests/monitoring/prom-lib.sh"
# not CMD...: CMD fails (its own report, which lists what it refused, is not shown).
not() { ! "$@" >/dev/null; }

agent_port=$(free_port)
mkdir -p "$T/pods" "$T/root" "$T/state" "$T/secret"
cat >"$T/pods/web-0.json" <<JSON
{ "pod": { "uid": "0c1d7a52", "name": "web-0", "namespace": "default" },
  "volumes": [ { "name": "data", "local": { "path": "$T/data" } } ] }
JSON
unshare -m --propagation private "$agent" run --root-dir "$T/root" --state-dir "$T/state" \
	--secret-dir "$T/secret" --pods-dir "$T/pods" --insecure-pods-dir --device-inventory=false \
	--backoff-max 1s --metrics-address "127.0.0.1:$agent_port" >"$T/agent.log" 2>&1 &
agent_pid=$!

prom_start "127.0.0.1:$agent_port"

scrape() { curl -sf -o "$T/metrics.txt" "http://127.0.0.1:$agent_port/metrics"; }
# The label checks below need series to check against: wait for the scrape that shows the
# first (failed: the directory is missing) mount, not just the first scrape that answers.
scrape_after_mount() { scrape && grep -q '^volagent_operations_failed_total{' "$T/metrics.txt"; }
t_check "the agent serves /metrics" wait_for 30 scrape
t_check "the agent's failed mount is in /metrics" wait_for 30 scrape_after_mount
mon=$top/deploy/monitoring
check=$top/tests/monitoring/check-promql.py
t_check "every metric and label in the rules and the dashboard is the agent's" \
	"$check" names "$mon/volagent.rules.yml" "$mon/grafana-dashboard.json" "$T/metrics.txt"
# ... and the check fails on a renamed metric and on a label the metric does not have.
sed 's/volagent_volumes_mounted/volagent_volumes_mounted_total/' "$mon/grafana-dashboard.json" >"$T/renamed.json"
sed 's/by (plugin, operation)/by (driver, operation)/' "$mon/grafana-dashboard.json" >"$T/relabeled.json"
t_check "a renamed metric is refused" not "$check" names "$mon/volagent.rules.yml" "$T/renamed.json" "$T/metrics.txt"
t_check "an unknown label is refused" not "$check" names "$mon/volagent.rules.yml" "$T/relabeled.json" "$T/metrics.txt"

t_check "VolagentVolumesNotSetUp pending" wait_for 60 alert_state VolagentVolumesNotSetUp pending
t_check "VolagentVolumesNotSetUp firing" wait_for 60 alert_state VolagentVolumesNotSetUp firing
mkdir "$T/data"
t_check "VolagentVolumesNotSetUp resolved once the directory exists" \
	wait_for 60 alert_state VolagentVolumesNotSetUp none
n_rules=$(grep -c '^ *- alert:' "$t_repo/deploy/monitoring/volagent.rules.yml")
t_check "the $n_rules rules are loaded and healthy" wait_for 10 sh -c \
	"curl -sf http://127.0.0.1:$prom_port/api/v1/rules | jq -e '[.data.groups[].rules[].health] | length == $n_rules and all(. == \"ok\")' >/dev/null"
if [ "$t_failed" != 0 ]; then
	tail -n 20 "$T/agent.log" "$T/prom.log"
fi
t_done
