#!/bin/bash
# test-quota.sh - sizes of local directory volumes (project quotas) on Debian's 6.1 kernel,
# whose XFS has quota support and whose ext4 loads the quota_v2 format: one VM boot runs
# tests/test-quota with VOLAGENT_TEST_QUOTA=1, so its enforcing cases (real loop-backed XFS
# mounted prjquota, ext4 made with -O project,quota and mounted prjquota, through a real
# `volagent run`) must run and pass, not skip.  The build host's kernel has no quota support:
# there the binary runs the refusal cases only.  Skips (77) without qemu, except under CI=true.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/testlib.sh"

t_needs qemu agent
t_test_bin test-quota
t_workdir vm-quota

VM_MODULES="loop xfs ext4 quota_v2" t_vm_run "quota tests" -s "$work" -t "${VM_TIMEOUT:-300}" \
	-e VOLAGENT_BIN="$agent" -e VOLAGENT_TEST_QUOTA=1 -e TEST_TIME_SCALE="${TEST_TIME_SCALE:-3}" \
	-e QUOTA_BENCH="$t_repo/${BUILD:-build}/tests/bench/quota-bench" \
	-- bash -c '"$1" || exit $?
		# The same boot measures setting a size on XFS mounted prjquota (make bench on a
		# host whose kernel has no quotas measures only the refusal).
		[ -x "$QUOTA_BENCH" ] || exit 0
		unshare -m --propagation private bash -c "truncate -s 300M /tmp/qb.img &&
			mkfs.xfs -q /tmp/qb.img && mkdir -p /tmp/qb && mount -o loop,prjquota /tmp/qb.img /tmp/qb &&
			\"\$QUOTA_BENCH\" --dir /tmp/qb --n 200 | grep -v ^figure >&2; umount /tmp/qb"' \
	_ "$test_bin"
sed 's/^/  guest: /' "$work/out"
grep "^# \|^quota: " "$work/err" | sed "s/^/  guest: /" || true
tail -20 "$work/err" | sed 's/^/  guest stderr: /'
t_check "the guest's tests/test-quota passes (exit $vm_rc)" [ "$vm_rc" = 0 ]
t_check "every case ran, none skipped" grep -q '^\[  PASSED  \] 8 test(s)' "$work/err"
t_check "the size was enforced on xfs" grep -q '^\[       OK \] test_enforced_xfs' "$work/out"
t_check "the size was enforced on ext4" grep -q '^\[       OK \] test_enforced_ext4' "$work/out"
t_check "NodeGetVolumeStats reported the limit" grep -q '^\[       OK \] test_csi_stats_xfs' "$work/out"
t_check "an ephemeral volume's size held" grep -q '^\[       OK \] test_ephemeral_size_xfs' "$work/out"
t_check "a provisioned volume's size held and grew (Controller)" \
	grep -q '^\[       OK \] test_controller_xfs' "$work/out"
t_done
