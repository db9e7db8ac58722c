#!/bin/bash
# build-helm.sh - builds the helm CLI pinned by this directory's go.mod/go.sum from the Go
# module proxy (GOFLAGS=-mod=mod CGO_ENABLED=0) into
# /var/cache/volagent-test/helm-<sha256 of go.mod+go.sum, 12 hex>/helm, reused when present,
# and prints its path.  About 2 minutes the first time, on 2 cores.  Nothing is committed.
# Exit 77 without Go (tests calling it skip), 1 when the build fails.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
command -v go >/dev/null || { echo "build-helm: go not installed" >&2; exit 77; }
hash=$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-12)
dir=${VOLAGENT_TEST_CACHE:-/var/cache/volagent-test}/helm-$hash
if [ ! -x "$dir/helm" ]; then
	mkdir -p "$dir"
	(cd "$here" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -o "$dir/helm.tmp" helm.sh/helm/v3/cmd/helm) || exit 1
	mv "$dir/helm.tmp" "$dir/helm"
fi
echo "$dir/helm"
