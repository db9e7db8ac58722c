# cluster.mk - volagent on a real one-node Kubernetes (tests/cluster/, docs/cluster.md):
# kubelet, the API server, scheduler and controller manager built from the Go module proxy at
# the release pinned in tests/cluster/go.mod, containerd from Debian.  `make check` runs
# tests/cluster/test-cluster.sh once, in the normal build (its agent is the image of
# `make image`; under SANITIZE=1 the sanitizer adds nothing the C suites do not already cover,
# and the cluster is the slowest suite).
#
#   make cluster-build     builds (or finds in its cache) the cluster's programs
#   make check-cluster     runs the cluster test alone
#   make check-e2e         Kubernetes' storage e2e suite, every External.Storage test of each
#                          driver definition of tests/e2e/ (about an hour; `make check` runs a
#                          selection, tests/e2e/test-e2e-selection.sh)
ifneq ($(SANITIZE),1)
CHECK_SCRIPTS += tests/cluster/test-cluster.sh tests/e2e/test-e2e-selection.sh
# Built before the tests run, outside their per-test time limit: cold, it takes about 15
# minutes on 2 cores (docs/cluster.md); without go on PATH the cluster tests skip instead.
check: cluster-build-for-check
endif

.PHONY: cluster-build-for-check
cluster-build-for-check:
	@if [ "$$CI" = true ] || command -v go >/dev/null || [ -x /usr/local/go/bin/go ]; then tests/cluster/build; \
	else echo "cluster: not built (no go on PATH): the cluster tests will skip"; fi

.PHONY: cluster-build check-cluster check-e2e
cluster-build:
	tests/cluster/build

check-cluster: $(BUILD)/volagent $(IMAGE_TAR)
	BUILD=$(BUILD) VOLAGENT_BIN=$(BUILD)/volagent CHECK_SCRIPTS="tests/cluster/test-cluster.sh" \
		tests/run-tests.sh

# Latency as kubelet measures it on a fresh test cluster: 50 pods with a volagent volume
# beside 50 with an emptyDir, and kubelet's own CSI histograms (docs/cluster.md, "Latency").
.PHONY: bench-cluster
bench-cluster: $(BUILD)/volagent $(IMAGE_TAR)
	tests/cluster/bench.sh $(IMAGE_TAR)

check-e2e: $(BUILD)/volagent $(IMAGE_TAR)
	BUILD=$(BUILD) tests/e2e/run.sh $(IMAGE_TAR)
