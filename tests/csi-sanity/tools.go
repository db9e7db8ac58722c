//go:build tools

// tools.go - pins csi-sanity, the CSI community's conformance tool, as a dependency of this
// module so that go.mod and go.sum fix its version and every module it builds from.  Nothing
// here is part of the agent: tests/csi-sanity/build builds the command into a cache outside
// the repository.
package tools

import (
	_ "github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity"
)
