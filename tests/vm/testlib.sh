# shellcheck shell=bash
# testlib.sh - sourced by the shell tests under tests/vm and tests/ceph: pass/fail counters,
# the closing "N passed, N failed" line that tests/run-tests.sh reads, and skipping.
#
#   t_pass NAME / t_fail NAME [WHY]   count one result and print it
#   t_check NAME CMD...               pass if CMD succeeds
#   t_need REASON CMD...              skip (exit 77, REASON as the last line) unless CMD
#                                     succeeds; under CI=true a missing requirement fails
#   t_done                            print the closing line; exit 1 if anything failed

t_passed=0
t_failed=0
t_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

t_pass() {
	t_passed=$((t_passed + 1))
	echo "PASS: $1"
}

t_fail() {
	t_failed=$((t_failed + 1))
	echo "FAIL: $1${2:+ ($2)}"
}

t_check() {
	local name=$1
	shift
	if "$@"; then t_pass "$name"; else t_fail "$name"; fi
}

t_need() {
	local reason=$1
	shift
	if "$@" >/dev/null 2>&1; then
		return 0
	fi
	if [ "${CI:-}" = true ]; then
		t_fail "$reason (a requirement under CI)"
		t_done
	fi
	echo "SKIP: $reason"
	exit 77
}

t_done() {
	echo "$t_passed passed, $t_failed failed"
	[ "$t_failed" = 0 ] || exit 1
	exit 0
}
