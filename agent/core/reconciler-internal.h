/* reconciler-internal.h - the reconciler's state, shared by its own files only:
 * reconciler.c (lifecycle, loop, timers, table refresh, journal saves), reconciler-ops.c
 * (operations in flight and their results), reconciler-pass.c (the pass),
 * reconciler-reconstruct.c (after a restart), reconciler-requests.c (CSI requests) and
 * reconciler-status.c (the status snapshot) and reconciler-caller.c (a CSI call run on the
 * thread that received it).  Functions shared between them are prefixed rec_; all run with
 * state_lock held: by the reconciler thread for each turn of its loop, or by a CSI call's own
 * thread while it decides and applies its operation (reconciler-caller.c).  The state is a few parts with one job each: the loop's
 * timing, the pass's sets, the operations in flight, the CSI requests, status and notify,
 * and the journal's health. */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "actual-state.h"
#include "backoff.h"
#include "desired-state.h"
#include "executor.h"
#include "journal.h"
#include "mount-table.h"
#include "node-volumes.h"
#include "reconciler.h"
#include "spec-source.h"
#include "time-util.h"
#include "volume-ops.h"

struct pending_request;

/* Operations in flight on one volume. */
struct vol_busy {
	char *name;
	unsigned pod_ops;   /* pod-level operations */
	unsigned releasing; /* of those, tear-downs */
	bool device_op;	    /* a mount_device or unmount_device */
};

/* The loop's timing (reconciler.c): its fds and thread, the mount table's reads and the
 * timers of the periodic work.  Owner: the reconciler thread; stop and resync_requested are
 * set from other threads under status.lock. */
struct rec_loop {
	int epoll_fd;
	int timer_fd;
	uint64_t timer_armed_ms; /* the deadline timer_fd is armed for (CLOCK_MONOTONIC ms), 0 none */
	int wake_fd;
	pthread_t thread;
	bool thread_started;
	bool stop;	       /* set under status.lock */
	bool resync_requested; /* set under status.lock */

	bool table_dirty;
	bool table_unreadable;	   /* the last read of the mount table failed (logged once) */
	unsigned long table_reads; /* full reads of the mount table */
	unsigned long mount_event_batches;   /* reads of the mount event queue */
	unsigned long mount_event_overflows; /* of those, lost events (then a full read) */
	/* A burst of mount events (EVENT_COALESCE_MS): the monitor's fd is not watched until
	 * monitor_resume_ms, so that the kernel queues the burst's events and one read takes
	 * many. */
	bool monitor_paused;
	uint64_t monitor_resume_ms;
	/* The pause is a CSI call's (rec_monitor_hold): the loop's timer, not its wait, keeps
	 * monitor_resume_ms, as the loop may be asleep with no timeout. */
	bool monitor_held;
	uint64_t last_event_batch_ms;
	/* A burst of operations no caller waits for (COMPLETION_COALESCE_MS): the executor's fd
	 * is not watched until completions_resume_ms. */
	bool completions_paused;
	uint64_t completions_resume_ms;
	uint64_t last_refresh_ms;
	uint64_t last_refresh_cost_ms; /* how long that read took (refresh_interval_ms) */
	uint64_t last_resync_ms;
	uint64_t last_health_ms;
	bool health_due;
};

/* What the next pass visits (reconciler-pass.c, see rec_touch_target): sets of owned strings.
 * Owner: the reconciler thread. */
struct rec_pass_sets {
	struct hashmap *touched_targets;
	struct hashmap *touched_volumes; /* the device and every pod volume and mount */
	struct hashmap *touched_devices; /* the device (and CSI stage) only */
	/* The pass's own sets, swapped with the touched ones when it starts (kept to save
	 * allocations of the tables). */
	struct hashmap *visit_targets, *visit_volumes, *visit_devices;
	/* Volumes a pod volume of which waited at its last visit for something of the whole
	 * volume (a release elsewhere, its device): the end of a tear-down of such a volume
	 * visits all of it, of another only its device (rec_volume_has_waiters). */
	struct hashmap *waiting_volumes;
	bool full_pass_due; /* the next pass visits every key */
	bool always_full;   /* tests: every pass is a full one */
};

