# shellcheck shell=bash
# An rbd PV against the project's test Ceph cluster (scripts/ceph-cluster: one monitor, one
# OSD), started inside the cluster's network namespace where the agent reaches it on
# 127.0.0.1, its key in a Secret (nodeStageSecretRef).  This kernel has no krbd or nbd: the
# agent falls back to rbd-fuse and a loop device, as the host rbd tests do.  The pod writes,
# is deleted, and the image is left with no watcher (nothing of the attachment is left).
ceph_dir=$CLUSTER_DIR/ceph
if ! ceph_env=$(cluster_exec "$t_repo/scripts/ceph-cluster" up "$ceph_dir" 2>"$CLUSTER_DIR/logs/ceph-up.log"); then
	t_fail "the Ceph test cluster starts in the cluster's namespace" "$(tail -n 5 "$CLUSTER_DIR/logs/ceph-up.log")"
else
	eval "$ceph_env"
	export CEPH_CONF
	rbd_() { cluster_exec env CEPH_CONF="$CEPH_CONF" rbd "$@"; }
	rbd_ create --size 128 "$CEPH_POOL/cluster-vol"
	mon=$(echo "$CEPH_MON_HOST" | sed -n 's/.*v1:\([0-9.]*:[0-9]*\).*/\1/p')
	kc create secret generic ceph-admin --from-literal=userID=admin \
		--from-literal=userKey="$CEPH_ADMIN_KEY" >/dev/null
	pv_pvc rbd-vol ReadWriteOnce 128Mi Filesystem "volumeHandle: rbd-cluster-vol, fsType: ext4, \
nodeStageSecretRef: {name: ceph-admin, namespace: default}, \
volumeAttributes: {type: rbd, monitors: \"$mon\", pool: $CEPH_POOL, image: cluster-vol}"
	writer_pod rbd-writer "    - {name: data, persistentVolumeClaim: {claimName: rbd-vol}}"
	t_check "a pod on an rbd PV (key from a Secret) is Ready" pod_ready rbd-writer 180
	rbd_written() { pod_exec rbd-writer grep -q rbd-writer /data/log; }
	t_check "the pod writes to the rbd image's filesystem" cluster_wait 30 "the rbd writes" rbd_written
	t_check "the image has a watcher (the agent's client) while the pod runs" \
		sh -c '[ -n "$1" ]' sh "$(rbd_ status "$CEPH_POOL/cluster-vol" --format json | python3 -c 'import json,sys; print(json.load(sys.stdin).get("watchers") or "")')"
	t_check "the rbd pod, its PVC and PV are deleted" pv_pvc_gone rbd-vol rbd-writer
	no_watchers() { [ "$(rbd_ status "$CEPH_POOL/cluster-vol" --format json | python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("watchers") or []))')" = 0 ]; }
	t_check "after the pod, the image has no watcher (unstaged and detached)" cluster_wait 60 "the rbd client to go" no_watchers
	cluster_exec "$t_repo/scripts/ceph-cluster" down "$ceph_dir" >/dev/null 2>&1
fi
