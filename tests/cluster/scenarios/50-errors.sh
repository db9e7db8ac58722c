# shellcheck shell=bash
# Volumes that cannot be set up: the pod stays ContainerCreating and `kubectl describe`'s
# events carry the agent's own message, naming the field and the reason.  An encrypted local
# volume with its passphrase in a Secret (nodeStageSecretRef): where this kernel has no
# device-mapper, the agent's error says so; where it has one, the pod runs.  NFS where this
# kernel has no NFS client: the agent's error likewise.
mkdir -p "$CLUSTER_DIR/disks/exists"
pv_pvc missing-dir ReadWriteOnce 1Gi Filesystem \
	"volumeHandle: missing-dir, volumeAttributes: {type: local, path: /mnt/disks/no-such-dir}"
writer_pod missing-dir "    - {name: data, persistentVolumeClaim: {claimName: missing-dir}}"
t_check "a missing local path: the pod's events carry the agent's message naming the path" \
	pod_event_has missing-dir "/mnt/disks/no-such-dir"
pod_events missing-dir | grep -F no-such-dir | head -1 | cut -c1-300
pod_gone missing-dir

crypt_dev=$(new_loop crypt-disk 64M)
kc create secret generic crypt-key --from-literal=encryptionPassphrase=volagent-test-pass >/dev/null
kc create secret generic crypt-wrong --from-literal=encryptionPassphrase=not-the-pass >/dev/null
crypt_pv() { # $1 name, $2 secret
	pv_pvc "$1" ReadWriteOnce 64Mi Filesystem "volumeHandle: $1, fsType: ext4, \
volumeAttributes: {type: local, path: $crypt_dev, encrypted: \"true\"}, \
nodeStageSecretRef: {name: $2, namespace: default}"
	writer_pod "$1" "    - {name: data, persistentVolumeClaim: {claimName: $1}}"
}
crypt_pv crypt-ok crypt-key
# The kernel's own word (as the agent asks it): a /dev/mapper/control node can be left by any
# libdevmapper call on a kernel without device-mapper.
if [ -e /sys/class/misc/device-mapper ]; then
	t_check "an encrypted local volume, passphrase from a Secret: the pod is Ready" pod_ready crypt-ok
	t_check "the device holds a LUKS header, not a plain filesystem" \
		sh -c '[ "$(blkid -o value -s TYPE "$1")" = crypto_LUKS ]' sh "$crypt_dev"
else
	t_check "an encrypted volume on a kernel without device-mapper: the pod's events carry the agent's error" \
		pod_event_has crypt-ok "no device-mapper"
fi
pv_pvc_gone crypt-ok
crypt_pv crypt-wrong crypt-wrong
t_check "a wrong passphrase: the pod's events say so, naming the device" \
	pod_event_has crypt-wrong "wrong passphrase for the LUKS device $crypt_dev"
pod_gone crypt-wrong

# The project's NFS server (nfs-ganesha, scripts/nfs-server) inside the cluster's network
# namespace, where the agent (host network) reaches it on 127.0.0.1.
nfs_env=$(cluster_exec "$t_repo/scripts/nfs-server" start "$CLUSTER_DIR/nfs" /export) ||
	t_fail "the NFS server starts in the cluster's namespace"
eval "$nfs_env"
pv_pvc nfs ReadWriteMany 1Gi Filesystem "volumeHandle: nfs-export, \
volumeAttributes: {type: nfs, server: 127.0.0.1, share: /export}"
kc patch pv nfs --type merge -p "{\"spec\": {\"mountOptions\": [\"vers=4.1\", \"port=$NFS_PORT\"]}}" >/dev/null
writer_pod nfs "    - {name: data, persistentVolumeClaim: {claimName: nfs}}"
if grep -qw nfs4 /proc/filesystems; then
	t_check "a pod on an NFS PV is Ready" pod_ready nfs
	nfs_written() { grep -q nfs "$CLUSTER_DIR/nfs/export/log"; }
	t_check "its writes reach the NFS server's export" cluster_wait 30 "the NFS writes" nfs_written
else
	t_check "NFS on a kernel without an NFS client: the pod's events carry the agent's error" \
		pod_event_has nfs "this kernel has no NFS client"
fi
pv_pvc_gone nfs
cluster_exec "$t_repo/scripts/nfs-server" stop "$CLUSTER_DIR/nfs"
