#!/bin/bash
# guest-selinux.sh - SELinux mount labels in the test VM, run by tests/vm/test-selinux.sh in a
# guest booted with SELinux on (security=selinux selinux=1 enforcing=0), in a private mount
# namespace.  It mounts selinuxfs, loads Debian's reference policy (selinux-policy-default,
# from the host's root) with load_policy, and drives the agent ($VOLAGENT_BIN, CSI only) with
# tests/kubelet/lifecycle.py passing the pods' label as kubelet does with seLinuxMount
# (context="...", quoted, a comma inside) for a local block volume (a loop device, ext4) and an
# NFS volume (the host's ganesha at 10.0.2.2:$NFS_PORT): the label is on the filesystem's
# mount in the mount table and on files (getxattr security.selinux, ls -Z), the second pod
# binds that mount without a second filesystem mount, a pod with another label is refused,
# `volagent status` shows the label.  Prints PASS:/FAIL: lines and "N passed, N failed".
set -uo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/guestlib.sh"

guest_workdir selinux
KUBELET=$W/kubelet
SOCK=$KUBELET/plugins/csi.volagent.io/csi.sock
loop=

cleanup() {
	stop_agent
	umount_below "$W"
	[ -z "$loop" ] || losetup -d "$loop"
	show_log_if_failed 40
}
trap cleanup EXIT

mkdir -p /sys/fs/selinux
mount -t selinuxfs selinuxfs /sys/fs/selinux 2>/dev/null
check "the guest kernel runs SELinux (selinuxfs: /sys/fs/selinux/enforce)" test -e /sys/fs/selinux/enforce
out=$(load_policy 2>&1)
check "Debian's reference policy loads (load_policy${out:+: $out})" test "$(cat /sys/fs/selinux/policyvers 2>/dev/null)" -gt 0
echo "  getenforce: $(getenforce 2>&1)"

# Kubernetes' own label type (container_file_t) is in the container policy module, which
# Debian's reference policy does not have; a type it has stands in, with the same categories
# (and so the same quoted comma).
label= other=
for t in container_file_t svirt_image_t; do
	mkdir -p "$W/probe"
	if mount -t tmpfs -o "context=\"system_u:object_r:$t:s0:c12,c34\"" tmpfs "$W/probe" 2>/dev/null; then
		umount "$W/probe"
		label="system_u:object_r:$t:s0:c12,c34"
		other="system_u:object_r:$t:s0:c5,c6"
		break
	fi
done
check "the policy knows a label to mount with (${label:-none})" test -n "$label"
[ -n "$label" ] || { echo "$passed passed, $failed failed"; exit 1; }

mkdir -p "$KUBELET"
"$VOLAGENT_BIN" run --root-dir "$ROOT" --state-dir "$W/state" --pods-dir "$PODS" \
	--config "$W/config.json" --device-inventory false --csi --kubelet-root-dir "$KUBELET" \
	--node-id node-a >>"$LOG" 2>&1 &
agent_pid=$!
check "the CSI socket is up" wait_for 30 test -S "$SOCK"

# lifecycle LABEL PV: the whole lifecycle with the pods' SELinux label; its lines count here.
lifecycle() {
	timeout 300 /usr/bin/python3 "$REPO/tests/kubelet/lifecycle.py" --root "$KUBELET" \
		--stub-dir "$W/stubs" --node-name node-a --node-label "kubernetes.io/hostname=$(hostname)" \
		--label "$1" --pv "$2" --selinux-label "$label" --other-selinux-label "$other" \
		--status-cmd "[\"$VOLAGENT_BIN\", \"status\", \"--state-dir\", \"$W/state\"]" \
		>"$W/$1.out" 2>&1
	while IFS= read -r line; do
		case $line in
		"PASS: "*) pass "${line#PASS: }" ;;
		"FAIL: "*) fail "${line#FAIL: }" ;;
		*) echo "  $line" ;;
		esac
	done <"$W/$1.out"
}

truncate -s 64M "$W/disk.img"
loop=$(losetup -f --show "$W/disk.img")
t0=$(now_ms)
lifecycle block "{\"name\": \"pv-sel-blk\", \"handle\": \"sel-blk\", \"accessModes\": [\"ReadWriteOnce\"], \"fsType\": \"ext4\", \"volumeAttributes\": {\"type\": \"local\", \"path\": \"$loop\"}}"
echo "  local block: $(($(now_ms) - t0)) ms"
t0=$(now_ms)
lifecycle nfs "{\"name\": \"pv-sel-nfs\", \"handle\": \"sel-nfs\", \"accessModes\": [\"ReadWriteMany\"], \"mountOptions\": [\"vers=4.1\", \"port=$NFS_PORT\"], \"volumeAttributes\": {\"type\": \"nfs\", \"server\": \"10.0.2.2\", \"share\": \"/export\"}}"
echo "  nfs: $(($(now_ms) - t0)) ms"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
