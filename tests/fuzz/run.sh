#!/bin/bash
# run.sh - runs every libFuzzer target of tests/fuzz/: first over its seed corpus
# (tests/fuzz/corpus/<target>/), then fuzzing for FUZZ_SECONDS each (-max_total_time).
# A crash, a sanitizer report, a leak or a timeout is a failure; its input is kept in the work
# dir and named in the output.  Ends with "N passed, N failed[, N skipped]".
#
#   FUZZ_SECONDS=20     seconds of fuzzing per target; 0: the seed corpus only (make fuzz-smoke)
#   FUZZ_BUILD=build-fuzz   where `make fuzz-build` put the targets
#   FUZZ_WORK=DIR       new corpus entries and crash inputs (default: a temp dir, removed);
#                       `make fuzz` uses build-fuzz/work so longer runs build on earlier ones
#   FUZZ_TARGETS="pod-spec journal"   a subset
#
# Without the targets (no clang) it skips (77), unless CI=true.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${FUZZ_BUILD:-build-fuzz}
case "$build" in /*) ;; *) build="$root/$build" ;; esac
seconds=${FUZZ_SECONDS:-20}
targets=${FUZZ_TARGETS:-$(cd "$here" && ls fuzz-*.c | sed 's/^fuzz-//; s/\.c$//')}
passed=0 failed=0

missing=()
for t in $targets; do
	[ -x "$build/fuzz-$t" ] || missing+=("$t")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "fuzz: targets not built: ${missing[*]} (make fuzz-build needs clang)"
	[ "${CI:-}" = true ] && { echo "0 passed, 1 failed"; exit 1; }
	exit 77
fi

if [ -n "${FUZZ_WORK:-}" ]; then
	work=$FUZZ_WORK
	mkdir -p "$work"
	keep_work=1
else
	work=$(mktemp -d "${TMPDIR:-/tmp}/fuzz.XXXXXX")
	keep_work=
fi
cleanup() { [ -n "$keep_work" ] || rm -rf "$work"; }
trap cleanup EXIT

# -timeout: one input taking this long is a hang.  Leaks are errors (-detect_leaks=1).
common=(-timeout=25 -rss_limit_mb=2048 -detect_leaks=1 -print_final_stats=1)
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

for t in $targets; do
	bin="$build/fuzz-$t" seeds="$here/corpus/$t" log="$work/$t.log"
	mkdir -p "$work/$t/corpus" "$work/$t/crashes"
	# The seeds, each once (no fuzzing): every good and bad example must pass cleanly.
	if ! "$bin" -runs=0 "${common[@]}" "$seeds" >"$log.seed" 2>&1 ||
		grep -q -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:' "$log.seed"; then
		echo "FAIL: fuzz-$t on its seed corpus"
		tail -40 "$log.seed"
		failed=$((failed + 1))
		continue
	fi
	nseeds=$(ls "$seeds" | wc -l)
	if [ "$seconds" = 0 ]; then
		echo "ok: fuzz-$t: $nseeds seeds"
		passed=$((passed + 1))
		continue
	fi
	# New inputs go to the first dir (the work corpus), never into the repository's seeds.
	"$bin" "${common[@]}" -max_total_time="$seconds" \
		-artifact_prefix="$work/$t/crashes/" "$work/$t/corpus" "$seeds" >"$log" 2>&1
	rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | sed 's/cov: //')
	units=$(ls "$work/$t/corpus" | wc -l)
	crash=$(ls "$work/$t/crashes" 2>/dev/null | head -1)
	if [ "$rc" != 0 ] || [ -n "$crash" ]; then
		echo "FAIL: fuzz-$t (exit $rc) after ${runs:-?} runs; input: $work/$t/crashes/$crash"
		grep -E -A30 'ERROR:|runtime error:|deadly signal' "$log" | head -60
		echo "reproduce: $bin $work/$t/crashes/$crash"
		keep_work=1
		failed=$((failed + 1))
	else
		echo "ok: fuzz-$t: ${runs:-?} runs in ${seconds}s, coverage ${cov:-?} edges," \
			"$nseeds seeds + $units new inputs, no crash, leak or timeout"
		passed=$((passed + 1))
	fi
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
