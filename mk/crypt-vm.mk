# crypt-vm.mk - encryption at rest with dm-crypt in the test VM (this host's kernel has no
# device-mapper): tests/vm/test-crypt.sh boots scripts/vm/run once and runs tests/test-crypt
# there (its device-mapper cases run only there; on the host `make check` runs the others).
# About 2 min here (argon2id's 64 MiB under qemu's TCG is most of it).  Needs qemu
# (scripts/deps/vm-test.txt); skips (77) without it, except under CI=true.  See
# docs/encryption.md.
CHECK_SCRIPTS += tests/vm/test-crypt.sh

.PHONY: check-crypt-vm
# Only this test (the agent and the test binary the guest runs are built first).
check-crypt-vm: $(BUILD)/volagent $(BUILD)/tests/test-crypt
	BUILD=$(BUILD) VOLAGENT_BIN=$(BUILD)/volagent CHECK_SCRIPTS="tests/vm/test-crypt.sh" \
		tests/run-tests.sh
