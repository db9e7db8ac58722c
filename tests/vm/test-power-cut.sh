#!/bin/bash
# test-power-cut.sh - hard resets of the test VM at random moments of a churn (issue 43).
#
# The node's disks are files here, given to qemu with the host's cache off (cache=none:
# O_DIRECT, so what the guest had not written out is gone when qemu dies, as at a power cut):
# a state disk (the agent's state dir, root dir, pod spec files, kubelet's root dir), a disk
# each for a plain and an encrypted CSI volume, one for a spec file's xfs block volume, and an
# ext4 with project quotas for a spec file's sized directory.  Each boot runs
# tests/vm/power-cut/guest-power-cut.py, which checks what the boot before left (no volume
# formatted twice, every synced canary readable, every device of the journal adopted or
# released, status ready), then churns; once it churns, this script waits a random time
# (from the boot's seed) and kills qemu with SIGKILL: the cut.  POWER_CUTS cuts (20 under
# CI=true, else 6), then a last boot that checks, tears everything down and finds nothing
# left.  The seeds are printed; POWER_CUT_SEED=N repeats a run; POWER_CUT_KEEP=DIR keeps the
# ledger and the agent's log of each boot there.  Skips (77) without qemu, except under CI=true.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/testlib.sh"

t_needs qemu agent csi_client
vm_pid=
# A boot still running when the test ends early (a signal, a failed command): scripts/vm/run
# stops its own qemu on TERM.
stop_vm() { [ -z "$vm_pid" ] || { kill -TERM "$vm_pid" 2>/dev/null || true; wait "$vm_pid" 2>/dev/null || true; }; }
t_workdir vm-power-cut stop_vm

cuts=${POWER_CUTS:-$([ "${CI:-}" = true ] && echo 20 || echo 6)}
seed0=${POWER_CUT_SEED:-$(date +%s)}
scale=${TEST_TIME_SCALE:-1}
echo "power cuts: $cuts, seeds $((seed0 + 1))..$((seed0 + cuts)) (POWER_CUT_SEED=$seed0 repeats them)"

disks=()
for d in state:256M plain:64M crypt:96M spec:320M quota:64M; do
	truncate -s "${d#*:}" "$work/${d%%:*}.img"
	disks+=(-q -drive -q "if=none,id=${d%%:*},file=$work/${d%%:*}.img,format=raw,cache=none,aio=threads"
		-q -device -q "virtio-blk-pci,drive=${d%%:*},serial=pc-${d%%:*}")
done
mkdir -p "$work/share"
ledger=$work/share/ledger

# One boot: the guest's checks, then (unless --last) its churn until we cut.  Sets boot_rc.
boot() { # boot K SEED [--last]
	local k=$1 seed=$2 last=${3:-} t0=$EPOCHREALTIME delay qpid
	rm -f "$ledger.churning" "$work/qemu.pid"
	VM_MODULES="virtio_blk ext4 xfs quota_v2 dm_mod dm_crypt xts ecb af_alg algif_skcipher" \
		"$t_repo/scripts/vm/run" -s "$work/share" -t "$(awk -v s="$scale" 'BEGIN{printf "%d", 600*s}')" \
		-e VOLAGENT_BIN="$agent" -e TEST_TIME_SCALE="$scale" "${disks[@]}" \
		-q -pidfile -q "$work/qemu.pid" \
		-- python3 "$here/power-cut/guest-power-cut.py" --ledger "$ledger" --boot "$k" \
		--seed "$seed" --stub-dir "$work/share/stubs" $last \
		>"$work/out.$k" 2>"$work/err.$k" &
	vm_pid=$!
	if [ -z "$last" ]; then
		# The cut comes at a random moment once the guest churns.
		while kill -0 "$vm_pid" 2>/dev/null && [ ! -e "$ledger.churning" ]; do sleep 0.2; done
		if [ -e "$ledger.churning" ]; then
			delay=$(python3 -c "import random; print('%.2f' % random.Random('cut-%d' % $seed).uniform(0.1, 8 * $scale))")
			sleep "$delay"
			qpid=$(cat "$work/qemu.pid" 2>/dev/null || true)
			if [ -n "$qpid" ] && kill -KILL "$qpid" 2>/dev/null; then
				echo "boot $k: cut ${delay}s into the churn"
			fi
		fi
	fi
	boot_rc=0
	wait "$vm_pid" || boot_rc=$?
	vm_pid=
	t_guest_results "$work/out.$k" /dev/null
	echo "boot $k: $(t_elapsed "$t0") (seed $seed)"
}

cut_done=0
for k in $(seq 1 "$cuts"); do
	boot "$k" $((seed0 + k))
	# A cut boot ends in qemu's death: scripts/vm/run's 125 "reported no exit code".
	if [ "$boot_rc" != 125 ] || ! grep -q '"ev": "churn"' "$ledger" ||
		grep -q '^FAIL' "$work/out.$k"; then
		t_fail "boot $k churned until the cut (exit $boot_rc)"
		tail -n 30 "$work/err.$k" >&2
		tail -n 30 "$work/share/agent.boot$k.log" >&2 || true
		break
	fi
	cut_done=$((cut_done + 1))
done
last=$((cuts + 1))
boot "$last" $((seed0 + last)) --last
t_check "the last boot checks and tears down (exit $boot_rc)" [ "$boot_rc" = 0 ]
[ "$boot_rc" = 0 ] || { tail -n 30 "$work/err.$last" >&2; tail -n 30 "$work/share/agent.boot$last.log" >&2 || true; }
t_check "$cut_done of $cuts power cuts made" [ "$cut_done" = "$cuts" ]
summary=$(cat "$work"/out.* | awk '/^counts /{ sub(/^counts /, ""); print }' |
	python3 -c 'import json, sys
tot = {}
for line in sys.stdin:
    for k, v in json.loads(line).items():
        tot[k] = tot.get(k, 0) + v
print(", ".join("%s %d" % kv for kv in sorted(tot.items())))')
churned=$(python3 -c 'import json, sys
n = {}
for line in open(sys.argv[1]):
    try:
        ev = json.loads(line)
    except ValueError:
        continue
    key = {"want": "want " + ev.get("state", ""), "uuid": "filesystems made or first seen",
           "canary": "canaries written"}.get(ev["ev"])
    if key:
        n[key] = n.get(key, 0) + 1
print(", ".join("%s %d" % kv for kv in sorted(n.items())))' "$ledger")
echo "power-cut churn: $churned"
echo "power-cut summary: $cut_done cuts, $((cut_done + 1)) boots checked: $summary"
[ -z "${POWER_CUT_KEEP:-}" ] || cp -r "$work/share/." "$POWER_CUT_KEEP/"
t_done
