#!/bin/bash
# run.sh - runs the rbd plugin's tests (every $BUILD/tests/test-rbd-* binary) against one
# throwaway Ceph cluster (scripts/ceph-cluster), which is always stopped again, also when a
# test fails or this script is interrupted.  Prints the binaries' cmocka summaries and a
# closing "N passed, N failed, N skipped" line for tests/run-tests.sh.
#
# Skips (77) when the Ceph packages are missing or not root, unless CI=true.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-build}
case "$build" in /*) ;; *) build="$here/$build" ;; esac
tmp=${TMPDIR:-/tmp}
passed=0 failed=0 skipped=0

. "$here/tests/vm/testlib.sh"

[ "$(id -u)" = 0 ] || t_skip "rbd tests: needs root"
for tool in ceph-mon ceph-osd rbd rbd-fuse; do
	command -v "$tool" >/dev/null || t_skip "rbd tests: $tool not installed (scripts/install-deps test)"
done
bins=()
for b in "$build"/tests/test-rbd-*; do
	case "$b" in *.o | *.d) continue ;; esac
	[ -x "$b" ] && bins+=("$b")
done
[ ${#bins[@]} -gt 0 ] || { echo "no rbd test binaries in $build/tests"; echo "0 passed, 1 failed"; exit 1; }

cluster=$(mktemp -d "$tmp/ceph.XXXXXX")
rmdir "$cluster"
stop_cluster() {
	"$here/scripts/ceph-cluster" down "$cluster" >/dev/null 2>&1 ||
		echo "rbd tests: stopping the cluster in $cluster failed" >&2
}
trap stop_cluster EXIT
trap 'exit 130' INT TERM HUP

t0=$SECONDS
if ! env_lines=$("$here/scripts/ceph-cluster" up "$cluster" 2>"$tmp/ceph-up.err"); then
	cat "$tmp/ceph-up.err"
	echo "rbd tests: the cluster did not come up"
	echo "0 passed, 1 failed"
	exit 1
fi
eval "$env_lines"
export CEPH_CONF CEPH_KEYRING CEPH_FSID CEPH_MON_HOST CEPH_POOL CEPH_CLIENT CEPH_ADMIN_KEY CEPH_DIR
echo "rbd tests: cluster up in $((SECONDS - t0))s ($CEPH_MON_HOST)"

for b in "${bins[@]}"; do
	name=$(basename "$b")
	dir="$tmp/$name"
	mkdir -p "$dir"
	echo "=== $name"
	log="$dir.log"
	TMPDIR="$dir" "$b" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test(s)\..*/\1/p' "$log" | tail -1)
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test(s).*/\1/p' "$log" | tail -1)
	p=${p:-0} f=${f:-0}
	if [ "$rc" = 77 ] && [ "$p$f" = 00 ]; then
		skipped=$((skipped + 1))
		continue
	fi
	[ "$rc" != 0 ] && [ "$f" = 0 ] && f=1
	passed=$((passed + p)) failed=$((failed + f))
done
echo "rbd tests: $((SECONDS - t0))s in all"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
