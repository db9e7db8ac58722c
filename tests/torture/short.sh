#!/bin/bash
# short.sh - the short torture run of `make check` (mk/torture.mk): 200 pod volume operations
# and 10 SIGKILLs, bounded to 60 s of churn.  The full run is `scripts/torture` (docs/hardening.md).
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../../scripts/torture" --ops "${TORTURE_OPS:-200}" --kills "${TORTURE_KILLS:-10}" \
	--seconds "${TORTURE_SECONDS:-60}" --agent "${VOLAGENT_BIN:-build/volagent}"
