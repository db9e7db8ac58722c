# torture.mk - `make torture`: scripts/torture, 1000 pod volume operations under SIGKILLs (as
# root, in a private mount namespace; see docs/hardening.md).  `make check` runs a short
# version (tests/torture/short.sh: 200 operations, 10 kills, under a minute).
TORTURE_ARGS ?=

.PHONY: torture
torture: $(BUILD)/volagent
	VOLAGENT_BIN=$(BUILD)/volagent scripts/torture $(TORTURE_ARGS)

CHECK_SCRIPTS += tests/torture/short.sh
