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
 * The loop sleeps in epoll on: the pods dir (inotify), the mount table (libmount monitor),
 * block device events (libudev monitor, for the device inventory), finished operations
 * (eventfd), a timer (backoff, periodic resync, watchdog), and a wake-up eventfd.  It never polls the mount table: it re-reads it when the monitor says it changed. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

struct reconciler_config {
	const char *root_dir;
	const char *state_dir;
	const char *pods_dir;		/* NULL: no spec files */
	unsigned workers;
	uint64_t backoff_initial_ms;
	uint64_t backoff_max_ms;
	uint64_t resync_ms;		/* full pass with a fresh table this often */
	uint64_t refresh_min_interval_ms;	/* re-read the table at most this often in a burst */
	bool device_inventory;		/* keep <state_dir>/devices.json current (devmon) */
	uint64_t health_interval_ms;	/* check_health of mounted volumes this often; 0: never */
};

struct reconciler_stats {
	unsigned long passes;
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
/* Reconstructs the actual state (journal, mount table, pod dirs), reads the spec files and
 * starts the reconciler thread. */
int reconciler_start(struct reconciler *r, struct error_info *err);
/* Asks the thread to stop, waits for operations in flight to finish, saves the journal. */
void reconciler_stop(struct reconciler *r);
struct reconciler *reconciler_free(struct reconciler *r);
/* Asks for a full resync now: a fresh read of the mount table and a full pass, whose duration
 * is logged ("forced resync").  Safe from any thread. */
void reconciler_request_resync(struct reconciler *r);
/* Whether the startup reconstruction is complete (every mount found was adopted or removed). */
bool reconciler_is_ready(struct reconciler *r);
/* A consistent copy of the counters (taken by the reconciler thread after each pass). */
void reconciler_get_stats(struct reconciler *r, struct reconciler_stats *ret);
