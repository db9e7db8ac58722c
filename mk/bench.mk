# bench.mk - `make bench`: the benchmarks of docs/performance.md.  Builds the agent and the
# benchmark programs of tests/bench/, then runs scripts/bench (as root: it mounts, in a private
# mount namespace).  `make check` builds the benchmark programs too, so they never rot, but
# runs none of them; CI times nothing.
#
#   make bench                       every figure with its target, on the event path and
#                                    (when the agent has --mount-events) the fallback path
#                                    (3-4 minutes per path on 2 cores)
#   make bench BENCH_ARGS=--quick    smaller N and fewer repetitions, for trying the runner

BENCH_DIR := $(BUILD)/tests/bench
BENCH_BINS := $(BENCH_DIR)/volagent-bench $(BENCH_DIR)/csi-bench $(BENCH_DIR)/quota-bench $(BENCH_DIR)/crypt-bench
BENCH_ARGS ?=
# The second CSI client, tests/bench/csi_bench.py (Debian's python3-grpcio), runs on stubs
# generated here from the project's own proto (python3-grpc-tools; scripts/deps/csi-test.txt).
BENCH_PY_STUBS := $(BENCH_DIR)/py/csi_pb2.py $(BENCH_DIR)/py/csi_pb2_grpc.py
BENCH_PYTHON := /usr/bin/python3

.PHONY: bench
bench: $(BUILD)/volagent $(BENCH_BINS) $(BENCH_PY_STUBS)
	BUILD=$(BUILD) scripts/bench --agent $(BUILD)/volagent --bench-dir $(BENCH_DIR) $(BENCH_ARGS)

check: $(BENCH_BINS) $(BENCH_PY_STUBS)

# One run writes both files (grouped target).
$(BENCH_PY_STUBS) &: proto/csi.proto
	@mkdir -p $(BENCH_DIR)/py
	$(BENCH_PYTHON) -m grpc_tools.protoc -Iproto --python_out=$(BENCH_DIR)/py \
		--grpc_python_out=$(BENCH_DIR)/py proto/csi.proto

# Needs only libc: it measures the agent from outside.
$(BENCH_DIR)/volagent-bench: $(BENCH_DIR)/volagent-bench.o $(BENCH_DIR)/bench-util.o
	$(CC) $(LDFLAGS) -o $@ $^ -lpthread

# The CSI client: gRPC core + protobuf-c on the project's generated code.  It links the agent
# library only for its --self-test server (the CSI transport with a bind-mount test backend).
# (LIBAGENT is defined after this file is included: spelled out here.)
$(BENCH_DIR)/csi-bench: $(BENCH_DIR)/csi-bench.o $(BENCH_DIR)/bench-util.o $(BUILD)/libvolagent.a
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(LIBS_EXTRA) -lgrpc -lgpr

# lib/quota.c's calls on a real filesystem (the agent library for lib/quota.o).
$(BENCH_DIR)/quota-bench: $(BENCH_DIR)/quota-bench.o $(BENCH_DIR)/bench-util.o $(BUILD)/libvolagent.a
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(LIBS_EXTRA)

# The cost of opening an encrypted volume (lib/luks.c, docs/encryption.md).
$(BENCH_DIR)/crypt-bench: $(BENCH_DIR)/crypt-bench.o $(BUILD)/libvolagent.a
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(LIBS_EXTRA)
