//go:build tools

// tools.go - pins the helm CLI (helm.sh/helm/v3/cmd/helm) in this directory's go.mod/go.sum;
// build-helm.sh builds it.  Nothing here is linked into the agent.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
