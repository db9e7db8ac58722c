#!/bin/bash
# test-mount-table.sh - the mount table's libmount fallback on Debian's 6.1 kernel (no mount
# events): one VM boot runs tests/vm/guest-mount-table.sh, which checks that the agent's probe
# chooses the fallback and logs it once, and that a pod volume unmounted by hand is mounted
# again; and runs tests/test-mount-table and tests/test-agent-mount-events there when they are
# built (their fallback cases pass, their events cases skip).  The events path is tested on the host's kernel (tests/test-mount-table.c,
# tests/test-agent-mount-events.c).  Skips (77) without qemu, except under CI=true.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/testlib.sh"

t_needs qemu agent
t_workdir vm-mount-table

t_vm_run "mount table fallback tests" -s "$work" -t "${VM_TIMEOUT:-300}" -e VOLAGENT_BIN="$agent" \
	-e KEEP_LOG="${KEEP_LOG:-}" -e MOUNT_TABLE_TEST="$t_repo/${BUILD:-build}/tests/test-mount-table" \
	-e AGENT_EVENTS_TEST="$t_repo/${BUILD:-build}/tests/test-agent-mount-events" \
	-- unshare -m --propagation private bash "$t_repo/tests/vm/guest-mount-table.sh"
t_vm_guest_done
t_done
