# rbd.mk - the rbd plugin (plugins/rbd*.c) links librbd and librados (Debian ships no
# pkg-config files for them), and its tests run against one throwaway Ceph cluster per test
# run: tests/rbd/run.sh starts it, runs every build/tests/test-rbd-* binary with CEPH_* in the
# environment, and always stops it.  See docs/rbd.md.
LIBS_EXTRA += -lrbd -lrados

# The rbd test binaries run only under tests/rbd/run.sh (one cluster for all of them), not
# one by one from the list of test binaries.
RBD_TEST_SRCS := $(filter tests/test-rbd-%.c,$(TEST_SRCS))
TEST_SRCS := $(filter-out tests/test-rbd-%.c,$(TEST_SRCS))
RBD_TEST_BINS = $(patsubst tests/%.c,$(BUILD)/tests/%,$(RBD_TEST_SRCS))
check: $(RBD_TEST_BINS)
CHECK_SCRIPTS += tests/rbd/run.sh
