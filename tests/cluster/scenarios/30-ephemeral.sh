# shellcheck shell=bash
# CSI inline ephemeral volumes: kubelet publishes with csi.storage.k8s.io/ephemeral and no
# stage; the directory is made under the agent's ephemeral dir and removed with the pod.  A
# size needs project quotas on that dir's filesystem: where the kernel has none (this build
# host), the pod's events carry the agent's error naming the size and what to enable.
writer_pod eph "    - {name: data, csi: {driver: csi.volagent.io, volumeAttributes: {type: local}}}"
t_check "a pod with a CSI inline ephemeral volume is Ready" pod_ready eph
eph_uid=$(pod_uid eph)
t_check "the ephemeral volume is a mount at kubelet's target for the pod" \
	test -n "$(node_mounts "pods/$eph_uid/volumes/kubernetes.io~csi/data/mount")"
eph_dirs_before=$(find "$CLUSTER_DIR/volagent" -maxdepth 3 -type d -name 'v-*' | wc -l)
t_check "the ephemeral dir exists under the agent's state dir" test "$eph_dirs_before" -ge 1
t_check "the ephemeral pod is deleted" pod_gone eph
eph_dir_gone() { [ "$(find "$CLUSTER_DIR/volagent" -maxdepth 3 -type d -name 'v-*' | wc -l)" -lt "$eph_dirs_before" ]; }
t_check "its directory is removed with the pod" cluster_wait 30 "the ephemeral dir to go" eph_dir_gone
t_check "no mount of the ephemeral pod is left" test -z "$(node_mounts "pods/$eph_uid/")"

writer_pod eph-sized "    - {name: data, csi: {driver: csi.volagent.io, volumeAttributes: {type: local, size: 64Mi}}}"
if cluster_exec sh -c 'd=$(mktemp -d) && f=$(mktemp) && truncate -s 300M "$f" && mkfs.xfs -q "$f" &&
		mount -o loop,prjquota "$f" "$d"; r=$?; umount "$d" 2>/dev/null; rm -f "$f"; rmdir "$d"; exit $r' 2>/dev/null; then
	t_check "a sized ephemeral volume's pod is Ready" pod_ready eph-sized
else
	t_check "a sized ephemeral volume on a filesystem without project quotas: the pod's events name the size and the missing quotas" \
		pod_event_has eph-sized "does not enforce project quotas"
fi
pod_gone eph-sized
