#!/bin/bash
# test-csi-sanity.sh - csi-sanity, the CSI community's conformance suite (built by ./build at
# the pinned release), against a real `volagent run --csi --controller`: its Identity,
# Controller and Node specs, then its specs again against an agent without --controller (the
# Node and Identity specs; the Controller's are then skipped by csi-sanity itself, which asks
# GetPluginCapabilities).  Each run is a private mount namespace (unshare) with a kubelet-like
# root: the targets (--csi.mountdir) below <kubelet>/pods/ and the staging paths
# (--csi.stagingdir) below <kubelet>/plugins/, where the agent accepts them; the provisioned
# volumes go to a 256 MiB tmpfs below a --local-path-prefix, with enforceSize false (this
# host's kernel has no project quotas: tests/vm/test-quota.sh checks enforced sizes).
#
# csi-sanity's JUnit report is counted (python3's XML parser) into one line per run and the
# closing "N passed, N failed" line tests/run-tests.sh reads: every spec that csi-sanity ran
# and passed is one pass, each failed spec one failure.  No spec is skipped by us.
# Root only; skips (77) without Go or python3.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../vm/testlib.sh"

if [ -z "${VOLAGENT_SANITY_NS:-}" ]; then
	t_need "needs root (mounts)" test "$(id -u)" = 0
	t_need "go is not installed" command -v go
	t_need "python3 is not installed" command -v python3
	exec env VOLAGENT_SANITY_NS=1 unshare --mount --propagation private "$0" "$@"
fi

t_agent_bin
# The first run fetches it from the Go module proxy: a machine that cannot reach it skips
# (fails under CI=true), saying why.
sanity=$("$here/build" 2>"${TMPDIR:-/tmp}/csi-sanity-build.$$") ||
	t_skip "csi-sanity could not be built: $(tail -1 "${TMPDIR:-/tmp}/csi-sanity-build.$$")"
rm -f "${TMPDIR:-/tmp}/csi-sanity-build.$$"
t_workdir csi-sanity cleanup
scale=${TEST_TIME_SCALE:-1}

cleanup() {
	[ -n "${agent_pid:-}" ] && kill "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
	# Whatever a failed run left mounted below $work goes before $work is removed.
	findmnt -rn -o TARGET | grep "^$work/" | sort -r | while read -r m; do
		umount -l "$m" || true
	done
	return 0
}

# Counts a JUnit report: prints "passed failed skipped".
junit_counts() {
	python3 - "$1" <<'PY'
import os
import sys
import xml.etree.ElementTree as ET
p = f = s = 0
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    if case.find("skipped") is not None:
        s += 1
        if os.environ.get("VERBOSE"):
            print("  skipped: " + case.get("name", ""), file=sys.stderr)
    elif case.find("failure") is not None or case.find("error") is not None:
        f += 1
        print("  failed: " + case.get("name", ""), file=sys.stderr)
    else:
        p += 1
print(p, f, s)
PY
}

# run NAME FOCUS AGENT-FLAGS...: one agent, one csi-sanity run against it (of the specs
# matching FOCUS, a regexp; "": all).
run() {
	local name=$1 focus=$2 dir=$work/$1 sock kubelet out
	shift 2
	kubelet=$dir/kubelet
	sock=$dir/csi.sock
	mkdir -p "$dir"/{root,state,secrets,pods} "$kubelet/pods/sanity-pod/volumes" \
		"$kubelet/plugins/kubernetes.io/csi/csi.volagent.io/sanity"
	"$agent" run --root-dir "$dir/root" --state-dir "$dir/state" --secret-dir "$dir/secrets" \
		--pods-dir "$dir/pods" --device-inventory false --csi --csi-registration false \
		--kubelet-root-dir "$kubelet" --csi-endpoint "unix://$sock" \
		--local-path-prefix "$work/volumes" "$@" >"$dir/agent.log" 2>&1 &
	agent_pid=$!
	for _ in $(seq 1 $((100 * scale))); do
		[ -S "$sock" ] && grep -q "startup reconstruction complete" "$dir/agent.log" && break
		sleep 0.1
	done
	if [ ! -S "$sock" ]; then
		t_fail "$name: the agent serves its socket" "$(tail -3 "$dir/agent.log")"
		return
	fi
	out=$dir/sanity.out
	"$sanity" --csi.endpoint "$sock" \
		--csi.mountdir "$kubelet/pods/sanity-pod/volumes/mnt" \
		--csi.stagingdir "$kubelet/plugins/kubernetes.io/csi/csi.volagent.io/sanity/globalmount" \
		--csi.testvolumeparameters "$work/params.yaml" \
		--csi.testvolumesize $((16 * 1024 * 1024)) \
		--csi.testvolumeexpandsize $((32 * 1024 * 1024)) \
		--ginkgo.junit-report "$dir/junit.xml" --ginkgo.no-color \
		${focus:+--ginkgo.focus "$focus"} \
		>"$out" 2>&1 || true
	local rc=0
	kill "$agent_pid"
	wait "$agent_pid" || rc=$?
	agent_pid=
	t_check "$name: the agent exits 0 on SIGTERM (exit $rc)" [ "$rc" = 0 ]
	if [ ! -s "$dir/junit.xml" ]; then
		t_fail "$name: csi-sanity ran" "$(tail -5 "$out")"
		return
	fi
	read -r p f s < <(junit_counts "$dir/junit.xml")
	echo "csi-sanity $name: $p passed, $f failed, $s skipped"
	grep "^Ran \|Passed |" "$out" | sed 's/^/  /' || true
	for _ in $(seq 1 "$p"); do t_passed=$((t_passed + 1)); done
	for _ in $(seq 1 "$f"); do t_failed=$((t_failed + 1)); done
	if [ "$f" != 0 ] && [ -n "${VERBOSE:-}" ]; then
		grep -A15 "\[FAIL\]" "$out" | head -100
	fi
}

mkdir -p "$work/volumes/base"
mount -t tmpfs -o size=256m tmpfs "$work/volumes/base"
printf 'basePath: %s\nenforceSize: "false"\n' "$work/volumes/base" >"$work/params.yaml"

run with-controller "" --controller
# Without --controller only the Identity specs can run: csi-sanity's Node specs ask
# ControllerGetCapabilities in their BeforeEach and take their volumes from CreateVolume, so
# against a node plugin without a Controller service every one of them fails there, in
# csi-sanity, before a Node call is made.
run node-only "Identity Service"

# Nothing the runs made is left: every volume csi-sanity created it deleted again.
t_check "no volume directory left below the base path" \
	[ -z "$(ls -A "$work/volumes/base")" ]
t_done
