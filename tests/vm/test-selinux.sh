#!/bin/bash
# test-selinux.sh - SELinux mount labels end to end: one VM boot with SELinux on
# (security=selinux selinux=1 enforcing=0, permissive: enough for context mounts to take
# effect) runs tests/vm/guest-selinux.sh, which loads Debian's reference policy and drives
# the agent through CSI as kubelet does with seLinuxMount, for a local block volume and an
# NFS volume served by scripts/nfs-server on the host's loopback.  The build host's kernel
# runs without SELinux (tests/test-kubelet-driver.c says what it can check there).
# The server is stopped by its PID on every exit path.
# Skips (77) without qemu, ganesha, mount.nfs, the policy or root, except under CI=true.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/testlib.sh"

t_needs qemu nfs_server csi_client
t_need "Debian's SELinux reference policy is not installed (apt-get install selinux-policy-default policycoreutils selinux-utils)" \
	test -e /etc/selinux/default/policy/policy.33 -a -x /usr/sbin/load_policy
t_agent_bin

cleanup() { t_nfs_server_stop "$srv"; }
t_workdir selinux cleanup
srv=$work/nfs

env_lines=$("$t_repo/scripts/nfs-server" start "$srv" /export) || { t_fail "the NFS server starts"; t_done; }
eval "$env_lines"
VM_APPEND="security=selinux selinux=1 enforcing=0" t_vm_run "SELinux tests" -t "${SELINUX_TIMEOUT:-600}" \
	-e NFS_PORT="$NFS_PORT" -e VOLAGENT_BIN="$agent" -e REPO="$t_repo" \
	-- unshare -m --propagation private bash "$t_repo/tests/vm/guest-selinux.sh"
t_vm_guest_done
t_check "the host sees the file the pod wrote over NFS" test -s "$srv/export/kubelet-driver"
t_done
