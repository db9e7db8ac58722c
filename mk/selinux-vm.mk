# selinux-vm.mk - SELinux mount labels (context="..." from kubelet's seLinuxMount) applied for
# real: one VM boot with SELinux on and Debian's reference policy loaded, a local block volume
# and an NFS volume driven through CSI by tests/kubelet/lifecycle.py.  Needs qemu, nfs-ganesha,
# nfs-common and selinux-policy-default + policycoreutils (scripts/deps/vm-test.txt); without
# them it skips (77), except under CI=true.  See docs/csi.md, "SELinux mount labels".
CHECK_SCRIPTS += tests/vm/test-selinux.sh

.PHONY: check-selinux
check-selinux: $(BUILD)/volagent
	BUILD=$(BUILD) VOLAGENT_BIN=$(BUILD)/volagent CHECK_SCRIPTS="tests/vm/test-selinux.sh" \
		tests/run-tests.sh
