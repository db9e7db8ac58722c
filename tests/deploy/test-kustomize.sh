#!/bin/bash
# test-kustomize.sh - renders deploy/base and every overlay with `kubectl kustomize` (Debian's
# kubernetes-client: kubectl 1.20, kustomize v2.0.3; $KUBECTL picks another) and checks each
# rendering with check-manifests.py: every object strictly against python3-kubernetes' API
# models, and the DaemonSet's promises (kubelet dir, update strategy, metrics port, secret
# dir on memory, probes, ...).  Then it shows the checker can fail: mutated renderings (an
# unknown field, a wrong type, a missing required field, a memory limit, a kubelet dir
# changed in one place only) must each be refused with the reason.
#
# A few seconds.  Skips (77) without kubectl or python3-kubernetes, unless CI=true.
# Closing line: "N passed, N failed".
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
kubectl=${KUBECTL:-kubectl}
python=/usr/bin/python3
checker=$top/tests/deploy/check-manifests.py
unit=$top/systemd/volagent.service
passed=0 failed=0

. "$top/tests/vm/testlib.sh"
command -v "$kubectl" >/dev/null || t_skip "test-kustomize: $kubectl not installed (kubernetes-client)"
$python -c 'import kubernetes.client, yaml' 2>/dev/null || t_skip "test-kustomize: python3-kubernetes or python3-yaml missing"

T=$(mktemp -d /tmp/vkust.XXXXXX)
trap 'rm -rf "$T"' EXIT

ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }

# render NAME DIR CHECKER-ARGS...: kubectl kustomize DIR, then the checker.
render() {
	local name=$1 dir=$2
	shift 2
	if ! "$kubectl" kustomize "$top/deploy/$dir" >"$T/$name.yaml" 2>"$T/$name.err"; then
		bad "kubectl kustomize deploy/$dir: $(tail -3 "$T/$name.err")"
		return
	fi
	if $python "$checker" "$T/$name.yaml" --unit "$unit" "$@"; then
		ok "deploy/$dir rendered and checked"
	else
		bad "deploy/$dir: the checker refused the rendering"
	fi
}

echo "kubectl: $("$kubectl" version --client --short 2>/dev/null || "$kubectl" version --client 2>&1 | head -1)"
render base base
render microk8s overlays/microk8s --kubelet-dir /var/snap/microk8s/common/var/lib/kubelet
render k0s overlays/k0s --kubelet-dir /var/lib/k0s/kubelet
render rolling overlays/rolling-update --strategy RollingUpdate
render podmonitor overlays/podmonitor --podmonitor
render provisioning overlays/provisioning --provisioning

# mutate NAME EXPECTED PYTHON: the base rendering changed by PYTHON (on `ds`, the DaemonSet,
# `c` its container, `pod` its pod spec) must be refused with EXPECTED in the reason.
mutate() {
	local name=$1 expected=$2 code=$3 out
	$python - "$T/base.yaml" "$T/m-$name.yaml" <<-EOF || { bad "mutation $name: $code"; return; }
		import sys, yaml
		objs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
		ds = [o for o in objs if o["kind"] == "DaemonSet"][0]
		pod = ds["spec"]["template"]["spec"]
		c = pod["containers"][0]
		$code
		yaml.safe_dump_all(objs, open(sys.argv[2], "w"))
	EOF
	if out=$($python "$checker" "$T/m-$name.yaml" --unit "$unit" 2>&1); then
		bad "mutation $name was accepted"
	elif grep -qF -- "$expected" <<<"$out"; then
		ok "mutation $name refused: $(grep -F -- "$expected" <<<"$out" | head -1 | cut -c1-160)"
	else
		bad "mutation $name refused for another reason: $out"
	fi
}
[ -s "$T/base.yaml" ] && {
	mutate unknown-field "unknown field 'hostNetwrok'" 'pod["hostNetwrok"] = True'
	mutate wrong-type "'60' is not an integer" 'pod["terminationGracePeriodSeconds"] = "60"'
	mutate list-for-map "is not a map" 'pod["nodeSelector"] = ["linux"]'
	mutate missing-name "name" 'del c["name"]'
	mutate memory-limit "a memory limit" 'c["resources"]["limits"] = {"memory": "128Mi"}'
	mutate kubelet-dir "the kubelet dir's host path" \
		'pod["volumes"][0]["hostPath"]["path"] = "/var/lib/k0s/kubelet"'
	mutate grace "TimeoutStopSec" 'pod["terminationGracePeriodSeconds"] = 30'
	mutate no-readiness "readiness" 'del c["readinessProbe"]'
}

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
