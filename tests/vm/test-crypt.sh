#!/bin/bash
# test-crypt.sh - encryption at rest with dm-crypt, in the test VM (Debian's 6.1 kernel with
# dm_mod and dm_crypt; this host's kernel has no device-mapper): one boot runs
# tests/test-crypt there, whose device-mapper cases (test_vm_*) run only where the kernel has
# it: pod spec files (format once, a plaintext canary written through the pod is nowhere in
# the backing file, SIGKILL + restart adopts the mapping and the mount, removal closes it,
# the pod again reopens the same data, a wrong passphrase opens nothing) and CSI through the
# real gRPC client (Filesystem and Block mode, expand grows mapping and ext4, unstage closes,
# a wrong passphrase is PERMISSION_DENIED), and the refusals and passphrase checks.  The guest
# has no udev: libdevmapper makes the /dev/mapper nodes itself.  Skips (77) without qemu,
# except under CI=true.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/testlib.sh"

t_needs qemu agent
t_test_bin test-crypt
t_workdir vm-crypt

VM_MODULES="${VM_MODULES:-} dm_mod dm_crypt xts ecb af_alg algif_skcipher loop" \
	t_vm_run "crypt tests" -s "$work" -t "${VM_TIMEOUT:-300}" -e VOLAGENT_BIN="$agent" \
	-e TEST_TIME_SCALE="${TEST_TIME_SCALE:-1}" -e CI="${CI:-}" \
	-- unshare -m --propagation private "$test_bin"
cat "$work/out"
tail -20 "$work/err" >&2
t_check "test-crypt in the guest passes (exit $vm_rc)" [ "$vm_rc" = 0 ]
t_check "its device-mapper cases ran there" grep -q '^\[       OK \] test_vm_pod_spec' "$work/out"
t_check "and its CSI ones" grep -q '^\[       OK \] test_vm_csi' "$work/out"
t_done
