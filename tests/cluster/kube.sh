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
#   test_pod NAME COMMAND VOLUMES [MOUNTS]   a busybox pod
#   writer_pod NAME VOLUMES [MOUNTS]  a busybox pod that appends a line to /data/log every
#                                  0.2 s and exits (restarting) on a failed write
#   sleeper_pod NAME VOLUMES [MOUNTS] a busybox pod that sleeps
#   pv_pvc NAME MODE SIZE VOLUMEMODE CSI   a PV of the driver on this node and its PVC
#   pv_pvc_gone NAME [POD]         deletes the pod, the PVC and the PV
#   new_loop NAME SIZE             a loop device over a file of the cluster dir
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

# A busybox pod.  $2: its command (a YAML flow list), $3: the pod's volumes (YAML list items,
# indented 2), $4: the container's volumeMounts or volumeDevices line (default: the volume
# "data" at /data).
test_pod() {
	local name=$1 command=$2 volumes=$3
	local mounts=${4:-"      volumeMounts: [{name: data, mountPath: /data}]"}
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
      command: $command
$mounts
  volumes:
$volumes
EOF
}

# A pod that writes all along: a line appended every 0.2 s; a failed write ends the container
# (so its restart count shows it).  Arguments as test_pod's, less the command.
writer_pod() {
	test_pod "$1" "[sh, -c, 'while echo \"\$(date +%s) $1\" >>/data/log; do sleep 0.2; done; echo write failed; exit 1']" \
		"$2" "${3:-}"
}

# A pod that only sleeps, its volumes mounted.  Arguments as writer_pod's.
sleeper_pod() {
	test_pod "$1" '[sleep, "100000"]' "$2" "${3:-}"
}

# A PersistentVolume of the driver and a PVC bound to it by name, both named $1.  $2: access
# mode, $3: size, $4: volumeMode, $5: the PV's csi fields (a YAML flow mapping's inside).
# Node affinity to this node, as every volume of a node-local driver has.
pv_pvc() {
	kc_apply <<EOF
apiVersion: v1
kind: PersistentVolume
metadata: {name: $1}
spec:
  capacity: {storage: $3}
  accessModes: [$2]
  volumeMode: $4
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  csi: {driver: csi.volagent.io, $5}
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions:
            - {key: topology.csi.volagent.io/node, operator: In, values: [$CLUSTER_NODE_NAME]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $1}
spec:
  accessModes: [$2]
  volumeMode: $4
  storageClassName: ""
  volumeName: $1
  resources: {requests: {storage: $3}}
EOF
}

# Deletes a pod, then its PVC and PV (all named $1 but the pod: $2, default $1).
pv_pvc_gone() {
	pod_gone "${2:-$1}"
	kc delete pvc "$1" --wait=true >/dev/null
	kc delete pv "$1" --wait=true >/dev/null
}

# A loop device over a new sparse file of the cluster dir: $1 name, $2 size.  cluster-down
# detaches it (its backing file lies under the cluster dir).
new_loop() {
	truncate -s "$2" "$CLUSTER_DIR/disks/$1.img" &&
		losetup -f --show "$CLUSTER_DIR/disks/$1.img"
}

# "ID TARGET" of the node's mounts (in the cluster's mount namespace) whose target has $1.
node_mounts() {
	cluster_exec findmnt -rn -o ID,TARGET | grep -F -- "$1" || true
}
