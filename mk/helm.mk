# helm.mk - the Helm chart of deploy/helm/volagent: tests/helm/test-helm.sh lints it with helm
# itself, holds each setting's `helm template` against the kustomize overlay that makes the same
# setting, and checks values.schema.json's refusals (about 10 s once helm is built).  Installing
# and upgrading it on a real cluster is tests/cluster/scenarios/85-helm.sh.  helm is built from
# the Go module proxy at the release tests/helm/go.mod pins (tests/helm/build-helm.sh, into
# /var/cache/volagent-test; about 2 minutes cold), before the tests run; once, in the half
# without the sanitizer (no C code of the agent runs in it).
ifneq ($(SANITIZE),1)
CHECK_SCRIPTS += tests/helm/test-helm.sh
check: helm-build-for-check
endif

.PHONY: helm-build-for-check check-helm
helm-build-for-check:
	@if [ "$$CI" = true ] || command -v go >/dev/null || [ -x /usr/local/go/bin/go ]; then \
		PATH=$$PATH:/usr/local/go/bin tests/helm/build-helm.sh >/dev/null; \
	else echo "helm: not built (no go on PATH): the helm tests will skip"; fi

check-helm:
	CHECK_SCRIPTS="tests/helm/test-helm.sh" BUILD=$(BUILD) tests/run-tests.sh
