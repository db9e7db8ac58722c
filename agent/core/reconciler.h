/* reconciler.h - the one thread that owns the desired and actual state and converges them.
 *
 * Each pass, in this order (kubelet's reconciler.go does the same):
 *   1. unmount pod volumes that are no longer desired, or hold the wrong thing;
 *   2. mount desired pod volumes that are not mounted, staging the device first where the
 *      plugin needs it; a volume that is still being released from another pod waits, so a
 *      volume moving between pods is unmounted from the old pod before the new one gets it;
 *   3. unmount and detach devices that no pod uses any more.
 * The work itself runs on the executor's workers, at most one operation per volume (per
 * volume and target for pod-level work), with exponential backoff per failing operation.
 *
 * A pass is full (every key: start-up until the reconstruction is complete, a resync asked
 * for or on its timer, health check rounds, a table change that does not say what it
 * touched) or incremental: only the targets and volumes touched since the last pass, with
 * the same rules.  A touched target brings the pod volume wanting it, the pod mount holding
 * it and their volume's device; a touched volume brings its device and every pod volume and
 * pod mount of it.  Spec file and CSI changes touch their targets, a finished operation its
 * target and volume (see touch_after in reconciler-ops.c), an expired backoff its key (see
 * reconciler-internal.h).
 *
 * The loop sleeps in epoll on: the pods dir (inotify), the mount table (the kernel's mount
 * events, or libmount's monitor on older kernels), block device events (libudev monitor, for
 * the device inventory), finished operations (eventfd), a timer (backoff, periodic resync,
 * watchdog), and a wake-up eventfd.  It never polls the mount table: it applies each mount
 * event, or re-reads it when libmount's monitor says it changed. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "plugin.h"
#include "pod-info.h"
#include "volume-spec.h"

/* An outside source of events the reconciler's loop also waits on (the device monitor): the
 * loop calls dispatch(userdata) on its own thread whenever fd is readable.  The core knows
 * nothing of what the source does. */
struct reconciler_event_source {
	int fd;
	void (*dispatch)(void *userdata);
	void *userdata;
};

struct reconciler_config {
	const char *root_dir;
	const char *state_dir;
	const char *pods_dir;	/* NULL: no spec files */
	bool insecure_pods_dir; /* tests only: spec files are not checked (spec-source.h) */
	unsigned workers;
	uint64_t backoff_initial_ms;
	uint64_t backoff_max_ms;
	uint64_t resync_ms;		  /* full pass with a fresh table this often */
	uint64_t refresh_min_interval_ms; /* re-read the table at most this often in a burst */
	uint64_t health_interval_ms;	  /* check_health of mounted volumes this often; 0: never */
	uint64_t stale_stage_after_ms;	  /* a stage with no pod this long is lost; 0: never */
	bool mount_events_off;	  /* follow the table by libmount even where mount events exist */
	const char *kubelet_root; /* CSI targets and staging paths lie below it; NULL: no CSI */
	/* The CSI driver's name: a mount at a CSI path the agent has no record of is its own only
	 * when kubelet's record there names it (kubelet-record.h).  NULL: none is. */
	const char *driver_name;
	/* Called once, on the reconciler thread, when the startup reconstruction is complete (the
	 * daemon sends READY=1 from it, once the CSI server listens too). */
	void (*on_ready)(void *userdata);
	void *on_ready_userdata;
	/* Extra event sources for the loop (n_sources of them); the array outlives the reconciler. */
	const struct reconciler_event_source *sources;
	size_t n_sources;
};

/* A desired-state change asked for by a CSI Node call.  The reconciler applies it, and the
 * outcome is known once the actual state matches (or an operation for it failed). */
enum volume_request_kind {
	VOLUME_REQUEST_STAGE,
	VOLUME_REQUEST_UNSTAGE,
	VOLUME_REQUEST_PUBLISH,
	VOLUME_REQUEST_UNPUBLISH,
	VOLUME_REQUEST_INFO,   /* what is known of the volume; changes nothing */
	VOLUME_REQUEST_STATUS, /* a JSON snapshot of the whole state (volagent status) */
};

struct volume_request {
	enum volume_request_kind kind;
	char *volume_id;
	char *path; /* the staging path (stage, unstage) or target (publish...) */
	/* publish: where it was staged; NULL when not.  unstage: where a raw block volume staged
	 * at path is held (<path>/dev): the path to unstage when the volume is staged there. */
	char *staging_path;
	struct volume_spec *spec;	    /* stage, publish: a reference */
	const struct volume_plugin *plugin; /* stage, publish: the one that accepts spec */
	bool read_only;			    /* publish */
	bool single_writer;		    /* publish: a second target on this node is refused */
	/* stage, publish: tells a compatible repeat from a conflict.  It holds "mode=<n>;", the
	 * CSI access mode (VolumeCapability.AccessMode.Mode), which the access-mode checks read:
	 * a volume is published at all its targets with the mode it was staged with. */
	char *fingerprint;
	struct pod_info pod; /* publish: the pod.* keys of its volume_context; never a token */
};

