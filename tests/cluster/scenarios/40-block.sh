# shellcheck shell=bash
# A local block device as a filesystem PV (formatted once, staged, bound into the pod) and the
# same kind of device as a volumeMode: Block PV (the pod gets the device node).
new_loop() { # $1 name, $2 size: a loop device over a file of the cluster dir
	truncate -s "$2" "$CLUSTER_DIR/disks/$1.img"
	local l
	l=$(losetup -f --show "$CLUSTER_DIR/disks/$1.img") || return 1
	loops+=("$l")
	echo "$l"
}
block_pv() { # $1 name, $2 device, $3 volumeMode, $4 extra csi fields (YAML, one line)
	kc_apply <<EOF2
apiVersion: v1
kind: PersistentVolume
metadata: {name: $1}
spec:
  capacity: {storage: 256Mi}
  accessModes: [ReadWriteOnce]
  volumeMode: $3
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  csi: {driver: csi.volagent.io, volumeHandle: $1, volumeAttributes: {type: local, path: $2}$4}
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
  accessModes: [ReadWriteOnce]
  volumeMode: $3
  storageClassName: ""
  volumeName: $1
  resources: {requests: {storage: 256Mi}}
EOF2
}
fs_dev=$(new_loop fs-disk 256M)
block_pv fs-disk "$fs_dev" Filesystem ", fsType: ext4"
writer_pod fs-disk "    - {name: data, persistentVolumeClaim: {claimName: fs-disk}}"
t_check "a pod on a local block device PV (Filesystem, ext4) is Ready" pod_ready fs-disk
t_check "the device was formatted ext4 by the agent" sh -c '[ "$(blkid -o value -s TYPE "$1")" = ext4 ]' sh "$fs_dev"
fs_ok() { pod_exec fs-disk sh -c 'grep -q fs-disk /data/log && df /data | grep -q /data'; }
t_check "the pod writes to the device's filesystem" cluster_wait 20 "the fs-disk writes" fs_ok

raw_dev=$(new_loop raw-disk 64M)
block_pv raw-disk "$raw_dev" Block ""
kc_apply <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: raw-disk, labels: {app: volagent-test}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: main
      image: localhost/busybox:1.37
      imagePullPolicy: Never
      command: [sleep, "100000"]
      volumeDevices: [{name: data, devicePath: /dev/xvda}]
  volumes:
    - {name: data, persistentVolumeClaim: {claimName: raw-disk}}
EOF2
t_check "a pod on a volumeMode: Block PV is Ready" pod_ready raw-disk
t_check "the pod sees a block device at /dev/xvda" pod_exec raw-disk test -b /dev/xvda
pod_exec raw-disk sh -c 'echo volagent-raw-canary | dd of=/dev/xvda bs=512 count=1 conv=fsync 2>/dev/null'
t_check "the pod's write reached the node's device" sh -c 'head -c 19 "$1" | grep -q volagent-raw-canary' sh "$raw_dev"
t_check "the agent left the raw device unformatted" sh -c '[ -z "$(blkid -o value -s TYPE "$1")" ]' sh "$raw_dev"
