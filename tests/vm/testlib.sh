# shellcheck shell=bash
# testlib.sh - sourced by the shell tests under tests/vm, tests/ceph, tests/deploy, tests/systemd
# and tests/rbd/run.sh: pass/fail counters, the closing "N passed, N failed" line that
# tests/run-tests.sh reads, and skipping.
#
#   t_pass NAME / t_fail NAME [WHY]   count one result and print it
#   t_check NAME CMD...               pass if CMD succeeds
#   t_need REASON CMD...              skip (exit 77, REASON as the last line) unless CMD
#                                     succeeds; under CI=true a missing requirement fails
#   t_skip REASON                     that skip, unconditionally (also for tests/deploy,
#                                     tests/systemd and tests/rbd/run.sh)
#   t_done                            print the closing line; exit 1 if anything failed
#   t_need_qemu / t_need_nfs_server   the t_need lines of the VM tests and the NFS server
#   t_need_csi_client                 the t_need line of the Python CSI client (tests/csi, tests/kubelet)
#   t_nfs_server_stop DIR             stops the scripts/nfs-server started in DIR, if any
#   t_agent_bin                       sets $agent: the agent under test ($VOLAGENT_BIN, else the
#                                     build's), absolute; skips when it is not built
#   t_guest_results OUT ERR           count a guest's PASS:/FAIL: lines (in file OUT) as ours
#                                     and show its other lines and the tail of its stderr (ERR)
#   t_needs WHAT...                   the t_need lines above by name: qemu, nfs_server,
#                                     csi_client, agent (t_agent_bin)
#   t_test_bin NAME                   sets $test_bin: the build's tests/NAME; skips when it is
#                                     not built
#   t_workdir NAME [CLEANUP]          sets $work: a new temporary dir, removed on exit after
#                                     the function CLEANUP (if named) ran; INT and TERM exit
#   t_elapsed T0 [DECIMALS]           the seconds since $EPOCHREALTIME was T0, as "1.2s"
#   t_vm_run WHAT RUN-ARGS...         boots the test VM (scripts/vm/run RUN-ARGS...), its
#                                     stdout in $work/out and stderr in $work/err; sets $vm_rc
#                                     to its exit code and prints "vm boot + WHAT: <time>"
#   t_vm_guest_done                   t_guest_results of that run, and a check that it exited 0

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
	"$@" >/dev/null 2>&1 || t_skip "$reason"
}

t_skip() {
	if [ "${CI:-}" = true ]; then
		t_fail "$1 (a requirement under CI)"
		t_done
	fi
	echo "SKIP: $1"
	exit 77
}

# In a test's own mount namespace: a utab (libmount's /run/mount, where the agent records the
# userspace options of its mounts, _netdev) of its own, so that nothing the test mounts, nor a
# mount it leaves when killed, is recorded in the host's.
t_private_utab() {
	mkdir -p /run/mount && mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run/mount ||
		{ echo "cannot mount a tmpfs on /run/mount" >&2; exit 1; }
}

t_done() {
	echo "$t_passed passed, $t_failed failed"
	[ "$t_failed" = 0 ] || exit 1
	exit 0
}

t_need_qemu() {
	t_need "${VM_QEMU:-qemu-system-x86_64} is not installed (apt-get install qemu-system-x86)" \
		command -v "${VM_QEMU:-qemu-system-x86_64}"
}

t_need_nfs_server() {
	t_need "ganesha.nfsd is not installed (apt-get install nfs-ganesha nfs-ganesha-vfs)" test -x /usr/bin/ganesha.nfsd
	t_need "mount.nfs is not installed (apt-get install nfs-common)" test -x /sbin/mount.nfs
	t_need "the NFS server needs root" test "$(id -u)" = 0
}

t_need_csi_client() {
	t_need "the CSI client needs python3-grpcio and python3-grpc-tools" /usr/bin/python3 -c 'import grpc, grpc_tools'
}

t_agent_bin() {
	agent=${VOLAGENT_BIN:-$t_repo/${BUILD:-build}/volagent}
	case $agent in /*) ;; *) agent=$t_repo/$agent ;; esac
	t_need "the agent is not built ($agent; run make)" test -x "$agent"
}

t_guest_results() {
	local line
	while IFS= read -r line; do
		case $line in
		"PASS: "*) t_pass "guest: ${line#PASS: }" ;;
		"FAIL: "*) t_fail "guest: ${line#FAIL: }" ;;
		*) echo "  guest: $line" ;;
		esac
	done <"$1"
	sed 's/^/  guest stderr: /' "$2" | tail -n 40
}

t_nfs_server_stop() {
	if [ -d "$1/.server" ]; then
		"$t_repo/scripts/nfs-server" stop "$1" || echo "warning: stopping the NFS server failed" >&2
	fi
}

t_needs() {
	local what
	for what in "$@"; do
		case $what in
		agent) t_agent_bin ;;
		*) "t_need_$what" ;;
		esac
	done
}

t_test_bin() {
	test_bin=$t_repo/${BUILD:-build}/tests/$1
	t_need "tests/$1 is not built ($test_bin)" test -x "$test_bin"
}

t_workdir() {
	work=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
	t_cleanup_fn=${2:-}
	trap '${t_cleanup_fn:+$t_cleanup_fn}; rm -rf "$work"' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

t_elapsed() {
	awk -v a="$1" -v b="$EPOCHREALTIME" -v d="${2:-1}" 'BEGIN {printf "%.*fs", d, b - a}'
}

t_vm_run() {
	local what=$1 t0=$EPOCHREALTIME
	shift
	vm_rc=0
	"$t_repo/scripts/vm/run" "$@" >"$work/out" 2>"$work/err" || vm_rc=$?
	echo "vm boot + $what: $(t_elapsed "$t0")"
}

t_vm_guest_done() {
	t_guest_results "$work/out" "$work/err"
	t_check "the guest run finishes (exit $vm_rc)" [ "$vm_rc" = 0 ]
}
