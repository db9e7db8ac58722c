# shellcheck shell=bash
# A local directory PV shared ReadWriteMany by two pods on the node, and the same directory
# through a read-only PVC: kubelet stages once, publishes three times, and a write through the
# read-only one fails with EROFS.
mkdir -p "$CLUSTER_DIR/disks/shared"
kc_apply <<EOF2
apiVersion: v1
kind: PersistentVolume
metadata: {name: shared-dir}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  csi:
    driver: csi.volagent.io
    volumeHandle: shared-dir
    volumeAttributes: {type: local, path: /mnt/disks/shared}
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions:
            - {key: topology.csi.volagent.io/node, operator: In, values: [$CLUSTER_NODE_NAME]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: shared-dir}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  volumeName: shared-dir
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: shared-dir-ro}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadOnlyMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  csi:
    driver: csi.volagent.io
    volumeHandle: shared-dir-ro
    readOnly: true
    volumeAttributes: {type: local, path: /mnt/disks/shared}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: shared-dir-ro}
spec:
  accessModes: [ReadOnlyMany]
  storageClassName: ""
  volumeName: shared-dir-ro
  resources: {requests: {storage: 1Gi}}
EOF2
for p in rwx-a rwx-b; do
	writer_pod "$p" "    - {name: data, persistentVolumeClaim: {claimName: shared-dir}}"
done
kc_apply <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: reader, labels: {app: volagent-test}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: main
      image: localhost/busybox:1.37
      imagePullPolicy: Never
      command: [sleep, "100000"]
      volumeMounts: [{name: data, mountPath: /data, readOnly: true}]
  volumes:
    - {name: data, persistentVolumeClaim: {claimName: shared-dir-ro, readOnly: true}}
EOF2
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
