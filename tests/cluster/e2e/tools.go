//go:build tools

// The e2e suite the test cluster runs, listed so that `go mod tidy` pins its dependencies.
package tools

import (
	_ "k8s.io/kubernetes/test/e2e"
	_ "k8s.io/kubernetes/test/e2e/storage/external"
	_ "k8s.io/kubernetes/test/images/agnhost"
)
