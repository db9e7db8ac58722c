# shellcheck shell=bash
# Dynamic provisioning (deploy/overlays/provisioning): external-provisioner beside the agent
# turns PVCs into directories on this node.  A PVC waits for its pod (WaitForFirstConsumer);
# its PV's node affinity names this node; the directory holds the pod's data and goes with the
# PVC; CSIStorageCapacity objects report the node's free space less what volumes reserve; a
# PVC larger than that leaves its pod unschedulable.  The shipped StorageClass enforces sizes:
# on a kernel without project quotas its PVCs fail to provision with the agent's error; a
# class with enforceSize "false" (recorded and reserved only) provisions here.
kc_apply <<EOF2
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: volagent-recorded}
provisioner: csi.volagent.io
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
parameters: {basePath: /mnt/disks/volagent, enforceSize: "false"}
EOF2
pvc() { # $1 name, $2 class, $3 size
	kc_apply <<EOF2
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $1}
spec: {accessModes: [ReadWriteOnce], storageClassName: $2, resources: {requests: {storage: $3}}}
EOF2
}
pvc_phase() { kc get pvc "$1" -o 'jsonpath={.status.phase}'; }
capacity_of() { # the CSIStorageCapacity of class $1 for this node, in bytes
	kc -n volagent get csistoragecapacities -o json | python3 -c '
import json, sys
cls = sys.argv[1]
units = {"": 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9}
for c in json.load(sys.stdin)["items"]:
    if c["storageClassName"] == cls and "capacity" in c:
        q = c["capacity"]
        n = q.rstrip("KMGTik")
        print(int(float(n) * units[q[len(n):]]))
        break' "$1"
}

pvc dyn-a volagent-recorded 64Mi
t_check "a PVC of a WaitForFirstConsumer class stays Pending without a pod" \
	sh -c '[ "$1" = Pending ]' sh "$(pvc_phase dyn-a)"
cap_ok() { [ "$(capacity_of volagent-recorded)" -gt 0 ] 2>/dev/null; }
t_check "external-provisioner publishes a CSIStorageCapacity for the class and node" \
	cluster_wait 120 "a CSIStorageCapacity object" cap_ok
cap0=$(capacity_of volagent-recorded)
writer_pod dyn-a "    - {name: data, persistentVolumeClaim: {claimName: dyn-a}}"
t_check "with its pod scheduled, the PVC is provisioned and the pod Ready" pod_ready dyn-a 180
pv=$(kc get pvc dyn-a -o 'jsonpath={.spec.volumeName}')
t_check "the PV's node affinity names this node" sh -c '[ "$1" = "$2" ]' sh "$CLUSTER_NODE_NAME" \
	"$(kc get pv "$pv" -o 'jsonpath={.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]}')"
handle=$(kc get pv "$pv" -o 'jsonpath={.spec.csi.volumeHandle}')
dyn_dir=$CLUSTER_DIR/disks/volagent/$handle
dyn_written() { grep -q dyn-a "$dyn_dir/log"; }
t_check "the pod's data is in <basePath>/<volume id> on the node ($handle)" cluster_wait 30 "the data" dyn_written

pvc dyn-big volagent-recorded 20Gi
writer_pod dyn-big "    - {name: data, persistentVolumeClaim: {claimName: dyn-big}}"
t_check "a 20Gi recorded-only volume is provisioned" pod_ready dyn-big 180
cap_down() { [ "$(capacity_of volagent-recorded)" -lt $((cap0 - 19 * 2**30)) ]; }
t_check "the node's CSIStorageCapacity drops by what the 20Gi volume reserves" \
	cluster_wait 120 "the capacity to drop" cap_down

pvc dyn-huge volagent-recorded 1000Ti
writer_pod dyn-huge "    - {name: data, persistentVolumeClaim: {claimName: dyn-huge}}"
unschedulable() { pod_events dyn-huge | grep -q "enough free storage"; }
t_check "a PVC larger than the node's capacity: the scheduler leaves its pod Pending" \
	cluster_wait 120 "the FailedScheduling event" unschedulable
t_check "and the PVC unbound" sh -c '[ "$1" = Pending ]' sh "$(pvc_phase dyn-huge)"
pod_gone dyn-huge
kc delete pvc dyn-huge --wait=true >/dev/null

pvc dyn-enforced volagent-local 64Mi
writer_pod dyn-enforced "    - {name: data, persistentVolumeClaim: {claimName: dyn-enforced}}"
pvc_event_has() { kc get events --field-selector "involvedObject.kind=PersistentVolumeClaim,involvedObject.name=$1" \
	-o 'jsonpath={range .items[*]}{.message}{"\n"}{end}' | grep -qF -- "$2"; }
t_check "the shipped StorageClass (enforced sizes) on a filesystem without project quotas: the PVC's events carry the agent's error" \
	cluster_wait 120 "ProvisioningFailed" pvc_event_has dyn-enforced "does not enforce project quotas"
pod_gone dyn-enforced
kc delete pvc dyn-enforced --wait=true >/dev/null

pod_gone dyn-a
pod_gone dyn-big
kc delete pvc dyn-a dyn-big --wait=true >/dev/null
pv_gone() { ! kc get pv "$pv" >/dev/null 2>&1; }
t_check "deleting the PVC deletes its PV (reclaimPolicy Delete)" cluster_wait 60 "the PV to go" pv_gone
t_check "and its directory on the node" sh -c '! [ -e "$1" ]' sh "$dyn_dir"
cap_back() { [ "$(capacity_of volagent-recorded)" -gt $((cap0 - 2**30)) ]; }
t_check "the node's CSIStorageCapacity rises again once the volumes are deleted" \
	cluster_wait 120 "the capacity to rise" cap_back
kc delete storageclass volagent-recorded >/dev/null
