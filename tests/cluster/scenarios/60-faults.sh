# shellcheck shell=bash
# Faults while pods write (rwx-a, rwx-b on the shared dir, fs-disk on a formatted device,
# raw-disk on a raw one): kubelet killed and restarted, the agent's pod deleted and made again
# by the DaemonSet, and a rolling update to a new image tag.  After each: every CSI mount of
# the node is the same mount (same mount ID: nothing was remounted), no writer's write failed
# (restart count 0) and every writer's log still grows.
writers="rwx-a rwx-b fs-disk"
csi_mounts() { node_mounts "$CLUSTER_DIR/kubelet/" | grep -E 'kubernetes.io~csi|kubernetes.io/csi' | sort; }
publish_calls() {
	cluster_exec curl -sf http://127.0.0.1:29810/metrics |
		awk '/^volagent_csi_calls_total\{method="Node\/NodePublishVolume",code="OK"\}/ { print $2 }'
}
restarts() {
	local p n=0 r
	for p in $writers raw-disk; do
		r=$(kc get pod "$p" -o 'jsonpath={.status.containerStatuses[0].restartCount}')
		n=$((n + ${r:-99}))
	done
	echo "$n"
}
writers_grow() { # every writer's log has more lines than in $1 (file of "pod lines")
	local p n before
	while read -r p before; do
		n=$(pod_exec "$p" sh -c 'wc -l </data/log') || return 1
		[ "$n" -gt "$before" ] || return 1
	done <"$1"
}
snapshot() { # $1 file: "pod lines" of each writer now
	local p
	for p in $writers; do echo "$p $(pod_exec "$p" sh -c 'wc -l </data/log')"; done >"$1"
}
same_after() { # $1 what was done; checks against $before_mounts and $before_lines
	local after
	after=$(csi_mounts)
	t_check "$1: every CSI mount kept its mount ID ($(echo "$before_mounts" | wc -l) mounts)" \
		test "$after" = "$before_mounts"
	[ "$after" = "$before_mounts" ] || diff <(echo "$before_mounts") <(echo "$after") | head -10
	t_check "$1: no writer's write failed (restart counts 0)" test "$(restarts)" = 0
	t_check "$1: every writer's log still grows" cluster_wait 30 "the writers to write" writers_grow "$CLUSTER_DIR/lines"
}
before_mounts=$(csi_mounts)
t_check "the writers' volumes are CSI mounts on the node" test "$(echo "$before_mounts" | grep -c .)" -ge 4

# kubelet killed (SIGKILL) and started again: it rebuilds its state from the pod dirs and
# vol_data.json and calls NodeStage/NodePublish again for what it finds mounted.
calls0=$(publish_calls)
snapshot "$CLUSTER_DIR/lines"
t_check "kubelet is killed and started again" cluster_restart kubelet
republished() { [ "$(publish_calls)" -ge $((calls0 + 4)) ]; }
t_check "kubelet republishes the node's volumes after its restart" cluster_wait 120 "kubelet's republishes" republished
same_after "kubelet restart"

# The agent's pod deleted: the DaemonSet makes another, which adopts the node's mounts.
snapshot "$CLUSTER_DIR/lines"
old_agent=$agent_pod
kc -n volagent delete pod "$old_agent" --wait=true >/dev/null
agent_back() {
	agent_pod=$(kc -n volagent get pods -l app.kubernetes.io/name=volagent -o 'jsonpath={.items[0].metadata.name}')
	[ -n "$agent_pod" ] && [ "$agent_pod" != "$old_agent" ] &&
		kc -n volagent wait --for=condition=Ready "pod/$agent_pod" --timeout=5s
}
t_check "the DaemonSet makes a new agent pod, Ready" cluster_wait 120 "a new agent pod" agent_back
same_after "agent pod deleted and recreated"

# A rolling update to a new tag of the image.
snapshot "$CLUSTER_DIR/lines"
old_agent=$agent_pod
t_check "a rolling update to localhost/volagent:rollout finishes" \
	"${install[@]}" --tag rollout --rolling
t_check "the agent pod now runs the new tag" cluster_wait 60 "the new agent pod" agent_back
t_check "the new agent pod's image is localhost/volagent:rollout" test \
	"$(kc -n volagent get pod "$agent_pod" -o 'jsonpath={.spec.containers[0].image}')" = localhost/volagent:rollout
same_after "rolling update"
for p in $writers raw-disk reader; do pod_gone "$p" 30; done
