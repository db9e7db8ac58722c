# shellcheck shell=bash
# A local block device as a filesystem PV (formatted once, staged, bound into the pod) and the
# same kind of device as a volumeMode: Block PV (the pod gets the device node).
fs_dev=$(new_loop fs-disk 256M)
pv_pvc fs-disk ReadWriteOnce 256Mi Filesystem \
	"volumeHandle: fs-disk, fsType: ext4, volumeAttributes: {type: local, path: $fs_dev}"
writer_pod fs-disk "    - {name: data, persistentVolumeClaim: {claimName: fs-disk}}"
t_check "a pod on a local block device PV (Filesystem, ext4) is Ready" pod_ready fs-disk
t_check "the device was formatted ext4 by the agent" sh -c '[ "$(blkid -o value -s TYPE "$1")" = ext4 ]' sh "$fs_dev"
fs_ok() { pod_exec fs-disk sh -c 'grep -q fs-disk /data/log && df /data | grep -q /data'; }
t_check "the pod writes to the device's filesystem" cluster_wait 20 "the fs-disk writes" fs_ok

raw_dev=$(new_loop raw-disk 64M)
pv_pvc raw-disk ReadWriteOnce 64Mi Block "volumeHandle: raw-disk, volumeAttributes: {type: local, path: $raw_dev}"
sleeper_pod raw-disk "    - {name: data, persistentVolumeClaim: {claimName: raw-disk}}" \
	"      volumeDevices: [{name: data, devicePath: /dev/xvda}]"
t_check "a pod on a volumeMode: Block PV is Ready" pod_ready raw-disk
t_check "the pod sees a block device at /dev/xvda" pod_exec raw-disk test -b /dev/xvda
pod_exec raw-disk sh -c 'echo volagent-raw-canary | dd of=/dev/xvda bs=512 count=1 conv=fsync 2>/dev/null'
t_check "the pod's write reached the node's device" sh -c 'head -c 19 "$1" | grep -q volagent-raw-canary' sh "$raw_dev"
t_check "the agent left the raw device unformatted" sh -c '[ -z "$(blkid -o value -s TYPE "$1")" ]' sh "$raw_dev"
