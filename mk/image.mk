# image.mk - `make image`: the container image of the DaemonSet, built from Debian packages
# alone (mmdebstrap + podman, no registry) into $(BUILD)/volagent-image.tar, an OCI archive
# named volagent:$(VERSION).  See scripts/build-image and README.md, "Kubernetes (CSI)".
#
#   make image                 builds it (as root; a few minutes, most of it downloading)
#   make check-image           builds it, then runs tests/container/test-image.sh alone
#
# `make check` builds the image too and runs the test, which starts it under podman with the
# mounts of the DaemonSet `kubectl kustomize deploy/base` renders.  Where the image cannot be built (not root, no mmdebstrap
# or podman) the build is left out and the test skips with the reason, except under CI=true.

IMAGE_TAR := $(BUILD)/volagent-image.tar
# The downloaded .debs, kept for the next build (also the SANITIZE=1 one); `make clean` drops them.
IMAGE_APT_CACHE ?= build/apt-cache
IMAGE_DEPS := $(BUILD)/volagent scripts/build-image deploy/image-packages.txt deploy/image-strip.txt \
	      deploy/dpkg-excludes.cfg
CHECK_SCRIPTS += tests/container/test-image.sh

.PHONY: image check-image image-for-check
image: $(IMAGE_TAR)

$(IMAGE_TAR): $(IMAGE_DEPS)
	VOLAGENT_IMAGE_APT_CACHE=$(abspath $(IMAGE_APT_CACHE)) \
		scripts/build-image --binary $(BUILD)/volagent --version $(VERSION) --out $@

image-for-check: $(IMAGE_DEPS)
	@if [ "$$CI" = true ] || { [ "$$(id -u)" = 0 ] && command -v mmdebstrap >/dev/null && \
			command -v podman >/dev/null; }; then \
		$(MAKE) --no-print-directory $(IMAGE_TAR); \
	else \
		echo "image: not built (needs root, mmdebstrap and podman): test-image.sh will skip"; \
	fi

check: image-for-check

check-image: $(BUILD)/volagent $(IMAGE_TAR)
	BUILD=$(BUILD) VOLAGENT_BIN=$(BUILD)/volagent CHECK_SCRIPTS="tests/container/test-image.sh" \
		tests/run-tests.sh
