# mount-table-vm.mk - the mount table's libmount fallback on Debian's 6.1 kernel (no fanotify
# mount events, no listmount) in the test VM: tests/vm/test-mount-table.sh boots
# scripts/vm/run once; the agent must choose the fallback by its probe and repair a pod volume
# unmounted by hand, and the fallback cases of test-mount-table and test-agent-mount-events
# run on that kernel (their events cases skip).  35-90 s here.  Needs qemu
# (scripts/deps/vm-test.txt); skips (77) without it, except under CI=true.  See
# docs/mount-events.md.
CHECK_SCRIPTS += tests/vm/test-mount-table.sh

.PHONY: check-mount-table-vm
# Only this test (the agent and the two test binaries the guest runs are built first).
check-mount-table-vm: $(BUILD)/volagent $(BUILD)/tests/test-mount-table \
		$(BUILD)/tests/test-agent-mount-events
	BUILD=$(BUILD) VOLAGENT_BIN=$(BUILD)/volagent CHECK_SCRIPTS="tests/vm/test-mount-table.sh" \
		tests/run-tests.sh
