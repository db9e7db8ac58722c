#!/bin/bash
# test-helm.sh - the Helm chart (deploy/helm/volagent) checked by helm itself and against the
# kustomize renderings of deploy/: `helm lint --strict`; `helm template` of each setting held
# object by object against `kubectl kustomize` of the overlay that makes the same setting
# (compare-renderings.py: the base, provisioning, rolling-update, podmonitor, microk8s and k0s
# kubelet dirs), and each rendering through tests/deploy/check-manifests.py (the API models and
# the DaemonSet's promises); the PrometheusRule against deploy/monitoring's; values.schema.json
# refusing wrong values at install, each naming its field; and cases that must fail, so the
# comparison is shown able to fail.  Installing and upgrading on a real cluster is
# tests/cluster/scenarios/85-helm.sh.
#
# helm is built by tests/helm/build-helm.sh (cached; about 2 minutes cold).  About 10 s warm.
# Skips (77) without go, kubectl or python3-kubernetes, unless CI=true.
# Closing line: "N passed, N failed".
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../vm/testlib.sh"
top=$t_repo
chart=$top/deploy/helm/volagent
python=/usr/bin/python3
kubectl=${KUBECTL:-kubectl}
PATH=$PATH:/usr/local/go/bin
t_need "go is not installed (helm is built from the Go module proxy)" command -v go
t_need "test-helm: $kubectl not installed (kubernetes-client)" command -v "$kubectl"
t_need "test-helm: python3-kubernetes or python3-yaml missing" $python -c 'import kubernetes.client, yaml'
helm=$("$here/build-helm.sh") || { t_fail "build helm (tests/helm/build-helm.sh)"; t_done; }
echo "helm: $("$helm" version --short)"
t_workdir helm
# The release the test cluster runs (tests/cluster/go.mod): helm's default is the client
# library's own, older than the chart's kubeVersion.
kube_version=$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "$top/tests/cluster/go.mod")

t_check "helm lint --strict (defaults)" "$helm" lint --strict --kube-version "$kube_version" "$chart"
t_check "helm lint --strict (provisioner, PodMonitor, PrometheusRule on)" "$helm" lint --strict --kube-version "$kube_version" "$chart" \
	--set provisioner.enabled=true,podMonitor.enabled=true,prometheusRule.enabled=true

# render NAME HELM-ARGS...: helm template into $work/NAME.helm.yaml.
render() {
	local name=$1
	shift
	"$helm" template volagent "$chart" --kube-version "$kube_version" --namespace volagent "$@" >"$work/$name.helm.yaml" 2>"$work/$name.err"
}
# same NAME OVERLAY CHECKER-ARGS -- HELM-ARGS...: the chart with HELM-ARGS renders what
# `kubectl kustomize deploy/OVERLAY` renders, and passes check-manifests.py.
same() {
	local name=$1 overlay=$2 checker=() out
	shift 2
	while [ "$1" != -- ]; do checker+=("$1"); shift; done
	shift
	if ! render "$name" "$@"; then
		t_fail "helm template ${*:-(defaults)}: $(tail -3 "$work/$name.err")"
		return
	fi
	if ! "$kubectl" kustomize "$top/deploy/$overlay" >"$work/$name.kust.yaml" 2>"$work/$name.kerr"; then
		t_fail "kubectl kustomize deploy/$overlay: $(tail -3 "$work/$name.kerr")"
		return
	fi
	if out=$($python "$here/compare-renderings.py" --namespace-by-release "$work/$name.helm.yaml" "$work/$name.kust.yaml"); then
		t_pass "helm template ${*:-(defaults)} renders deploy/$overlay's objects ($(grep -c '^same' <<<"$out") objects)"
	else
		t_fail "helm template ${*:-(defaults)} differs from deploy/$overlay" "$(grep '^DIFF' <<<"$out" | head -5)"
	fi
	# check-manifests.py wants the Namespace rendered alongside: the release's, as helm -n makes it.
	{ printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: volagent, labels: {app.kubernetes.io/name: volagent}}\n---\n'
	  cat "$work/$name.helm.yaml"; } >"$work/$name.ns.yaml"
	t_check "the $name rendering passes check-manifests.py" $python "$top/tests/deploy/check-manifests.py" \
		"$work/$name.ns.yaml" --unit "$top/systemd/volagent.service" "${checker[@]}"
}
same base base -- 
same provisioning overlays/provisioning --provisioning -- --set provisioner.enabled=true
same rolling overlays/rolling-update --strategy RollingUpdate -- \
	--set updateStrategy.type=RollingUpdate,updateStrategy.rollingUpdate.maxUnavailable=1
same podmonitor overlays/podmonitor --podmonitor -- --set podMonitor.enabled=true
same microk8s overlays/microk8s --kubelet-dir /var/snap/microk8s/common/var/lib/kubelet -- \
	--set kubeletDir=/var/snap/microk8s/common/var/lib/kubelet
same k0s overlays/k0s --kubelet-dir /var/lib/k0s/kubelet -- --set kubeletDir=/var/lib/k0s/kubelet

