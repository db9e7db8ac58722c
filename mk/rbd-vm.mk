# rbd-vm.mk - the rbd plugin's krbd and nbd attach methods for real, in the test VM (this
# host's kernel has neither rbd nor nbd): tests/rbd/test-rbd-vm.sh boots scripts/vm/run once,
# starts a throwaway Ceph cluster inside the guest and drives build/volagent there with
# --rbd-attach-methods krbd, then nbd (including kill -9 of rbd-nbd, healed).  About 1 min
# here.  Needs qemu (scripts/deps/vm-test.txt) and the Ceph packages (ceph-test.txt,
# rbd-build.txt); skips (77) without them, except under CI=true.  See docs/rbd.md.
CHECK_SCRIPTS += tests/rbd/test-rbd-vm.sh

.PHONY: check-rbd-vm
# Only this test (the agent is built first).
check-rbd-vm: $(BUILD)/volagent
	BUILD=$(BUILD) VOLAGENT_BIN=$(BUILD)/volagent CHECK_SCRIPTS="tests/rbd/test-rbd-vm.sh" \
		tests/run-tests.sh
