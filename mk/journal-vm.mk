# journal-vm.mk - a state dir on a disk that fails writes, in the test VM (this host's kernel
# has no device-mapper): tests/vm/test-journal-eio.sh boots scripts/vm/run once and runs
# tests/test-journal-full there, whose dm-flakey case runs only there (on the host `make
# check` runs its full-tmpfs cases).  About a minute.  Needs qemu (scripts/deps/vm-test.txt);
# skips (77) without it, except under CI=true.  See docs/crash-safety.md.
CHECK_SCRIPTS += tests/vm/test-journal-eio.sh

.PHONY: check-journal-vm
# Only this test (the agent and the test binary the guest runs are built first).
check-journal-vm: $(BUILD)/volagent $(BUILD)/tests/test-journal-full
	BUILD=$(BUILD) VOLAGENT_BIN=$(BUILD)/volagent CHECK_SCRIPTS="tests/vm/test-journal-eio.sh" \
		tests/run-tests.sh
