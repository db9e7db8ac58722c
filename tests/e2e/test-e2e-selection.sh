#!/bin/bash
# test-e2e-selection.sh - the part of Kubernetes' storage e2e suite that `make check` runs: one
# or a few tests of each area (tests/e2e/run.sh --selection), on a fresh test cluster.
exec "$(dirname "$0")/run.sh" --selection "$@"
