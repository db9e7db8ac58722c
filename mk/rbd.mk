# rbd.mk - the rbd plugin (plugins/rbd/*.c).  The agent does not link librbd and librados:
# `volagent rbd-helper` dlopen()s them (plugins/rbd/rbd-ceph.c), so only -ldl here (part of
# libc since glibc 2.34; kept for older ones).  Its tests run against one throwaway Ceph
# cluster per test run: tests/rbd/run.sh starts it, runs every build/tests/test-rbd-* binary
# with CEPH_* in the environment, and always stops it.  The test binaries link librbd and librados
# themselves (tests/rbd/rbd-testlib.h creates images with it).  See docs/rbd.md.
LIBS_EXTRA += -ldl

# The rbd test binaries run only under tests/rbd/run.sh (one cluster for all of them), not
# one by one from the list of test binaries.
RBD_TEST_SRCS := $(filter tests/test-rbd-%.c,$(TEST_SRCS))
TEST_SRCS := $(filter-out tests/test-rbd-%.c,$(TEST_SRCS))
RBD_TEST_BINS = $(patsubst tests/%.c,$(BUILD)/tests/%,$(RBD_TEST_SRCS))
check: $(RBD_TEST_BINS)
# private: not inherited by their prerequisite build/volagent-test, which must not link librbd.
$(RBD_TEST_BINS): private LIBS_EXTRA += -lrbd -lrados
CHECK_SCRIPTS += tests/rbd/run.sh

# The agent the tests run where they force a failure of `volagent rbd-helper` (a hang, a
# crash): build/volagent plus tests/lib/rbd-helper-fault.o, the only definition of the seam in
# plugins/rbd/rbd-helper-fault.h.  build/volagent has none of it (test-rbd-helper-dump checks).
VOLAGENT_TEST_BIN := $(BUILD)/volagent-test
$(VOLAGENT_TEST_BIN): $(BUILD)/agent/main.o $(BUILD)/tests/lib/rbd-helper-fault.o \
		      $(BUILD)/libvolagent.a
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(LIBS_EXTRA)
check: $(VOLAGENT_TEST_BIN)
$(RBD_TEST_BINS): | $(VOLAGENT_TEST_BIN)
