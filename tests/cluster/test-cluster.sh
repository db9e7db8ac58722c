#!/bin/bash
# test-cluster.sh - volagent on a real one-node Kubernetes: kubelet, API server, scheduler and
# controller manager built from upstream (tests/cluster/build), containerd and runc from
# Debian.  The DaemonSet is installed from deploy/ as an operator would, registers through
# kubelet's plugin watcher, and real pods use every volume type this kernel can give them;
# then kubelet, the agent and the node are disturbed while pods write.  docs/cluster.md lists
# each scenario and what it proves.
#
# One cluster for the whole file (about a minute to start); every pod, volume, loop device and
# process is removed at the end, also when a check fails (scripts/cluster-down detaches the
# loop devices over the cluster dir's files).  Needs root, the image from
# `make image` ($BUILD/volagent-image.tar) and the packages of scripts/deps/cluster-test.txt;
# skips (77) without them unless CI=true.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../vm/testlib.sh"
[ "$(id -u)" = 0 ] || t_skip "needs root"
image_tar=$t_repo/${BUILD:-build}/volagent-image.tar
t_need "no agent image ($image_tar; make image)" test -f "$image_tar"
t_need "containerd is not installed (scripts/install-deps test)" command -v containerd
PATH=$PATH:/usr/local/go/bin
t_need "go is not installed (the cluster is built from the Go module proxy)" command -v go
t_need "busybox-static is not installed" test -x /bin/busybox

. "$here/lib.sh"
cluster_new_dir cluster
. "$here/kube.sh"
cleanup() {
	if cluster_holder >/dev/null; then
		kc delete pods,deployments --all --wait=true --timeout=120s >/dev/null 2>&1
		kc delete pvc,pv --all --wait=true --timeout=60s >/dev/null 2>&1
	fi
	[ -n "${KEEP_CLUSTER:-}" ] && { echo "cluster kept in $CLUSTER_DIR"; return; }
	"$t_repo/scripts/cluster-down" --dir "$CLUSTER_DIR" || echo "cluster-down failed" >&2
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

t0=$EPOCHREALTIME
"$t_repo/scripts/cluster-up" --dir "$CLUSTER_DIR" || {
	t_fail "cluster-up" "logs: $(tail -n 20 "$CLUSTER_DIR"/logs/kubelet.log 2>/dev/null)"
	t_done
}
echo "cluster up: $(t_elapsed "$t0")"
t0=$EPOCHREALTIME
# deploy/overlays/provisioning: the base, the agent's Controller service and external-provisioner.
install=("$here/install-volagent" "$image_tar" --overlay provisioning)
"${install[@]}" || { t_fail "install the DaemonSet"; t_done; }
t_pass "the DaemonSet is installed from deploy/overlays/provisioning and its pod is Ready ($(t_elapsed "$t0"))"

for scenario in "$here"/scenarios/[0-9]*.sh; do
	echo "=== $(basename "$scenario")"
	# shellcheck source=/dev/null
	. "$scenario"
done
t_done
