#!/bin/bash
# run-tests.sh - runs every test binary given on the command line, then the scripts in
# $CHECK_SCRIPTS, and prints one closing line "N passed, N failed, N skipped".
#
# Each binary gets its own TMPDIR under one run directory.  After each one, loop devices whose
# backing file lies under that directory are detached, so a test that crashed leaks nothing.
# A binary that exits 77 counts as skipped; a crash or a non-zero exit without a cmocka
# summary counts as one failure.
set -u
run_dir=$(mktemp -d /tmp/volagent-check.XXXXXX)
passed=0 failed=0 skipped=0
failed_names=()
per_test_timeout=${TEST_TIMEOUT:-900}

detach_leftover_loops() { # $1: directory whose files may back loop devices
	local f dev back
	for f in /sys/block/loop*/loop/backing_file; do
		[ -r "$f" ] || continue
		back=$(cat "$f" 2>/dev/null) || continue
		case "$back" in
		"$1"/*)
			dev=/dev/$(basename "$(dirname "$(dirname "$f")")")
			echo "run-tests: detaching leaked $dev ($back)" >&2
			losetup -d "$dev" 2>/dev/null || true
			;;
		esac
	done
}

count_cmocka() { # $1 log file, $2 exit code, $3 name
	local p f s
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test(s)\..*/\1/p' "$1" | awk '{s+=$1} END {print s+0}')
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test(s).*/\1/p' "$1" | awk '{s+=$1} END {print s+0}')
	s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test(s).*/\1/p' "$1" | awk '{s+=$1} END {print s+0}')
	# A plain "N passed, N failed[, N skipped]" line, for script tests.
	if [ "$p$f" = 00 ]; then
		local line
		line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -1)
		if [ -n "$line" ]; then
			p=$(echo "$line" | sed 's/^\([0-9]*\) passed.*/\1/')
			f=$(echo "$line" | sed 's/.* \([0-9]*\) failed.*/\1/')
			s=$(echo "$line" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')
			s=${s:-0}
		fi
	fi
	if [ "$2" = 77 ] && [ "$p$f" = 00 ]; then
		s=1
		echo "SKIP: $3 ($(tail -1 "$1"))"
	elif [ "$2" != 0 ] && [ "$f" = 0 ]; then
		f=1
	fi
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
	if [ "$f" != 0 ]; then failed_names+=("$3"); fi
}

run_one() { # $1 name, rest: command
	local name=$1 dir log rc
	shift
	dir="$run_dir/$(basename "$name")"
	mkdir -p "$dir"
	log="$dir.log"
	echo "=== $name"
	TMPDIR="$dir" timeout --signal=TERM --kill-after=30 "$per_test_timeout" "$@" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	detach_leftover_loops "$dir"
	# LeakSanitizer stops every thread with ptrace to scan for leaks at exit; on a loaded
	# machine that can fail by itself ("encountered a fatal error": no leak was found, none
	# was looked for).  Only then, and only once, the test runs again, leak check included.
	if [ "$rc" != 0 ] && ! grep -q '^\[  FAILED  \]' "$log" &&
		grep -q 'LeakSanitizer has encountered a fatal error' "$log"; then
		echo "NOTE: LeakSanitizer could not stop $name's threads at exit (not a leak); running it once more"
		TMPDIR="$dir" timeout --signal=TERM --kill-after=30 "$per_test_timeout" "$@" 2>&1 | tee "$log"
		rc=${PIPESTATUS[0]}
		detach_leftover_loops "$dir"
	fi
	count_cmocka "$log" "$rc" "$name"
	[ "$rc" = 124 ] && echo "TIMEOUT: $name after ${per_test_timeout}s"
}

for t in "$@"; do
	run_one "$t" "$t"
done
for s in ${CHECK_SCRIPTS:-}; do
	run_one "$s" bash "$s"
done

echo
if [ ${#failed_names[@]} -gt 0 ]; then
	echo "failed: ${failed_names[*]}"
fi
[ -n "${KEEP_TEST_DIRS:-}" ] || rm -rf --one-file-system "$run_dir" 2>/dev/null
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
