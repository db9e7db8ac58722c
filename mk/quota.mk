# quota.mk - sizes of local directory volumes (project quotas, lib/quota.c): the enforcing
# cases of tests/test-quota need a kernel with XFS quota and the quota_v2 format, which this
# build host lacks, so tests/vm/test-quota.sh runs the binary in the test VM (one boot).
CHECK_SCRIPTS += tests/vm/test-quota.sh

.PHONY: check-quota
check-quota: $(BUILD)/volagent $(BUILD)/tests/test-quota
	BUILD=$(BUILD) VOLAGENT_BIN=$(BUILD)/volagent CHECK_SCRIPTS="tests/vm/test-quota.sh" \
		tests/run-tests.sh $(BUILD)/tests/test-quota
