/* reconciler-internal.h - the reconciler's state, shared by its own files only
 * (reconciler.c: the loop and the passes; reconciler-requests.c: CSI requests). */
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
#include "reconciler.h"
#include "spec-source.h"
#include "volume-ops.h"

struct pending_request;

/* Operations in flight on one volume. */
struct vol_busy {
	char *name;
	unsigned pod_ops;	/* pod-level operations */
	unsigned releasing;	/* of those, tear-downs */
	bool device_op;		/* a mount_device or unmount_device */
};

struct reconciler {
	char *root_dir;
	char *state_dir;
	char *pods_dir;
	char *pods_root;	/* <root>/pods */
	char *plugins_prefix;	/* <root>/plugins/kubernetes.io/ */
	struct reconciler_config cfg;

	struct desired_state *dsw;
	struct actual_state *asw;
	struct mount_table *table;
	struct mount_monitor *monitor;
	struct journal *journal;
	struct executor *ex;
	struct backoff *backoff;
	struct spec_source *specs;
	struct hashmap *inflight_pod;	/* target -> volume_op */
	struct hashmap *inflight_dev;	/* volume name -> volume_op (device-level) */
	struct hashmap *busy;		/* volume name -> vol_busy */
	struct hashmap *pass_releasing;	/* per pass, kept to save allocations: volumes */
	struct hashmap *pass_held;	/* being released, and held by some pod mount */

	int epoll_fd;
	int timer_fd;
	int wake_fd;
	pthread_t thread;
	bool thread_started;
	bool stop;			/* set under stats_lock */
	bool resync_requested;		/* set under stats_lock */

	bool table_dirty;
	bool pass_needed;
	unsigned long ops_started;
	unsigned long ops_failed;
	bool ready;
	uint64_t last_refresh_ms;
	uint64_t last_resync_ms;
	uint64_t last_health_ms;
	bool health_due;
	uint64_t watchdog_interval_ms;
	uint64_t last_watchdog_ms;
	char last_status[128];

	pthread_mutex_t stats_lock;
	struct reconciler_stats stats;

	/* CSI requests: handed over under req_lock, then owned by the reconciler thread until
	 * their outcome is known. */
	pthread_mutex_t req_lock;
	pthread_cond_t req_cond;
	struct pending_request *incoming;	/* under req_lock */
	struct pending_request *waiting;	/* reconciler thread only */
	char *kubelet_root;			/* NULL when CSI is off */

	uint64_t started_ms;			/* for the uptime in status */
	uint64_t csi_save_due_ms;		/* CSI entries changed: save by then (0: clean) */
	char journal_error[256];		/* the last save problem, "" when healthy */
	char journal_note[512];			/* what startup found wrong with it, or "" */
};


struct vol_busy *busy_get(struct reconciler *r, const char *volume, bool create);
bool device_op_running(struct reconciler *r, const char *volume);
char *key_for(const char *kind, const char *name);
int refresh_table(struct reconciler *r);
/* The CSI entries changed: the journal is saved within CSI_JOURNAL_DELAY_MS, batched with any
 * other change then, without holding up the call that changed them.  They only record what
 * kubelet asked for, and kubelet asks again: a restart that lost the last ones adopts a
 * repeated publish (the target already holds the volume) and unmounts on unpublish or
 * unstage what it finds there.  Device records, which only the agent knows, are saved
 * before the operation they describe (journal_mark_dirty). */
void csi_journal_changed(struct reconciler *r);
#define CSI_JOURNAL_DELAY_MS 200

/* reconciler-requests.c */
/* Applies the requests handed over since the last call. */
void requests_take_incoming(struct reconciler *r);
/* Answers the waiting requests whose outcome is now known. */
void requests_check_waiting(struct reconciler *r);
/* An operation failed: fails the requests waiting on it. */
void requests_op_failed(struct reconciler *r, const struct volume_op *op);
/* Answers every request still waiting with -ESHUTDOWN. */
void requests_abort_all(struct reconciler *r);
/* reconciler-status.c: the snapshot `volagent status` prints (caller frees). */
char *reconciler_status_json(struct reconciler *r);
/* The CSI part of the journal, and loading it back after a restart on the same boot. */
json_t *requests_export_csi(struct reconciler *r);
int requests_import_csi(struct reconciler *r, json_t *csi, struct error_info *err);
