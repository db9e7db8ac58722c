# shellcheck shell=bash
# The Helm chart (deploy/helm/volagent) on the real cluster, as an operator moving an install
# made with `kubectl apply -k` to Helm would: the chart, with values for this cluster's paths,
# renders the same objects as the overlay installed now (so taking it over changes no pod), the
# API server accepts every object (`kubectl apply --dry-run=server`), `helm install` adopts the
# running objects without restarting the agent, and `helm upgrade` to a new image tag rolls the
# agent while a pod writes on a volagent volume: its mount keeps its ID and no write fails.  A
# wrong value is refused by the chart's schema and the release stays as it was.
helm=$("$t_repo/tests/helm/build-helm.sh") || t_fail "build helm (tests/helm/build-helm.sh)"
if [ -n "$helm" ]; then
	hc() { cluster_exec "$helm" --kubeconfig "$CLUSTER_DIR/pki/admin.kubeconfig" -n volagent "$@"; }
	hc_quiet() { hc "$@" >>"$CLUSTER_DIR/logs/helm.log" 2>&1 || { tail -5 "$CLUSTER_DIR/logs/helm.log"; return 1; }; }
	chart=$t_repo/deploy/helm/volagent
	cur_image=$(kc -n volagent get daemonset volagent -o 'jsonpath={.spec.template.spec.containers[0].image}')
	# The values of this cluster, as install-volagent's overlay sets them (the sidecar reaches
	# the API server at the node's address: this cluster runs no kube-proxy).
	cat >"$CLUSTER_DIR/helm-values.yaml" <<-EOF
		kubeletDir: $CLUSTER_DIR/kubelet
		stateHostPath: $CLUSTER_DIR/volagent
		localVolumesHostPath: $CLUSTER_DIR/disks
		image: {repository: ${cur_image%:*}, tag: "${cur_image##*:}"}
		updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}
		provisioner:
		  enabled: true
		  extraEnv:
		    - {name: KUBERNETES_SERVICE_HOST, value: "$CLUSTER_NODE_IP"}
		    - {name: KUBERNETES_SERVICE_PORT, value: "6443"}
	EOF
	kube_version=$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "$t_repo/tests/cluster/go.mod")
	hc template volagent "$chart" --kube-version "$kube_version" -f "$CLUSTER_DIR/helm-values.yaml" \
		>"$CLUSTER_DIR/helm.yaml"
	kc kustomize "$CLUSTER_DIR/overlay" >"$CLUSTER_DIR/kustomize.yaml" 2>/dev/null
	same_objects() {
		python3 "$t_repo/tests/helm/compare-renderings.py" --namespace-by-release \
			"$CLUSTER_DIR/helm.yaml" "$CLUSTER_DIR/kustomize.yaml" | grep -v '^same:'
		[ "${PIPESTATUS[0]}" = 0 ]
	}
	t_check "the chart with this cluster's values renders the objects installed from the overlay" same_objects
	dry_run() { kc apply --dry-run=server -f "$CLUSTER_DIR/helm.yaml" >"$CLUSTER_DIR/logs/helm-dry-run.log"; }
	t_check "the API server accepts every object of the chart (kubectl apply --dry-run=server)" dry_run

	mkdir -p "$CLUSTER_DIR/disks/helm"
	pv_pvc helm-dir ReadWriteOnce 1Gi Filesystem \
		"volumeHandle: helm-dir, volumeAttributes: {type: local, path: /mnt/disks/helm}"
	writer_pod helm-writer "    - {name: data, persistentVolumeClaim: {claimName: helm-dir}}"
	t_check "a pod writes on a local directory volume" pod_ready helm-writer
	helm_mount() { node_mounts "$CLUSTER_DIR/kubelet/" | grep -F "$(pod_uid helm-writer)" | grep 'kubernetes.io~csi'; }
	mount0=$(helm_mount)
	agent0=$(kc -n volagent get pods -l app.kubernetes.io/name=volagent -o 'jsonpath={.items[0].metadata.uid}')

	# Taking over: Helm adopts objects that carry its release annotations and managed-by label.
	# (-n volagent is ignored for the cluster-scoped ones.)
	for obj in daemonset/volagent serviceaccount/volagent role/volagent-provisioner \
		rolebinding/volagent-provisioner csidriver/csi.volagent.io clusterrole/volagent-provisioner \
		clusterrolebinding/volagent-provisioner storageclass/volagent-local; do
		kc -n volagent annotate --overwrite "$obj" meta.helm.sh/release-name=volagent \
			meta.helm.sh/release-namespace=volagent >/dev/null
		kc -n volagent label --overwrite "$obj" app.kubernetes.io/managed-by=Helm >/dev/null
	done
	t_check "helm install takes over the running install" \
		hc_quiet install volagent "$chart" -f "$CLUSTER_DIR/helm-values.yaml" --wait --timeout "$(t_secs 180)s"
	agent_uid() { kc -n volagent get pods -l app.kubernetes.io/name=volagent -o 'jsonpath={.items[*].metadata.uid}'; }
	t_check "the agent's pod was not replaced by the takeover" test "$(agent_uid)" = "$agent0"

	# helm upgrade to a new tag of the image: a rolling update of the agent.
	cluster_exec ctr --address "$CLUSTER_DIR/containerd.sock" -n k8s.io images tag --force \
		"$cur_image" localhost/volagent:helm-upgrade >/dev/null
	lines0=$(pod_exec helm-writer sh -c 'wc -l </data/log')
	t_check "helm upgrade to localhost/volagent:helm-upgrade" \
		hc_quiet upgrade volagent "$chart" -f "$CLUSTER_DIR/helm-values.yaml" --set image.tag=helm-upgrade \
		--wait --timeout "$(t_secs 180)s"
	new_agent() {
		agent_pod=$(kc -n volagent get pods -l app.kubernetes.io/name=volagent \
			-o 'jsonpath={.items[?(@.spec.containers[0].image=="localhost/volagent:helm-upgrade")].metadata.name}')
		[ -n "$agent_pod" ] && kc -n volagent wait --for=condition=Ready "pod/$agent_pod" --timeout=5s >/dev/null
	}
	t_check "the agent runs the upgraded image, Ready" cluster_wait 120 "the upgraded agent pod" new_agent
	t_check "the writer's volume kept its mount ID across the upgrade" test "$(helm_mount)" = "$mount0"
	t_check "no write failed (restart count 0)" test \
		"$(kc get pod helm-writer -o 'jsonpath={.status.containerStatuses[0].restartCount}')" = 0
	grew() { [ "$(pod_exec helm-writer sh -c 'wc -l </data/log')" -gt "$lines0" ]; }
	t_check "the writer still writes" cluster_wait 30 "the writer's lines" grew
	bad_upgrade() {
		local out
		out=$(hc upgrade volagent "$chart" -f "$CLUSTER_DIR/helm-values.yaml" --set kubeletDir=relative/dir 2>&1) && return 1
		grep -q kubeletDir <<<"$out"
	}
	t_check "a wrong value is refused by the chart's schema, naming kubeletDir" bad_upgrade
	release_at() {
		hc history volagent -o json | python3 -c '
import json, sys
last = json.load(sys.stdin)[-1]
sys.exit(0 if (last["revision"], last["status"]) == (int(sys.argv[1]), "deployed") else 1)' "$1"
	}
	t_check "and the release stays at revision 2, deployed" release_at 2
	pv_pvc_gone helm-dir helm-writer
fi
