#!/bin/bash
# test-rbd-vm.sh - the rbd plugin's krbd (`rbd map`) and nbd (`rbd-nbd map`) attach methods
# for real: this host's kernel has neither rbd nor nbd, the VM's (scripts/vm/run) has both.
# One VM boot runs tests/rbd/guest-krbd-nbd.sh, which starts a throwaway Ceph cluster inside
# the guest (a cluster on the host would advertise 127.0.0.1, unreachable from the guest),
# then drives the agent from pod spec files with --rbd-attach-methods krbd, then nbd: mount
# from /dev/rbdN and /dev/nbdN, write and read, kill -9 of rbd-nbd healed, pod removal
# leaves no mapping and no watcher.  See docs/rbd.md, "krbd and rbd-nbd, exercised in a VM".
#
# Nothing runs on the host but qemu (scripts/vm/run stops it by its PID on every exit path);
# the cluster, the agent and the mappings live and die in the guest.
# Skips (77) without qemu, the Ceph tools or root, except under CI=true (a failure).
# Environment: VOLAGENT_BIN (build/volagent), RBD_VM_TIMEOUT (VM limit, 840 s: under
# run-tests.sh's 900 s per test), RBD_VM_MEM (guest MiB, 2048), KEEP_LOG=1 (print the agent
# log's tail even on success).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../vm/testlib.sh"

t_need_qemu
for tool in ceph-mon ceph-osd ceph rbd rbd-nbd mkfs.ext4; do
	t_need "$tool is not installed (scripts/install-deps test)" command -v "$tool"
done
t_need "the VM's cluster and mappings need root" test "$(id -u)" = 0

t_agent_bin
t_workdir rbd-vm

t_vm_run "cluster + krbd and nbd tests" -m "${RBD_VM_MEM:-2048}" -t "${RBD_VM_TIMEOUT:-840}" \
	-e VOLAGENT_BIN="$agent" -e REPO="$t_repo" -e KEEP_LOG="${KEEP_LOG:-}" \
	-- unshare -m --propagation private bash "$t_repo/tests/rbd/guest-krbd-nbd.sh"

# The guest's results count as ours.
t_vm_guest_done
t_check "the guest reports its results" grep -q ' passed, 0 failed$' "$work/out"
t_done
