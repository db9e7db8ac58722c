#!/bin/bash
# test-journal-eio.sh - a state dir whose disk starts failing every write, in the test VM
# (Debian's 6.1 kernel with device-mapper's flakey target; this host's kernel has no
# device-mapper): one boot runs tests/test-journal-full there, whose case
# test_vm_state_disk_eio runs only where dm-flakey exists: the journal's saves fail with EIO,
# a stage whose record cannot be saved is refused (ABORTED naming the state dir) with nothing
# formatted, a published volume stays, one error line, and once the disk heals the same
# stage goes through without a restart.  Its other cases (a full tmpfs) run there too.
# Skips (77) without qemu, except under CI=true.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/testlib.sh"

t_needs qemu agent
t_test_bin test-journal-full
t_workdir vm-journal-eio

VM_MODULES="${VM_MODULES:-} dm_mod dm_flakey loop ext4" \
	t_vm_run "journal tests" -s "$work" -t "${VM_TIMEOUT:-300}" -e VOLAGENT_BIN="$agent" \
	-e TEST_TIME_SCALE="${TEST_TIME_SCALE:-2}" -e CI="${CI:-}" \
	-- unshare -m --propagation private "$test_bin"
cat "$work/out"
tail -20 "$work/err" >&2
t_check "test-journal-full in the guest passes (exit $vm_rc)" [ "$vm_rc" = 0 ]
t_check "its failing-disk case ran there" grep -q '^\[       OK \] test_vm_state_disk_eio' "$work/out"
t_done