struct volume_request_result {
	/* 0 or a negative errno: -EEXIST a conflicting request for the same path or volume,
	 * -EOPNOTSUPP not possible as asked (not staged, single writer elsewhere, another access
	 * mode), -ENOENT another volume is at the path (unpublish, unstage), others from the
	 * operation that failed. */
	int error;
	char message[512]; /* for the caller; never holds a secret */
	/* VOLUME_REQUEST_INFO */
	bool known;	     /* the volume is desired (staged or published) */
	bool device_mounted; /* its device is mounted at its staging path */
	bool uses_device;    /* it has a device of its own, mounted at its staging path */
	bool at_path;	     /* the request's path is its staging path or a target */
	bool block;	     /* a raw block volume */
	char plugin[32];
	char device_path[256]; /* the block device, when it has one */
	int access_mode;       /* the CSI access mode it was staged (or published) with; -1 */
	/* VOLUME_REQUEST_STATUS: the snapshot, owned by the caller (free it) */
	char *status_json;
};

struct volume_request *volume_request_new(enum volume_request_kind kind);
struct volume_request *volume_request_free(struct volume_request *req);

struct reconciler_stats {
	unsigned long passes;
	unsigned long full_passes;	  /* of those, full ones */
	unsigned long incremental_passes; /* and incremental ones */
	size_t last_pass_keys;		  /* targets, volumes and devices the last pass visited */
	unsigned long keys_visited;	  /* by every pass so far */
	uint64_t last_pass_us;
	size_t desired_pod_volumes;
	size_t mounted_pod_volumes;
	size_t devices;
	unsigned failing;
	unsigned long ops_started;
	unsigned long ops_failed;
	unsigned long journal_saves;
};

struct reconciler;

int reconciler_new(const struct reconciler_config *cfg, struct reconciler **ret,
		   struct error_info *err);
/* Sets the on_ready callback (before reconciler_start). */
void reconciler_set_on_ready(struct reconciler *r, void (*on_ready)(void *), void *userdata);
/* Reconstructs the actual state (journal, mount table, pod dirs), reads the spec files and
 * starts the reconciler thread. */
int reconciler_start(struct reconciler *r, struct error_info *err);
/* Asks the thread to stop, waits for operations in flight to finish, saves the journal. */
void reconciler_stop(struct reconciler *r);
struct reconciler *reconciler_free(struct reconciler *r);
/* Asks for a full resync now: a fresh read of the mount table and a full pass, whose duration
 * is logged ("forced resync").  Safe from any thread. */
void reconciler_request_resync(struct reconciler *r);
/* Hands req (consumed) to the reconciler thread and waits up to timeout_ms for its outcome.
 * Returns 0 with ret filled, or -ETIMEDOUT when the outcome is not known yet: the change
 * stays in force and a repeated request finds it in progress. */
int reconciler_request(struct reconciler *r, struct volume_request *req, long long timeout_ms,
		       struct volume_request_result *ret);
/* Called once with the outcome of a request handed over by reconciler_submit(), on the
 * reconciler thread or the submitting one (see reconciler_submit), with the reconciler's
 * state locked: r is 0 with res filled, or -ETIMEDOUT when the outcome was not known by
 * the request's time limit (the change stays in force, as with reconciler_request).  It must
 * not block and must not wait for the reconciler (reconciler_request); it may submit a new
 * request.  res and what it points to are the callee's only during the call (it may take
 * res->status_json, setting it to NULL). */
typedef void (*reconciler_done_fn)(int r, struct volume_request_result *res, void *userdata);

/* Hands req (consumed) to the reconciler: done(userdata) is called exactly once with the
 * outcome, or -ETIMEDOUT after timeout_ms (the reconciler's timer, whatever the operation
 * does).  When the reconciler thread sleeps, this thread decides, runs the request's
 * operation and calls done before returning, as a worker and the reconciler thread would
 * (reconciler-caller.c): it may block for as long as that operation does.  Else (the
 * reconciler thread is in a turn, or REC_CALLER_OPS_MAX calls run operations already) it
 * returns at once and done is called on the reconciler thread.
 * Returns 0, or -ENOMEM (req freed, done not called). */
int reconciler_submit(struct reconciler *r, struct volume_request *req, long long timeout_ms,
		      reconciler_done_fn done, void *userdata);
/* Whether the startup reconstruction is complete (every mount found was adopted or removed). */
bool reconciler_is_ready(struct reconciler *r);
/* A consistent copy of the counters (taken by the reconciler thread after each pass). */
void reconciler_get_stats(struct reconciler *r, struct reconciler_stats *ret);
