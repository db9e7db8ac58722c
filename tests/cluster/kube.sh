# shellcheck shell=bash
# tests/cluster/kube.sh - what the cluster tests do with the API: kubectl as administrator,
# pods and volumes written from short descriptions, waits on conditions, a pod's events and
# mounts.  Sourced after tests/cluster/lib.sh.
#
#   kc ARGS...                     kubectl against the test cluster
#   kc_apply                       kubectl apply -f - (the manifest on stdin)
#   pod_ready NAME [SECS]          waits for the pod's Ready condition
#   pod_gone NAME [SECS]           deletes the pod and waits until it is gone
#   pod_events NAME                the messages of the pod's events, one a line
#   pod_event_has NAME TEXT [SECS] waits for an event of the pod whose message has TEXT
#   pod_exec NAME CMD...           runs a command in the pod's container
#   pod_uid NAME                   the pod's UID
#   writer_pod NAME VOLUME-YAML [MOUNT-YAML]  a busybox pod that appends a line to
#                                  /data/log every 0.2 s and exits (restarting) on a failed write
#   node_mounts PATTERN            "ID TARGET" of the node's mounts whose target matches

kc() {
	cluster_kubectl "$@"
}

kc_apply() {
	kc apply -f - >/dev/null
}

t_secs() { # $1 seconds, scaled by TEST_TIME_SCALE
	echo $(($1 * ${TEST_TIME_SCALE:-1}))
}

pod_ready() {
	kc wait --for=condition=Ready "pod/$1" --timeout="$(t_secs "${2:-120}")s" >/dev/null
}

pod_gone() {
	kc delete pod "$1" --ignore-not-found --wait=true --timeout="$(t_secs "${2:-120}")s" >/dev/null
}

pod_events() {
	kc get events --field-selector "involvedObject.kind=Pod,involvedObject.name=$1" \
		-o 'jsonpath={range .items[*]}{.message}{"\n"}{end}'
}

pod_event_has() {
	local name=$1 text=$2
	event_has() { pod_events "$name" | grep -qF -- "$text"; }
	cluster_wait "${3:-120}" "an event of pod $name saying '$text'" event_has
}

pod_exec() {
	local name=$1
	shift
	kc exec "$name" -- "$@" </dev/null
}

pod_uid() {
	kc get pod "$1" -o 'jsonpath={.metadata.uid}'
}

# A pod that writes all along: a line appended every 0.2 s; a failed write ends the container
# (so its restart count shows it).  $2: the pod's volumes (YAML list items, indented 2), $3:
# the container's volumeMounts or volumeDevices (default: the volume "data" at /data).
writer_pod() {
	local name=$1 volumes=$2
	local mounts=${3:-"      volumeMounts: [{name: data, mountPath: /data}]"}
	kc_apply <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $name, labels: {app: volagent-test}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: main
      image: localhost/busybox:1.37
      imagePullPolicy: Never
      command: [sh, -c, 'while echo "\$(date +%s.%N) $name" >>/data/log; do sleep 0.2; done; echo write failed; exit 1']
$mounts
  volumes:
$volumes
EOF
}

# "ID TARGET" of the node's mounts (in the cluster's mount namespace) whose target has $1.
node_mounts() {
	cluster_exec findmnt -rn -o ID,TARGET | grep -F -- "$1" || true
}
