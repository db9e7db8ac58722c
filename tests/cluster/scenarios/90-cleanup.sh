# shellcheck shell=bash
# Everything deleted: no CSI mount, no staging dir, no journal entry, nothing formatted left
# mounted; the agent's status counts no volume.
kc delete pods -l app=volagent-test --wait=true --timeout="$(t_secs 120)s" >/dev/null
kc delete pvc --all --wait=true --timeout="$(t_secs 60)s" >/dev/null
kc delete pv --all --wait=true --timeout="$(t_secs 60)s" >/dev/null
t_check "no CSI mount is left on the node" cluster_wait 60 "the CSI mounts to go" no_csi_mounts
no_pod_dirs() { [ -z "$(find "$CLUSTER_DIR/kubelet/pods" -mindepth 3 -path '*kubernetes.io~csi*' 2>/dev/null)" ]; }
t_check "no CSI volume dir is left under kubelet's pods dir" cluster_wait 60 "kubelet's cleanup" no_pod_dirs
no_staging() { [ -z "$(find "$CLUSTER_DIR/kubelet/plugins/kubernetes.io/csi" -name globalmount 2>/dev/null)" ]; }
t_check "no staging dir is left" cluster_wait 60 "the staging dirs to go" no_staging
status_empty() { kc -n volagent exec "$agent_pod" -c volagent -- volagent status --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
vols = s.get("volumes", [])
sys.exit(0 if not vols else 1)'; }
t_check "volagent status lists no volume" cluster_wait 60 "the agent to forget the volumes" status_empty
