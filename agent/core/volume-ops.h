/* volume-ops.h - the blocking operations the reconciler hands to the executor: set a volume up
 * in a pod dir, tear it down, check a mount found after a restart, and stage or unstage a
 * device.  Each op carries copies of everything it needs and its results; the worker touches
 * nothing else, and the reconciler applies the results on its own thread. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "executor.h"
#include "plugin.h"

enum volume_op_kind {
	VOLUME_OP_SET_UP,
	VOLUME_OP_TEAR_DOWN,
	VOLUME_OP_VERIFY,
	VOLUME_OP_MOUNT_DEVICE,
	VOLUME_OP_UNMOUNT_DEVICE,
	VOLUME_OP_CHECK_HEALTH,
};

struct volume_op {
	struct executor_job job;
	enum volume_op_kind kind;

	/* inputs */
	char *key;			    /* backoff key: "pod:<target>" or "dev:<volume>" */
	char *volume_name;		    /* NULL for a tear-down of an unverified mount */
	const struct volume_plugin *plugin; /* NULL: unknown plugin, plain unmount */
	struct volume_spec *spec;	    /* a reference; NULL for tear-downs */
	char *target;			    /* pod volume dir, or the device's node-wide mount */
	char *target_root;		    /* trusted dir the target is walked down from */
	char *cleanup_stop; /* empty parents are removed up to here, not including */
	/* SET_UP: the target's parent must exist and only the target itself is made (a CSI
	 * publish: kubelet makes the parent and removes it once the pod is gone, so a missing
	 * one is a pod already cleaned up).  Unset: the whole chain is made (pod spec files). */
	bool parent_given;
	char *pod_uid;
	char *pod_ref; /* CSI: "<namespace>/<pod name>" kubelet gave, for log lines; NULL */
	bool read_only;
	char *device_mount_path;      /* SET_UP and VERIFY of device volumes */
	struct device_attachment att; /* MOUNT_DEVICE: made; UNMOUNT_DEVICE: to undo */
	bool startup;		      /* a VERIFY of the startup reconstruction */
	struct mount_seen seen;	      /* VERIFY: the table's mount at target when queued */
	bool device;		      /* CHECK_HEALTH of a device's node-wide mount */
	uint64_t queued_ms;	      /* when the reconciler started it (CLOCK_MONOTONIC) */
	/* The reconciler's list of operations in flight, in the order started (so by
	 * queued_ms): the oldest one's age is read without a walk of them all. */
	struct volume_op *inflight_older, *inflight_newer;

	/* results */
	int result; /* 0 or -errno */
	struct error_info err;
	int mount_id;	     /* of the new mount, SET_UP and MOUNT_DEVICE */
	bool found_in_place; /* SET_UP: the mount was already there (nothing was done) */
	/* SET_UP, VERIFY of a directory volume with a size: the project ID its directory
	 * carries, read back through the target (lib/quota.h); 0 for any other. */
	uint32_t project_id;
	bool verified; /* VERIFY: the target holds this volume */
	bool broken;   /* CHECK_HEALTH: the mount must be healed */
	/* MOUNT_DEVICE of a filesystem: the UUID its device's record names (asw_device.fs_uuid;
	 * "" for none), and the UUID of the filesystem mounted now (made or found), recorded
	 * when it succeeds ("" when not known). */
	char recorded_fs_uuid[MOUNT_TARGET_UUID_MAX];
	char fs_uuid[MOUNT_TARGET_UUID_MAX];
	char content[32]; /* MOUNT_DEVICE of a raw block volume: what the device carries (a
			   * filesystem or partition table type), "" when blank; logged */
	bool detached;	  /* MOUNT_DEVICE: an attachment from before a restart
					 * failed and was released; attach again next time */
	/* Not to be run: fails at once with this -errno and op->err, set before it is
	 * submitted (a MOUNT_DEVICE whose record did not reach the journal); 0 to run it. */
	int refused;
	uint64_t duration_ms;
};

struct volume_op *volume_op_new(enum volume_op_kind kind, const char *key);
struct volume_op *volume_op_free(struct volume_op *op);
const char *volume_op_kind_name(enum volume_op_kind kind);
static inline struct volume_op *volume_op_from_job(struct executor_job *job)
{
	return (struct volume_op *)job; /* job is the first member */
}