# The PrometheusRule: deploy/monitoring/prometheusrule.yaml (the rules file unchanged), also
# with the braces of its annotations, which Helm must not have templated.
if render rule --set prometheusRule.enabled=true; then
	$python - "$work/rule.helm.yaml" >"$work/rule.only.yaml" <<-'PY'
		import sys, yaml
		objs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o and o["kind"] == "PrometheusRule"]
		yaml.safe_dump_all(objs, sys.stdout)
	PY
	t_check "prometheusRule.enabled renders deploy/monitoring/prometheusrule.yaml" \
		$python "$here/compare-renderings.py" "$work/rule.only.yaml" "$top/deploy/monitoring/prometheusrule.yaml"
	t_check "the rules' {{ \$value }} reach the PrometheusRule untemplated" grep -qF '{{ $value }}' "$work/rule.only.yaml"
else
	t_fail "helm template --set prometheusRule.enabled=true" "$(tail -3 "$work/rule.err")"
fi

# Values the defaults do not show: the log level, the metrics port, the sidecar's extra env.
render values --set logLevel=debug,metrics.port=29900 --set provisioner.enabled=true \
	--set 'provisioner.extraEnv[0].name=KUBERNETES_SERVICE_HOST,provisioner.extraEnv[0].value=10.0.0.1' \
	--set storageClass.enforceSize=false,storageClass.isDefault=true || t_fail "helm template with values" "$(tail -3 "$work/values.err")"
values_hold() {
	$python - "$work/values.helm.yaml" <<-'PY'
		import sys, yaml
		objs = {o["kind"]: o for o in yaml.safe_load_all(open(sys.argv[1])) if o}
		pod = objs["DaemonSet"]["spec"]["template"]["spec"]
		agent, prov = pod["containers"]
		sc = objs["StorageClass"]
		want = [("--log-level=debug" in agent["args"], "--log-level=debug"),
		        ("--metrics-address=0.0.0.0:29900" in agent["args"], "metrics address"),
		        (agent["ports"][0]["containerPort"] == 29900, "metrics port"),
		        ({"name": "KUBERNETES_SERVICE_HOST", "value": "10.0.0.1"} in prov["env"], "extraEnv"),
		        (sc["parameters"]["enforceSize"] == "false", "enforceSize false"),
		        (sc["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true", "default class")]
		bad = [w for ok, w in want if not ok]
		print("not rendered: %s" % bad if bad else "all rendered")
		sys.exit(1 if bad else 0)
	PY
}
t_check "logLevel, metrics.port, provisioner.extraEnv, storageClass.enforceSize and isDefault are rendered" values_hold

# The comparison can fail: a port, a kubelet dir, a strategy the overlay does not have.
differs() { # NAME OVERLAY EXPECTED -- HELM-ARGS
	local name=$1 overlay=$2 expected=$3 out
	shift 4
	render "$name" "$@" || { t_fail "helm template $*"; return; }
	"$kubectl" kustomize "$top/deploy/$overlay" >"$work/$name.kust.yaml" 2>/dev/null
	if out=$($python "$here/compare-renderings.py" --namespace-by-release "$work/$name.helm.yaml" "$work/$name.kust.yaml"); then
		t_fail "helm template $* was held equal to deploy/$overlay"
	elif grep -qF -- "$expected" <<<"$out"; then
		t_pass "helm template ${*:-(defaults)} differs from deploy/$overlay: $(grep -F -- "$expected" <<<"$out" | head -1 | cut -c1-150)"
	else
		t_fail "helm template $* differs from deploy/$overlay, but not at $expected" "$(head -3 <<<"$out")"
	fi
}
differs port base "containerPort" -- --set metrics.port=29811
differs kdir overlays/microk8s "hostPath.path" -- --set kubeletDir=/var/lib/kubelet2
differs strategy base "updateStrategy.type" -- --set updateStrategy.type=RollingUpdate
differs noprov overlays/provisioning "rendered by kustomize only" --

# values.schema.json: a wrong value is refused at install, naming its field.
refused() { # EXPECTED-FIELD HELM-ARGS...
	local field=$1 out
	shift
	if out=$("$helm" template volagent "$chart" --kube-version "$kube_version" "$@" 2>&1 >/dev/null); then
		t_fail "helm template $* was accepted"
	elif grep -qF -- "$field" <<<"$out"; then
		t_pass "refused: $* ($(grep -F -- "$field" <<<"$out" | head -1 | sed 's/^ *//' | cut -c1-120))"
	else
		t_fail "helm template $* refused, but the error does not name $field" "$out"
	fi
}
refused kubeletDir --set kubeletDir=var/lib/kubelet
refused kubeletDir --set kubeletDir=/var/lib/kubelet/
refused stateHostPath --set stateHostPath=/var/lib/../volagent
refused metrics.port --set metrics.port=70000
refused kubletDir --set kubletDir=/var/lib/kubelet
refused logLevel --set logLevel=verbose
refused updateStrategy.type --set updateStrategy.type=Sometimes
refused storageClass.enforceSize --set storageClass.enforceSize=yes
refused image.tag --set 'image.tag=a b'
refused provisioner.timeout --set provisioner.timeout=soon
t_done
