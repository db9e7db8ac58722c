#!/bin/bash
# guest-mount-table.sh - the mount table's fallback on an older kernel, run inside the test VM
# (Debian's 6.1: no fanotify mount events, no listmount) by tests/vm/test-mount-table.sh, in a
# private mount namespace of its own.  The agent ($VOLAGENT_BIN) must choose libmount's monitor
# and mountinfo at start-up and say why, mount a pod spec's local volume, and mount it again
# after it is unmounted by hand (health checks and the periodic resync are pushed out of the
# way, so only the monitor can notice).  Then runs tests/test-mount-table and
# tests/test-agent-mount-events ($MOUNT_TABLE_TEST, $AGENT_EVENTS_TEST) when they are built:
# their fallback cases pass here and their events cases skip.  Prints PASS:/FAIL:
# lines and "N passed, N failed".
set -uo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/guestlib.sh"

guest_workdir mount-table
mkdir -p "$W/data"
echo data-content >"$W/data/hello"

cleanup() {
	stop_agent
	umount_below "$W"
	show_log_if_failed 40
}
trap cleanup EXIT

echo "guest kernel: $(uname -r)"
echo "{\"pod\": {\"uid\": \"p1\"}, \"volumes\": [{\"name\": \"data\", \"local\": {\"path\": \"$W/data\"}}]}" \
	>"$PODS/.p1.tmp" && mv "$PODS/.p1.tmp" "$PODS/p1.json"
"$VOLAGENT_BIN" run --root-dir "$ROOT" --state-dir "$W/state" --pods-dir "$PODS" \
	--config "$W/config.json" --device-inventory false --health-interval 1h \
	--resync-interval 1h >>"$LOG" 2>&1 &
agent_pid=$!

target=$ROOT/pods/p1/volumes/kubernetes.io~local/data
check "the volume is mounted" wait_for 30 mounted_times "$target" 1
check "the probe chose libmount, once" test "$(grep -cF 'msg="mount table source"' "$LOG")" = 1
check "the start-up log says libmount and why" grep -qE 'msg="mount table source".*source=libmount.*reason=' "$LOG"
grep -F 'msg="mount table source"' "$LOG" | sed 's/^/probe: /'
check "the pod sees the data" grep -qx data-content "$target/hello"
umount "$target"
check "unmounted by hand: mounted again" wait_for 30 mounted_times "$target" 2
check "the pod sees the data again" grep -qx data-content "$target/hello"
check "no sanitizer error in the agent log" sh -c "! grep -q -e 'AddressSanitizer' -e 'runtime error' '$LOG'"
stop_agent

# The cmocka tests of both sources: the fallback cases pass, the events ones skip here.
# run_cases NAME BINARY MIN-CASES
run_cases() {
	local out=$W/$1.out
	if [ -z "$2" ] || [ ! -x "$2" ]; then
		echo "$1 is not built: its cases were not run here"
		return
	fi
	"$2" >"$out" 2>&1
	check "$1 exits 0" test $? = 0
	check "$1: the fallback cases pass" test "$(grep -c '^\[       OK \] fallback: ' "$out")" -ge "$3"
	check "$1: the events cases skip" test "$(grep -c '^\[  SKIPPED \] events: ' "$out")" -ge "$3"
	grep -E '^\[ +(OK|FAILED) +\] ' "$out" | sed "s/^/$1: /"
}
run_cases test-mount-table "${MOUNT_TABLE_TEST:-}" 8
run_cases test-agent-mount-events "${AGENT_EVENTS_TEST:-}" 3

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
