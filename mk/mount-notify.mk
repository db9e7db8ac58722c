# mount-notify.mk - the micro-benchmark of lib/mount-notify (docs/mount-events.md): fanotify
# mount events + statmount/listmount against libmount reading mountinfo, at 10,000 mounts.
# `make check` builds it so that it never rots; nobody runs it in CI.
#
#   make bench-mount-notify                         as root: every figure (~1 minute)
#   make bench-mount-notify MOUNT_NOTIFY_BENCH_ARGS="--n 1000 --reps 3"

MOUNT_NOTIFY_BENCH := $(BUILD)/tests/bench/mount-notify-bench
MOUNT_NOTIFY_BENCH_ARGS ?=

.PHONY: bench-mount-notify
bench-mount-notify: $(MOUNT_NOTIFY_BENCH)
	$(MOUNT_NOTIFY_BENCH) $(MOUNT_NOTIFY_BENCH_ARGS)

check: $(MOUNT_NOTIFY_BENCH)

# It links the agent library for lib/mount-notify.o (LIBAGENT is defined after this file is
# included: spelled out here).
$(MOUNT_NOTIFY_BENCH): $(BUILD)/tests/bench/mount-notify-bench.o $(BUILD)/tests/bench/bench-util.o \
		       $(BUILD)/libvolagent.a
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(LIBS_EXTRA)