/* The operations in flight (reconciler-ops.c).  Owner: the reconciler thread. */
struct rec_ops {
	struct hashmap *inflight_pod; /* target -> volume_op */
	struct hashmap *inflight_dev; /* volume name -> volume_op (device-level) */
	/* Every op of both, oldest first (volume_op.inflight_older/newer). */
	struct volume_op *inflight_oldest, *inflight_newest;
	struct hashmap *busy; /* volume name -> vol_busy */
	bool setups_deferred; /* set-ups waited for room in flight: a full pass is due */
	size_t max_pod_ops;   /* REC_MAX_POD_OPS_IN_FLIGHT (tests lower it) */
	unsigned long ops_started;
	unsigned long ops_failed;
	unsigned long ops_since_trim; /* operations done since the heap was last trimmed */
	uint64_t last_op_done_ms;
	size_t startup_verifies;	/* VERIFYs of the startup reconstruction in flight */
	unsigned long adopted_at_start; /* mounts verified before ready (one summary line) */
};

/* CSI requests (reconciler-requests.c): handed over under lock, then owned by the reconciler
 * thread until their outcome is known; and the CSI part of the journal. */
struct rec_csi {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct pending_request *incoming; /* under lock */
	struct pending_request *waiting;  /* reconciler thread only */
	/* rec_run_on_thread: the call to make, and whether it was made (under lock). */
	void (*call_fn)(struct reconciler *r, void *arg);
	void *call_arg;
	bool call_done;
	char *kubelet_root;	/* NULL when CSI is off */
	char *driver_name;	/* NULL when CSI is off */
	uint64_t save_due_ms;	/* CSI entries changed: save by then (0: clean) */
	struct hashmap *export; /* each CSI volume's journal entry */
	unsigned export_gen;
	/* "<volume_id>\x1f<path>" of each target and staging path the journal's CSI entries
	 * recorded (those that passed its checks; of this boot, or of an earlier one waiting for
	 * kubelet): the agent's own record of what it made there.  NULL: none. */
	struct hashmap *recorded;
};

/* Status and notify (reconciler-status.c, reconciler.c): what `volagent status`, the metrics
 * and systemd are told.  lock guards stats, ready and loop.stop/resync_requested; the rest is
 * the reconciler thread's. */
struct rec_status {
	pthread_mutex_t lock;
	struct reconciler_stats stats;
	bool ready;
	uint64_t started_ms; /* for the uptime in status */
	uint64_t watchdog_interval_ms;
	uint64_t last_watchdog_ms;
	char last_status[128];	 /* the STATUS= last sent */
	uint64_t last_status_ms; /* when it was sent */
	bool status_due;	 /* the counts changed since: sent at last_status_ms + interval */
};

/* The journal's health, for status.  Owner: the reconciler thread. */
struct rec_journal_health {
	char error[256]; /* the last save problem, "" when healthy */
	char note[512];	 /* what startup found wrong with it, or "" */
	/* Saves failing in a row, the delay before the next try (doubling, capped) and when it
	 * falls due (0: no save failing). */
	unsigned long failures;
	uint64_t retry_delay_ms;
	uint64_t retry_ms;
};

struct reconciler {
	char *root_dir;
	char *state_dir;
	char *pods_dir;
	char *pods_root;      /* <root>/pods */
	char *plugins_prefix; /* <root>/plugins/kubernetes.io/ */
	struct reconciler_config cfg;

	struct desired_state *dsw;
	struct actual_state *asw;
	struct mount_table *table;
	struct mount_monitor *monitor;
	struct journal *journal;
	struct executor *ex;
	struct backoff *backoff;
	struct spec_source *specs;
	struct node_volumes *node_vols; /* what drain-check waits for, and lost stages */

