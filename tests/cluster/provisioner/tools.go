//go:build tools

// The sidecar the test cluster runs beside the agent, listed so that `go mod tidy` pins it.
package tools

import _ "github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner"
