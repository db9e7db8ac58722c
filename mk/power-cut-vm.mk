# power-cut-vm.mk - power cuts and the write order, in the test VM (issue 43; the host's
# kernel has no device-mapper, and a power cut needs a machine to cut):
#   tests/vm/test-power-cut.sh    hard resets (qemu killed) at random moments of a churn, each
#                                 boot checked: 20 cuts under CI=true (about 6 min), 6 else;
#                                 POWER_CUTS=N, POWER_CUT_SEED=N
#   tests/vm/test-write-order.sh  the churn on a dm-log-writes device, replayed to every flush
#                                 point (one boot, about 3 min); WRITE_ORDER_STEPS=N
# Under SANITIZE=1 the hard resets run 4 cuts with the sanitized agent (what it reads after
# a cut is what the sanitizer can judge) and the replay does not run again (it checks what
# reached the disk, which the sanitizer does not change).  Needs qemu and the Python CSI client
# (scripts/deps/vm-test.txt); skips (77) without them, except under CI=true.  See
# docs/crash-safety.md.
CHECK_SCRIPTS += tests/vm/test-power-cut.sh
ifeq ($(SANITIZE),1)
export POWER_CUTS ?= 4
else
CHECK_SCRIPTS += tests/vm/test-write-order.sh
endif

.PHONY: check-power-cut-vm
# Only these tests (the agent is built first).
check-power-cut-vm: $(BUILD)/volagent
	BUILD=$(BUILD) VOLAGENT_BIN=$(BUILD)/volagent \
		CHECK_SCRIPTS="$(filter tests/vm/test-power-cut.sh tests/vm/test-write-order.sh,$(CHECK_SCRIPTS))" \
		tests/run-tests.sh