	/* Owns everything of the reconciler but the parts with their own locks (csi.lock,
	 * status.lock): the loop holds it for each turn and drops it only to wait; a CSI call
	 * takes it to decide and to apply its operation's result, never across the operation
	 * (reconciler-caller.c). */
	pthread_mutex_t state_lock;
	bool loop_running;   /* under state_lock: the loop takes what a call leaves behind */
	unsigned caller_ops; /* under state_lock: operations calls run on their own threads */

	struct rec_loop loop;
	struct rec_pass_sets pass;
	struct rec_ops ops;
	struct rec_csi csi;
	struct rec_status status;
	struct rec_journal_health journal_health;
};

/* reconciler-ops.c */
/* The busy record of volume, created when create is set; NULL when none (or out of memory). */
struct vol_busy *rec_busy_get(struct reconciler *r, const char *volume, bool create);
/* Whether a device-level operation on volume is in flight. */
bool rec_device_op_running(struct reconciler *r, const char *volume);
/* Whether a pod-level operation on target (of volume) may start now. */
bool rec_pod_op_allowed(struct reconciler *r, const char *target, const char *volume);
/* Whether a device-level operation on volume may start now (nothing else runs on it). */
bool rec_device_op_allowed(struct reconciler *r, const char *volume);
/* A new operation on target; NULL when out of memory. */
struct volume_op *rec_op_new(struct reconciler *r, enum volume_op_kind kind, const char *key,
			     const char *target, const char *volume_name,
			     const struct volume_plugin *plugin, struct volume_spec *spec);
/* Marks op as in flight and appends it to the list at *tail (submitted by the caller). */
void rec_op_start(struct reconciler *r, struct volume_op *op, struct volume_op ***tail);
/* Up to where empty dirs are removed after unmounting target (caller frees). */
char *rec_cleanup_stop_for(struct reconciler *r, const char *target, bool device);
/* "<namespace>/<pod name>" of a CSI pod volume for its operation's log lines (caller frees),
 * or NULL when kubelet gave no pod name. */
char *rec_pod_ref(const struct dsw_pod_volume *pv);
/* The backoff key of an operation: "<kind>:<name>" (caller frees). */
char *rec_key_for(const char *kind, const char *name);
/* Age in seconds of the oldest operation in flight, 0 when none. */
double rec_oldest_pending_age(struct reconciler *r, uint64_t now);
/* Applies the results of the operations the executor finished. */
void rec_drain_completed(struct reconciler *r);
/* Applies the result of op, which ran (on a worker or a caller's thread), and frees it. */
void rec_op_done(struct reconciler *r, struct volume_op *op);
/* Logs how many existing mounts the startup reconstruction adopted (their own lines are at
 * debug level until the agent is ready); nothing when none.  Called once, on becoming
 * ready. */
void rec_log_adopted_at_start(struct reconciler *r);

/* After a burst of operations (a converge: up to REC_MAX_POD_OPS_IN_FLIGHT of ~1 KiB each,
 * and the workers' libmount contexts in their own arenas), the heap is left with free pages
 * in its middle that free() does not give back: they are, once the burst has been over for
 * TRIM_QUIET_MS and the agent is ready (never on the way to READY, nor between the waves of
 * a converge, which would fault the pages back in). */
void rec_trim_after_burst(struct reconciler *r);
/* When rec_trim_after_burst() has something to do (UINT64_MAX: not before another event). */
uint64_t rec_trim_deadline(struct reconciler *r);
#define TRIM_AFTER_OPS 1024
#define TRIM_QUIET_MS 2000

/* At most this many pod operations are in flight: a pass that finds more set-ups to start
 * defers them to a full pass once half of these are done.  Each operation holds ~1 KiB until
 * it is done, and 10,000 pod volumes appearing at once (a converge) would otherwise hold them
 * all, a peak the heap keeps; the executor's workers never run short of work. */
#define REC_MAX_POD_OPS_IN_FLIGHT 2048

