# shellcheck shell=bash
# A local directory PV shared ReadWriteMany by two pods on the node, and the same directory
# through a read-only PVC: kubelet stages once, publishes three times, and a write through the
# read-only one fails with EROFS.
mkdir -p "$CLUSTER_DIR/disks/shared"
pv_pvc shared-dir ReadWriteMany 1Gi Filesystem \
	"volumeHandle: shared-dir, volumeAttributes: {type: local, path: /mnt/disks/shared}"
pv_pvc shared-dir-ro ReadOnlyMany 1Gi Filesystem \
	"volumeHandle: shared-dir-ro, readOnly: true, volumeAttributes: {type: local, path: /mnt/disks/shared}"
for p in rwx-a rwx-b; do
	writer_pod "$p" "    - {name: data, persistentVolumeClaim: {claimName: shared-dir}}"
done
sleeper_pod reader "    - {name: data, persistentVolumeClaim: {claimName: shared-dir-ro, readOnly: true}}" \
	"      volumeMounts: [{name: data, mountPath: /data, readOnly: true}]"
rwx_ready() { pod_ready rwx-a && pod_ready rwx-b; }
t_check "two pods share a ReadWriteMany local directory PV" rwx_ready
both_write() { pod_exec rwx-a grep -q rwx-b /data/log && pod_exec rwx-b grep -q rwx-a /data/log; }
t_check "each RWX pod reads the other's writes" cluster_wait 30 "both writers' lines" both_write
t_check "the read-only PVC's pod is Ready" pod_ready reader
t_check "the read-only pod reads the shared data" pod_exec reader grep -q rwx-a /data/log
ro_write=$(pod_exec reader sh -c 'echo x >/data/ro-test 2>&1; echo rc=$?' 2>&1)
t_check "a write through the read-only PVC fails with EROFS ($ro_write)" \
	sh -c 'case "$1" in *"Read-only file system"*) exit 0 ;; *) exit 1 ;; esac' sh "$ro_write"
t_check "the shared dir holds the pods' file on the node" test -s "$CLUSTER_DIR/disks/shared/log"
