/* csi-node.h - the CSI Node service's backend: each call becomes a desired-state change that
 * the reconciler applies, and the call is answered when the node matches (see
 * reconciler-requests.c).  Stats and expansion are answered here, on the CSI worker.
 *
 * A volume_context names the plugin in "type" (local, nfs, rbd); its other keys are the
 * plugin's fields (local: path, fsType), except "mountOptions" (comma-separated mount
 * options) and namespaced keys with a '/' (kubelet's csi.storage.k8s.io/pod.name, a
 * provisioner's storage.kubernetes.io/...), which are metadata, not plugin fields.  The capability's fs_type overrides fsType, its mount_flags are mount options, and
 * `secrets` reach the plugin as the spec's secrets, nowhere else.
 *
 * Access modes (docs/csi.md): every SINGLE_NODE_* mode but SINGLE_NODE_MULTI_WRITER allows one
 * publish target per node, reader modes mount read-only, a volume keeps the mode it was
 * staged with, and a multi-node writer of an rbd volume is refused (FAILED_PRECONDITION). */
#pragma once

#include "csi-server.h"
#include "reconciler.h"

struct csi_node_config {
	struct reconciler *reconciler;
	int stats_timeout_ms; /* statfs of a volume gives up after this */
};

/* The ops to hand to csi_server_new, with a struct csi_node_config as userdata. */
extern const struct csi_node_ops csi_node_ops;