/* reconciler-pass.c: one pass (see reconciler.h): a full one when asked for (or until the
 * startup reconstruction is complete), else an incremental one over what was touched. */
void rec_pass(struct reconciler *r);
/* The same pass, but the operations it starts are handed to the caller (linked through
 * job.next, NULL: none) instead of to the executor: the caller runs or submits each. */
void rec_pass_collect(struct reconciler *r, struct volume_op **ret);
/* Whether anything asks for a pass. */
bool rec_pass_pending(struct reconciler *r);
/* Frees the pass's sets and indexes (reconciler_free); accepts a half-built reconciler. */
void rec_pass_fini(struct reconciler *r);
/* Allocates them: 0 or -ENOMEM. */
int rec_pass_init(struct reconciler *r);
/* Only the device of volume_name (and its CSI stage) is visited: a pod volume of it came or
 * went, which needs no visit of the others. */
void rec_touch_device(struct reconciler *r, const char *volume_name);
/* A backoff key ("pod:<target>", "dev:<volume>") whose delay is over: its target or volume. */
void rec_touch_key(struct reconciler *r, const char *key);
/* The desired state's change hook (dsw_set_change_hook): touches the target and the device. */
void rec_dsw_changed(void *userdata, const char *target, const char *volume_name);
/* What the next pass visits.  rec_touch_target: a path the agent mounts changed (a pod volume
 * dir, a CSI target or staging path, a device's node-wide mount path): the desired pod volume
 * and the actual pod mount at that path, and the device of their volumes.
 * rec_touch_volume: everything of one volume (its device and every pod volume that wants it
 * or pod mount that holds it).  rec_want_full_pass: every key (start-up, SIGHUP, the resync
 * timer, health check rounds, a table read that could not say what changed). */
void rec_touch_target(struct reconciler *r, const char *target);
void rec_touch_volume(struct reconciler *r, const char *volume_name);
void rec_want_full_pass(struct reconciler *r);
/* Whether a pod volume of volume_name waited at its last visit for something of the whole
 * volume (see rec_pass_sets.waiting_volumes). */
bool rec_volume_has_waiters(struct reconciler *r, const char *volume_name);
/* More touched keys in one set than this: they are dropped for one full pass, which visits
 * them for less than the sets cost (10,000 pod spec files loaded at once would hold 10,000
 * copies of their targets). */
#define REC_TOUCHED_MAX 4096

/* reconciler-reconstruct.c: the actual state after a restart, from the journal, the mount
 * table and the pod spec files.  Returns 0 or a negative errno with err set. */
int rec_reconstruct(struct reconciler *r, struct error_info *err);
void rec_remove_stale_pod_dirs(struct reconciler *r);
/* Has each plugin remove what it keeps for targets the agent no longer knows at all
 * (plugin_remove_orphans): once, with rec_remove_stale_pod_dirs. */
void rec_remove_orphans(struct reconciler *r);

/* reconciler.c */
/* Re-reads the mount table (a full read) and syncs the actual state with it; the targets that
 * changed are touched (the first read asks for a full pass).  Does not log: returns 0, or a
 * negative errno with err set and the last table read kept. */
int rec_refresh_table(struct reconciler *r, struct error_info *err);
/* For tests: runs fn(r, arg) on the reconciler thread between two events and waits for it to
 * return (directly when the thread is not running), so fn may read and change the desired and
 * actual state safely.  One caller at a time. */
void rec_run_on_thread(struct reconciler *r, void (*fn)(struct reconciler *r, void *arg),
		       void *arg);
/* Saves the journal if a device record changed, or CSI entries changed and their save is due
 * (or force). */
void rec_save_journal(struct reconciler *r, bool force);
/* A CSI call runs its operation on its own thread (reconciler-caller.c): the mount event it
 * makes would wake the sleeping loop only to learn what the call applies itself.  So the
 * monitor's fd is not watched while it runs, for event_coalesce_ms at most (the loop's timer
 * ends the pause then, should the operation hang); rec_monitor_release reads what came meanwhile
 * on the call's thread and watches the fd again.  Returns whether the pause is the call's
 * (false: the monitor was paused already, or could not be). */
