# csi-sanity.mk - csi-sanity, the CSI community's conformance suite, against the agent's
# Identity, Controller and Node services (tests/csi-sanity/test-csi-sanity.sh).  The tool is Go,
# built from the module proxy at the release tests/csi-sanity/go.mod pins, into a cache outside
# the repository (tests/csi-sanity/build); nothing of it is part of the agent.
CHECK_SCRIPTS += tests/csi-sanity/test-csi-sanity.sh

.PHONY: check-csi-sanity
check-csi-sanity: $(BUILD)/volagent
	BUILD=$(BUILD) VOLAGENT_BIN=$(BUILD)/volagent CHECK_SCRIPTS="tests/csi-sanity/test-csi-sanity.sh" \
		tests/run-tests.sh
