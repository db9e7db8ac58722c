# deploy.mk - the kustomize base and overlays of deploy/: tests/deploy/test-kustomize.sh
# renders each with `kubectl kustomize` (Debian's kubernetes-client) and checks every object
# against python3-kubernetes' API models and the DaemonSet's promises.  A few seconds.
# Skips (77) without kubectl or python3-kubernetes, unless CI=true.
CHECK_SCRIPTS += tests/deploy/test-kustomize.sh

.PHONY: check-deploy
check-deploy:
	CHECK_SCRIPTS="tests/deploy/test-kustomize.sh" BUILD=$(BUILD) tests/run-tests.sh
