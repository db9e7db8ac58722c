#!/bin/bash
# test-rules.sh - the alert rules of deploy/monitoring: `promtool check rules`, the unit cases
# of rules-test.yml (`promtool test rules`: each alert firing and not firing), the
# PrometheusRule's spec equal to the plain rules file, the Grafana dashboard's PromQL parsed by
# promtool (as recording rules), and that the cases can fail (rules
# without their `for:` must fail them).  Seconds.  Skips (77) without promtool (Debian's
# prometheus) or python3-yaml, unless CI=true.  Closing line: "N passed, N failed".
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
mon=$top/deploy/monitoring
passed=0 failed=0

. "$top/tests/vm/testlib.sh"
command -v promtool >/dev/null || t_skip "test-rules: promtool not installed (prometheus)"
/usr/bin/python3 -c 'import yaml' 2>/dev/null || t_skip "test-rules: python3-yaml missing"

T=$(mktemp -d /tmp/vrules.XXXXXX)
trap 'rm -rf "$T"' EXIT
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }

if promtool check rules "$mon/volagent.rules.yml"; then ok "promtool check rules"; else bad "promtool check rules"; fi
if (cd "$top/tests/monitoring" && promtool test rules rules-test.yml); then
	ok "promtool test rules"
else
	bad "promtool test rules"
fi
# The dashboard's expressions (and the rules') as recording rules, for promtool's parser.
"$top/tests/monitoring/check-promql.py" rules-file "$mon/volagent.rules.yml" "$mon/grafana-dashboard.json" >"$T/promql.yml"
if promtool check rules "$T/promql.yml"; then ok "dashboard PromQL parses"; else bad "dashboard PromQL"; fi
sed 's/sum by (method, code)/sum by (method, code/' "$mon/grafana-dashboard.json" >"$T/broken.json"
"$top/tests/monitoring/check-promql.py" rules-file "$mon/volagent.rules.yml" "$T/broken.json" >"$T/broken.yml"
if promtool check rules "$T/broken.yml" >/dev/null 2>&1; then bad "a broken dashboard expression passes"; else ok "a broken dashboard expression is refused"; fi
if "$mon/gen-prometheusrule.py" - | cmp -s - "$mon/prometheusrule.yaml"; then
	ok "prometheusrule.yaml is generated from volagent.rules.yml"
else
	bad "prometheusrule.yaml differs from gen-prometheusrule.py's output: run it"
fi
if cmp -s "$mon/volagent.rules.yml" "$top/deploy/helm/volagent/files/volagent.rules.yml"; then
	ok "the Helm chart's copy of the rules is volagent.rules.yml"
else
	bad "deploy/helm/volagent/files/volagent.rules.yml differs from volagent.rules.yml: run gen-prometheusrule.py"
fi
if /usr/bin/python3 - "$mon/volagent.rules.yml" "$mon/prometheusrule.yaml" <<'PY'; then
import sys, yaml
rules = yaml.safe_load(open(sys.argv[1]))
obj = yaml.safe_load(open(sys.argv[2]))
sys.exit(0 if obj["kind"] == "PrometheusRule" and obj["spec"] == rules else 1)
PY
	ok "PrometheusRule spec equals the rules file"
else
	bad "PrometheusRule spec differs from the rules file"
fi
# The cases must be able to fail: without `for:` the not-firing cases fire.
mkdir -p "$T/deploy/monitoring" "$T/tests/monitoring"
grep -v '^ *for:' "$mon/volagent.rules.yml" >"$T/deploy/monitoring/volagent.rules.yml"
cp "$top/tests/monitoring/rules-test.yml" "$T/tests/monitoring/"
if (cd "$T/tests/monitoring" && promtool test rules rules-test.yml) >"$T/mutant.log" 2>&1; then
	bad "rules without for: still pass the cases"
else
	ok "rules without for: fail the cases ($(grep -c 'alertname' "$T/mutant.log") alerts differ)"
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
