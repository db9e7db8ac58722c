/* csi-controller.h - the CSI Controller service for node-local directory volumes (`volagent
 * run --csi --controller`), served on the same socket as Identity and Node.
 *
 * Each node's agent provisions on its own node only: CreateVolume makes a directory below the
 * StorageClass's basePath (the local plugin's policy, plugins/local-provision.h), answers its
 * accessible_topology as this node's segment (the key NodeGetInfo reports), and refuses a
 * request whose requisite topology does not hold this node (RESOURCE_EXHAUSTED), so that an
 * external-provisioner per node (--node-deployment) with WaitForFirstConsumer provisions where
 * the pod was scheduled.  DeleteVolume removes the directory unless the volume is staged or
 * published here; GetCapacity answers for this node's segment; ControllerExpandVolume records
 * the new size and leaves the quota to NodeExpandVolume.  Every other Controller RPC answers
 * UNIMPLEMENTED (grpc-core answers a method nobody registered so).
 *
 * Threads: the calls run on the CSI server's pool threads (blocking methods: DeleteVolume
 * walks a tree), one at a time (a lock of the controller's); DeleteVolume and
 * ControllerExpandVolume also hold the volume's in-flight slot, so a Node call on the same
 * volume at that moment answers ABORTED, and the other way round.  Requests' secrets are
 * never read, and wiped before they are freed.  A failed call is logged once (method, volume,
 * code, message). */
#pragma once

#include "error.h"
#include "grpc-core.h"
#include "reconciler.h"

struct csi_server;
struct csi_controller;

struct csi_controller_config {
	/* Asked whether a volume is staged or published before DeleteVolume; NULL: never
	 * (tests of the calls alone). */
	struct reconciler *reconciler;
};

/* Returns the controller, or NULL (-ENOMEM). */
struct csi_controller *csi_controller_new(const struct csi_controller_config *cfg);
/* Accepts NULL; returns NULL.  After the server is freed. */
struct csi_controller *csi_controller_free(struct csi_controller *c);

/* Registers the served Controller RPCs on g, for the server s (its node id, topology key and
 * in-flight slots).  Called by csi_server_start.  Returns 0 or -errno with err set. */
int csi_controller_add_methods(struct csi_controller *c, struct csi_server *s, struct gcore *g,
			       struct error_info *err);
