# shellcheck shell=bash
# Registration through kubelet's plugin watcher: the CSINode object lists the driver with its
# topology key, the Node carries the label (the node id is the Node's name), and the
# CSIDriver object is deploy/base's.
driver=csi.volagent.io
topo_key=topology.$driver/node
csinode_driver() {
	kc get csinode "$CLUSTER_NODE_NAME" -o "jsonpath={.spec.drivers[?(@.name==\"$driver\")].name}" | grep -qx "$driver"
}
t_check "CSINode lists $driver (kubelet's plugin watcher registered it)" cluster_wait 60 "CSINode" csinode_driver
t_check "CSINode: the driver's topology key is $topo_key" \
	sh -c "[ \"\$1\" = '$topo_key' ]" sh \
	"$(kc get csinode "$CLUSTER_NODE_NAME" -o "jsonpath={.spec.drivers[?(@.name==\"$driver\")].topologyKeys[0]}")"
t_check "CSINode: the driver's node id is the node's name" \
	sh -c "[ \"\$1\" = '$CLUSTER_NODE_NAME' ]" sh \
	"$(kc get csinode "$CLUSTER_NODE_NAME" -o "jsonpath={.spec.drivers[?(@.name==\"$driver\")].nodeID}")"
t_check "the Node carries $topo_key=$CLUSTER_NODE_NAME" \
	sh -c "[ \"\$1\" = '$CLUSTER_NODE_NAME' ]" sh \
	"$(kc get node "$CLUSTER_NODE_NAME" -o "jsonpath={.metadata.labels.topology\.csi\.volagent\.io/node}")"
t_check "the CSIDriver object is deploy/base's (podInfoOnMount, Ephemeral mode)" \
	sh -c "[ \"\$1\" = 'true Persistent Ephemeral' ]" sh \
	"$(kc get csidriver "$driver" -o 'jsonpath={.spec.podInfoOnMount} {.spec.volumeLifecycleModes[*]}')"
agent_pod=$(kc -n volagent get pods -l app.kubernetes.io/name=volagent -o 'jsonpath={.items[0].metadata.name}')
