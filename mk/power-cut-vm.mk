# power-cut-vm.mk - power cuts and the write order, in the test VM (issue 43; the host's
# kernel has no device-mapper, and a power cut needs a machine to cut):
#   tests/vm/test-power-cut.sh    hard resets (qemu killed) at random moments of a churn, each
#                                 boot checked: 20 cuts under CI=true (about 6 min), 6 else;
#                                 POWER_CUTS=N, POWER_CUT_SEED=N
#   tests/vm/test-write-order.sh  the churn on a dm-log-writes device, replayed to every flush
#                                 point (one boot, about 3 min); WRITE_ORDER_STEPS=N
# Both run in the normal half of `make check` only: they judge what reached the disks, which
# the sanitizer does not change, and the agent's reading of a torn journal runs under the
# sanitizer on the host (test-agent-restart, fuzz-journal); `make SANITIZE=1
# check-power-cut-vm` still runs them with the sanitized agent (4 cuts passed, 2026-12-05).
# Needs qemu and the Python CSI client (scripts/deps/vm-test.txt); skips (77) without them,
# except under CI=true.  See docs/crash-safety.md.
ifneq ($(SANITIZE),1)
CHECK_SCRIPTS += tests/vm/test-power-cut.sh tests/vm/test-write-order.sh
endif
POWER_CUT_CHECKS := tests/vm/test-power-cut.sh tests/vm/test-write-order.sh

.PHONY: check-power-cut-vm
# Only these tests (the agent is built first).
check-power-cut-vm: $(BUILD)/volagent
	BUILD=$(BUILD) VOLAGENT_BIN=$(BUILD)/volagent \
		CHECK_SCRIPTS="$(POWER_CUT_CHECKS)" POWER_CUTS=$${POWER_CUTS:-$(if $(filter 1,$(SANITIZE)),4)} \
		tests/run-tests.sh
