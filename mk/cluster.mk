# cluster.mk - volagent on a real one-node Kubernetes (tests/cluster/, docs/cluster.md):
# kubelet, the API server, scheduler and controller manager built from the Go module proxy at
# the release pinned in tests/cluster/go.mod, containerd from Debian.  `make check` runs
# tests/cluster/test-cluster.sh once, in the normal build (its agent is the image of
# `make image`; under SANITIZE=1 the sanitizer adds nothing the C suites do not already cover,
# and the cluster is the slowest suite).
#
#   make cluster-build     builds (or finds in its cache) the cluster's programs
#   make check-cluster     runs the cluster test alone
ifneq ($(SANITIZE),1)
CHECK_SCRIPTS += tests/cluster/test-cluster.sh
endif

.PHONY: cluster-build check-cluster
cluster-build:
	tests/cluster/build

check-cluster: $(BUILD)/volagent $(IMAGE_TAR)
	BUILD=$(BUILD) VOLAGENT_BIN=$(BUILD)/volagent CHECK_SCRIPTS="tests/cluster/test-cluster.sh" \
		tests/run-tests.sh