bool rec_monitor_hold(struct reconciler *r);
void rec_monitor_release(struct reconciler *r);
/* Arms the loop's timer for the first of its deadlines (a save, a backoff, a request's time):
 * after a CSI call changed them on its own thread, the loop, asleep, still wakes for them. */
void rec_arm_timer(struct reconciler *r);
/* The CSI entries changed: the journal is saved within CSI_JOURNAL_DELAY_MS, batched with any
 * other change then, without holding up the call that changed them.  They only record what
 * kubelet asked for, and kubelet asks again: a restart that lost the last ones adopts a
 * repeated publish (the target already holds the volume) and unmounts on unpublish or
 * unstage what it finds there.  Device records, which only the agent knows, are saved
 * before the operation they describe (journal_mark_dirty). */
void rec_csi_journal_changed(struct reconciler *r);
#define CSI_JOURNAL_DELAY_MS 200

/* reconciler-caller.c: a CSI call run to completion on the thread that received it. */
/* Takes state_lock for a call, if the loop runs and the lock is free now (a turn of the loop
 * in progress would hold the call up for that turn: the call is then handed to the loop).
 * True: the caller holds it and must call rec_caller_end. */
bool rec_caller_begin(struct reconciler *r);
/* With state_lock held, after the call's request was applied: runs the passes the call's
 * change asks for, and each operation on the call's path (target or staging path) or device
 * (volume_name) on this thread, with state_lock dropped while it runs, until answered(arg)
 * or no such operation is started.  The others go to the executor. */
void rec_caller_run(struct reconciler *r, const char *path, const char *volume_name,
		    bool (*answered)(void *arg), void *arg);
/* Saves what the call changed (device records), arms the loop's timer and drops state_lock. */
void rec_caller_end(struct reconciler *r);
/* At most this many calls run their operation on their own thread at once; the operations of
 * more go to the executor, as before.  Each such call holds a thread of the CSI server's pool
 * (16) while its operation runs: operations that hang (a frozen NFS server) thus hold at most
 * this many, and the pool always has threads for the other calls. */
#define REC_CALLER_OPS_MAX 4

/* reconciler-requests.c */
/* Applies the requests handed over since the last call. */
void rec_requests_take_incoming(struct reconciler *r);
/* Answers the waiting requests whose outcome is now known, and tells submitted ones whose
 * time is up (reconciler_submit). */
void rec_requests_check_waiting(struct reconciler *r);
/* When the first submitted request's time is up (now_ms(); UINT64_MAX: none waits). */
uint64_t rec_requests_next_deadline(struct reconciler *r);
/* An operation failed: fails the requests waiting on it. */
void rec_requests_op_failed(struct reconciler *r, const struct volume_op *op);
/* Answers every request still waiting with -ESHUTDOWN. */
void rec_requests_abort_all(struct reconciler *r);
/* reconciler-status.c: the snapshot `volagent status` prints (caller frees). */
char *reconciler_status_json(struct reconciler *r);
/* The CSI part of the journal, and loading it back after a restart on the same boot. */
json_t *rec_requests_export_csi(struct reconciler *r);
void rec_requests_export_fini(struct reconciler *r);
int rec_requests_import_csi(struct reconciler *r, json_t *csi, struct error_info *err);
/* Keeps the targets and staging paths of csi, the journal's entries of an earlier boot (those
 * that pass the journal's checks), as the agent's record of what it made there. */
void rec_requests_note_earlier_boot(struct reconciler *r, json_t *csi);
/* Frees what rec_requests_import_csi and rec_requests_note_earlier_boot kept of the journal. */
void rec_requests_record_fini(struct reconciler *r);
/* Whether the journal's CSI entries recorded volume_id at path (a target or staging path). */
bool rec_requests_journal_record(struct reconciler *r, const char *volume_id, const char *path);
