# shellcheck shell=bash
# `kubectl drain`: the node's pods are evicted, kubelet unpublishes and unstages every volume,
# and `volagent drain-check` (in the agent's pod) says the node holds none; after uncordon the
# Deployment's pod comes back on the node with its volumes, and the data written before.
kc_apply <<EOF2
apiVersion: apps/v1
kind: Deployment
metadata: {name: drain-app}
spec:
  replicas: 1
  selector: {matchLabels: {app: drain-app}}
  template:
    metadata: {labels: {app: drain-app}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: main
          image: localhost/busybox:1.37
          imagePullPolicy: Never
          command: [sh, -c, 'echo started >>/data/drain-log; echo started >>/disk/drain-log; exec sleep 100000']
          volumeMounts: [{name: data, mountPath: /data}, {name: disk, mountPath: /disk}, {name: scratch, mountPath: /scratch}]
      volumes:
        - {name: data, persistentVolumeClaim: {claimName: shared-dir}}
        - {name: disk, persistentVolumeClaim: {claimName: fs-disk}}
        - {name: scratch, csi: {driver: csi.volagent.io, volumeAttributes: {type: local}}}
EOF2
app_ready() { kc rollout status deployment/drain-app --timeout=5s; }
t_check "a Deployment's pod with a PV, a device PV and an ephemeral volume is Ready" cluster_wait 120 "drain-app" app_ready
t_check "kubectl drain evicts the node's pods" \
	kc drain "$CLUSTER_NODE_NAME" --ignore-daemonsets --delete-emptydir-data --timeout="$(t_secs 120)s"
no_csi_mounts() { [ -z "$(csi_mounts)" ]; }
t_check "after the drain no CSI mount is left on the node" cluster_wait 60 "the CSI mounts to go" no_csi_mounts
csi_mounts | head -5
t_check "volagent drain-check exits 0" kc -n volagent exec "$agent_pod" -c volagent -- volagent drain-check
kc uncordon "$CLUSTER_NODE_NAME" >/dev/null
t_check "after uncordon the Deployment's pod comes back Ready" cluster_wait 120 "drain-app" app_ready
app_pod=$(kc get pods -l app=drain-app -o 'jsonpath={.items[0].metadata.name}')
t_check "it sees the data written before the drain, on both PVs" \
	pod_exec "$app_pod" sh -c '[ "$(grep -c started /data/drain-log)" = 2 ] && [ "$(grep -c started /disk/drain-log)" = 2 ]'
kc delete deployment drain-app --wait=true >/dev/null
pod_gone "$app_pod" 60
