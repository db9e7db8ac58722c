#!/bin/bash
# run.sh - Kubernetes' own storage e2e suite (e2e.test, test/e2e/storage/external, built at the
# test cluster's release by tests/cluster/build) against volagent on the test cluster, one run
# per driver definition of this directory, and the counts per definition.
#
#   tests/e2e/run.sh [--selection] [IMAGE_TAR]
#
# Without --selection: every External.Storage test of each definition except [Disruptive]
# ones (they restart kubelet or the node: the cluster tests do that themselves); tests whose
# capability a definition does not claim are skipped by the suite itself.  With --selection
# (what `make check` runs): one or a few tests of each area named in SELECTION below.
# E2E_FOCUS=REGEX (by hand) narrows either to the tests whose names match REGEX.
# Prints "e2e <definition>: N passed, N failed, N skipped (T s)" per definition and ends with
# "N passed, N failed, N skipped".  The JUnit reports and logs stay in $E2E_REPORT_DIR if set
# (else they go with the cluster's dir).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/tests/vm/testlib.sh"
selection=0
if [ "${1:-}" = --selection ]; then
	selection=1
	shift
fi
image_tar=${1:-$top/${BUILD:-build}/volagent-image.tar}
[ "$(id -u)" = 0 ] || t_skip "needs root"
t_need "no agent image ($image_tar; make image)" test -f "$image_tar"
t_need "containerd is not installed (scripts/install-deps test)" command -v containerd
PATH=$PATH:/usr/local/go/bin
t_need "go is not installed (the suite is built from the Go module proxy)" command -v go

# One test or a few of each area, by the words of their names (a ginkgo focus): provisioning,
# volumes, subPath, volumeMode, ephemeral, multiVolume, fsGroupChangePolicy, capacity and
# topology.  Each line is one focus; a test matches if its full name matches one of them.
SELECTION=(
	'provisioning should provision storage with mount options'
	'volumes should store data'
	'subPath should support existing directory'
	'volumeMode should not mount / map unused volumes in a pod'
	'ephemeral should create read/write inline ephemeral volume'
	'multiVolume.*should access to two volumes with the same volume mode and retain data across pod recreation on the same node'
	'fsgroupchangepolicy.*\(OnRootMismatch\).*pod created with an initial fsgroup, new pod fsgroup applied to volume contents'
	'capacity provides storage capacity information'
	'topology should provision a volume and schedule a pod with AllowedTopologies'
)

. "$top/tests/cluster/lib.sh"
cluster_new_dir e2e
report_dir=${E2E_REPORT_DIR:-$CLUSTER_DIR/reports}
cleanup() {
	[ -n "${KEEP_CLUSTER:-}" ] && { echo "cluster kept in $CLUSTER_DIR"; return; }
	"$top/scripts/cluster-down" --dir "$CLUSTER_DIR" >/dev/null || echo "e2e: cluster-down failed" >&2
}
trap cleanup EXIT
"$top/scripts/cluster-up" --dir "$CLUSTER_DIR" >/dev/null || { t_fail "cluster-up"; t_done; }
"$top/tests/cluster/install-volagent" "$image_tar" --overlay provisioning || { t_fail "install volagent"; t_done; }
mkdir -p "$report_dir"
bin=$(cat "$CLUSTER_DIR/bin-dir")

focus='External.Storage'
if [ $selection = 1 ]; then
	focus="External.Storage.*($(IFS='|'; echo "${SELECTION[*]}"))"
fi
# By hand: E2E_FOCUS=REGEX runs only the External.Storage tests whose names match it.
[ -z "${E2E_FOCUS:-}" ] || focus="External.Storage.*($E2E_FOCUS)"
total_p=0 total_f=0 total_s=0
for def in "$here"/driver-*.yaml; do
	name=$(basename "$def" .yaml)
	t0=$(date +%s)
	# The suite resolves FromFile against --repo-root (this directory).  Only [Disruptive] is
	# left out by hand; every other skip is the suite's, from the definition's capabilities.
	cluster_exec "$bin/e2e.test" -kubeconfig "$CLUSTER_DIR/pki/admin.kubeconfig" \
		-provider skeleton -repo-root "$here" -storage.testdriver "$def" \
		-kubelet-root-dir "$CLUSTER_DIR/kubelet" \
		-ginkgo.focus "$focus" -ginkgo.skip '\[Disruptive\]' \
		-ginkgo.junit-report "$report_dir/$name.xml" -ginkgo.timeout 2h \
		-ginkgo.no-color -ginkgo.v=false -report-dir "$report_dir/$name" \
		>"$report_dir/$name.log" 2>&1
	counts=$(python3 - "$report_dir/$name.xml" <<'EOF'
import sys, xml.etree.ElementTree as ET
p = f = s = 0
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError):
    print("0 1 0")  # no report: the run itself failed
    sys.exit()
# Specs the focus filtered out are reported "skipped" with no reason: not counted.  A spec the
# suite skipped itself (a capability the definition does not claim) says why.
for tc in root.iter("testcase"):
    status = tc.get("status", "")
    skipped = tc.find("skipped")
    if status == "skipped":
        if skipped is not None and skipped.get("message", "skipped") != "skipped":
            s += 1
    elif status == "passed":
        p += 1 if tc.get("name", "").startswith("[It]") else 0
    else:  # failed, panicked, timedout, interrupted, a suite node that failed
        f += 1
print(p, f, s)
EOF
)
	read -r p f s <<<"$counts"
	echo "e2e $name: $p passed, $f failed, $s skipped ($(($(date +%s) - t0)) s)"
	if [ "$f" != 0 ]; then
		grep -E '^\s*\[FAIL\]|^  \[FAILED\]' "$report_dir/$name.log" | head -20
		tail -n 5 "$report_dir/$name.log"
	fi
	total_p=$((total_p + p)) total_f=$((total_f + f)) total_s=$((total_s + s))
done
echo "reports: $report_dir"
echo "$total_p passed, $total_f failed, $total_s skipped"
[ "$total_f" = 0 ]
