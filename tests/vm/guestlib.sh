# shellcheck shell=bash
# guestlib.sh - sourced by the scripts that run inside the test VM (tests/nfs/guest-e2e.sh,
# tests/rbd/guest-krbd-nbd.sh): PASS:/FAIL: lines and their counters (the host side counts them
# as its own, see t_guest_results in testlib.sh), waiting on a condition, and questions about
# the guest's mount table, read from /proc/self/mountinfo so that nothing touches a mount
# that may hang.
#
#   pass NAME / fail NAME [WHY] / check NAME CMD...    one result ($passed, $failed)
#   now_ms; wait_for SECONDS CMD...                    polls CMD every 0.2 s
#   mi PATH                                            the last mountinfo line of PATH's mount
#   mounted / unmounted PATH; mi_type / mi_source PATH
#   count_under DIR; count_is DIR N                    mounts strictly below DIR
#   mounted_times PATH N                               mounted, and the agent's $LOG says it
#                                                      mounted PATH at least N times
#   umount_below DIR                                   lazily unmounts every mount below DIR
#   not_alive PID; stop_agent                          stops the agent of $agent_pid (TERM,
#                                                      KILL after 30 s) and clears it

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS: $1"; }
fail() { failed=$((failed + 1)); echo "FAIL: $1${2:+ ($2)}"; }
check() { local n=$1; shift; if "$@"; then pass "$n"; else fail "$n"; fi; }
now_ms() { local t=${EPOCHREALTIME/[.,]/}; echo $((10#$t / 1000)); }

wait_for() {
	local limit=$(($(now_ms) + $1 * 1000))
	shift
	until "$@"; do
		[ "$(now_ms)" -lt "$limit" ] || return 1
		sleep 0.2
	done
}

mi() { awk -v p="$1" '$5 == p {l = $0} END {print l}' /proc/self/mountinfo; }
mounted() { [ -n "$(mi "$1")" ]; }
unmounted() { [ -z "$(mi "$1")" ]; }
# Fields after " - ": fstype, source.
mi_type() { mi "$1" | sed 's/.* - \([^ ]*\) .*/\1/'; }
mi_source() { mi "$1" | sed 's/.* - [^ ]* \([^ ]*\) .*/\1/'; }
count_under() { awk -v p="$1/" 'index($5, p) == 1' /proc/self/mountinfo | wc -l; }
count_is() { [ "$(count_under "$1")" = "$2" ]; }
# Mount ids are reused by the kernel, so they cannot tell a new mount from the old one: the
# agent's log can.
mounted_times() { mounted "$1" && [ "$(grep -F 'msg="volume mounted"' "$LOG" | grep -cF "target=$1 ")" -ge "$2" ]; }

# Lazily, deepest first, so that a dead server cannot hang the cleanup.
umount_below() {
	awk -v p="$1/" 'index($5, p) == 1 {print $5}' /proc/self/mountinfo | sort -r |
		while read -r m; do umount -l "$m" 2>/dev/null; done
}

# A fresh work dir /tmp/$1.XXXXXX for one guest test: W, with ROOT, PODS (made), LOG and an
# empty config.json.
guest_workdir() {
	W=$(mktemp -d "/tmp/$1.XXXXXX")
	ROOT=$W/root
	PODS=$W/pods
	LOG=$W/agent.log
	mkdir -p "$PODS"
	echo '{}' >"$W/config.json"
}

# The agent's log, its last $1 lines, when a check failed or KEEP_LOG is set (for a cleanup).
show_log_if_failed() {
	if [ "${KEEP_LOG:-}" ] || [ "$failed" != 0 ]; then
		echo "--- agent log (last $1 lines):"
		tail -n "$1" "$LOG" 2>/dev/null | cut -c1-400
	fi
}

# Whether pid has exited (a zombie counts as exited).
not_alive() { [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" = Z ] || [ ! -e "/proc/$1" ]; }

agent_pid=
stop_agent() {
	[ -n "$agent_pid" ] || return 0
	kill -TERM "$agent_pid" 2>/dev/null
	if ! wait_for 30 not_alive "$agent_pid"; then
		echo "agent did not stop in 30s; killing it" >&2
		kill -KILL "$agent_pid" 2>/dev/null
	fi
	wait "$agent_pid" 2>/dev/null
	agent_pid=
}
