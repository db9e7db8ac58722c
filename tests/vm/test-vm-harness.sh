#!/bin/bash
# test-vm-harness.sh - smoke test of scripts/vm/run: one VM boot, then checks that the exit
# code, stdout and stderr come back, that a file written to the shared dir reaches the host,
# that host binaries (a freshly compiled one and the project's build) run in the guest, that
# -e passes values intact, and that the modules the plugins need load (nfs, rbd, nbd).  The
# boot is made to stall first (VM_TEST_STALL_FIRST_BOOT=1, a forced failure: the first qemu
# starts with its CPUs stopped, so the guest shows no sign of life), which checks that run stops
# such a guest after VM_LIFE_TIMEOUT and boots it once more, saying so.
# Skips (77) without qemu-system-x86_64, except under CI=true, where that is a failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/testlib.sh"

t_need_qemu

work=$(mktemp -d "${TMPDIR:-/tmp}/vm-harness.XXXXXX")
trap 'rm -rf "$work"' EXIT
share=$work/share
mkdir -p "$share"

# A host-built binary, if there is a compiler; and the project's own build, if made.
if command -v cc >/dev/null; then
	printf '#include <stdio.h>\nint main(void) { puts("compiled-on-host"); return 0; }\n' >"$work/hello.c"
	cc -o "$share/hello" "$work/hello.c"
fi
agent=$t_repo/${BUILD:-build}/volagent

cat >"$share/guest.sh" <<'GUEST'
# Runs in the guest: print facts for the host to check, then exit 3.
echo "stdout-marker"
echo "stderr-marker" >&2
echo "env=[$ODD]"
echo "from-guest $(uname -r)" >"$SHARE/from-guest.txt"
echo "kernel=$(uname -r)"
echo "env-sum=$(sha256sum /usr/bin/env | cut -d' ' -f1)"
[ ! -x "$SHARE/hello" ] || echo "hello=$("$SHARE/hello")"
[ ! -x "$AGENT" ] || echo "agent=$("$AGENT" version)"
for m in nfs rbd nbd; do
	if modprobe "$m"; then echo "module-$m=ok"; else echo "module-$m=failed"; fi
done
modprobe nfsv4 && grep -q "	nfs4$" /proc/filesystems && echo "fs-nfs4=ok"
exit 3
GUEST

odd="a b 'c' \"d\" \$e"
t0=$EPOCHREALTIME
rc=0
(cd "$work" && VM_TEST_STALL_FIRST_BOOT=1 VM_LIFE_TIMEOUT=20 \
	"$t_repo/scripts/vm/run" -s "$share" -t 300 -e SHARE="$share" -e AGENT="$agent" -e ODD="$odd" \
	-- sh "$share/guest.sh") >"$work/out" 2>"$work/err" || rc=$?
echo "vm boot + command: $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1fs", b - a}')"
sed 's/^/  guest stdout: /' "$work/out"
sed 's/^/  guest stderr: /' "$work/err"

has() { grep -qxF -- "$1" "$work/$2"; }
t_check "exit code 3 of the guest command comes back" [ "$rc" = 3 ]
t_check "a guest with no sign of life is stopped and booted once more, saying so" \
	grep -q "^vm/run: the guest showed no sign of life within [0-9]*s .*booting once more" "$work/err"
t_check "the forced failure is announced as such" grep -q "forced failure" "$work/err"
t_check "stdout comes back" has stdout-marker out
t_check "stderr comes back" has stderr-marker err
t_check "-e passes a value with spaces and quotes intact" has "env=[$odd]" out
t_check "a file written to the shared dir is seen on the host" grep -q '^from-guest 6\.' "$share/from-guest.txt"
t_check "the guest runs the host's /usr/bin/env" has "env-sum=$(sha256sum /usr/bin/env | cut -d' ' -f1)" out
if [ -x "$share/hello" ]; then
	t_check "a binary compiled on the host runs in the guest" has hello=compiled-on-host out
fi
if [ -x "$agent" ]; then
	t_check "the project's build runs in the guest" has "agent=$("$agent" version)" out
fi
for m in nfs rbd nbd; do
	t_check "modprobe $m succeeds in the guest" has "module-$m=ok" out
done
t_check "nfsv4 loads and registers the nfs4 filesystem" has fs-nfs4=ok out
t_done
