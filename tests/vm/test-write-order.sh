#!/bin/bash
# test-write-order.sh - the agent's writes replayed in the order the disk completed them
# (issue 43): one VM boot runs tests/vm/power-cut/guest-write-order.py, which puts the state
# dir and two volumes' disks on one dm-log-writes device (Debian's 6.1 kernel has the target;
# this host's kernel has no device-mapper), churns CSI calls and a pod spec file on it, then
# replays the log onto a zeroed disk and, at every flush point, checks that the journal
# parses and names no filesystem the disk does not show.  WRITE_ORDER_STEPS churn steps (30).
# Skips (77) without qemu, except under CI=true.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/testlib.sh"

t_needs qemu agent csi_client
t_workdir vm-write-order

steps=${WRITE_ORDER_STEPS:-30}
seed=${WRITE_ORDER_SEED:-$(date +%s)}
scale=${TEST_TIME_SCALE:-1}
echo "write order: $steps churn steps, seed $seed (WRITE_ORDER_SEED repeats it)"
disks=()
for d in data:96M log:2G replay:96M; do
	truncate -s "${d#*:}" "$work/${d%%:*}.img"
	disks+=(-q -drive -q "if=none,id=${d%%:*},file=$work/${d%%:*}.img,format=raw,cache=none,aio=threads"
		-q -device -q "virtio-blk-pci,drive=${d%%:*},serial=wo-${d%%:*}")
done
mkdir -p "$work/share"
VM_MODULES="virtio_blk ext4 loop dm_mod dm_log_writes" \
	t_vm_run "write-order replay" -s "$work/share" -t "$(awk -v s="$scale" 'BEGIN{printf "%d", 900*s}')" \
	-e VOLAGENT_BIN="$agent" -e TEST_TIME_SCALE="$scale" "${disks[@]}" \
	-- python3 "$here/power-cut/guest-write-order.py" --ledger "$work/share/ledger" \
	--stub-dir "$work/share/stubs" --seed "$seed" --steps "$steps"
t_guest_results "$work/out" "$work/err"
[ "$vm_rc" = 0 ] || tail -n 30 "$work/share/agent.boot1.log" >&2 || true
t_check "the replay's checks pass in the guest (exit $vm_rc)" [ "$vm_rc" = 0 ]
t_check "it replayed and checked flush points" grep -q '^replay ' "$work/out"
t_done
