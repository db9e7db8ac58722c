//go:build tools

// tools.go - makes go.mod keep hello-populator's dependencies (built by build-extra).
package tools

import _ "github.com/kubernetes-csi/lib-volume-populator/example/hello-populator"
