// go.mod - pins the helm CLI that tests/helm/build-helm.sh builds (tools.go); not part of the agent.
module volagent.test/helm

go 1.24

require helm.sh/helm/v3 v3.16.4 // indirect
