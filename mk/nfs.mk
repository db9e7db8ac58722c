# nfs.mk - the nfs plugin's tests beyond the C binaries (which the top Makefile finds by
# their tests/test-nfs-*.c names): the end-to-end run in the VM with a real ganesha server
# and the guest's kernel NFS client.  It needs qemu, nfs-ganesha and nfs-common
# (scripts/deps/vm-test.txt); without them it skips (77), except under CI=true.
# See docs/nfs.md.
CHECK_SCRIPTS += tests/vm/test-nfs-plugin.sh

.PHONY: check-nfs
# Only the NFS tests: the host-side binaries, then the VM run.
check-nfs: $(BUILD)/volagent $(BUILD)/tests/test-nfs-plugin $(BUILD)/tests/test-nfs-options
	BUILD=$(BUILD) VOLAGENT_BIN=$(BUILD)/volagent CHECK_SCRIPTS="tests/vm/test-nfs-plugin.sh" \
		tests/run-tests.sh $(BUILD)/tests/test-nfs-options $(BUILD)/tests/test-nfs-plugin
