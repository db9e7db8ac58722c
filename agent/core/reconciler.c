/* reconciler.c - see reconciler.h.  The reconciler's lifecycle and its loop: events, timers,
 * the mount table refresh and journal saves.  The pass, operations in flight and the
 * reconstruction after a restart have their own files (reconciler-pass.c, reconciler-ops.c,
 * reconciler-reconstruct.c). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "actual-state.h"
#include "backoff.h"
#include "desired-state.h"
#include "executor.h"
#include "journal.h"
#include "log.h"
#include "metrics.h"
#include "macro.h"
#include "mount-table.h"
#include "path-util.h"
#include "reconciler.h"
#include "reconciler-internal.h"
#include "spec-source.h"
#include "volume-ops.h"

void rec_csi_journal_changed(struct reconciler *r)
{
	if (!r->csi.save_due_ms)
		r->csi.save_due_ms = now_ms() + CSI_JOURNAL_DELAY_MS;
}

/* A failed save is tried again after JOURNAL_RETRY_MIN_MS, doubling up to JOURNAL_RETRY_MAX_MS:
 * a full or failing state disk costs a rewrite now and then, not one per loop turn. */
#define JOURNAL_RETRY_MIN_MS 250
#define JOURNAL_RETRY_MAX_MS 30000

static void journal_save_failed(struct reconciler *r, const struct error_info *err, uint64_t now)
{
	struct rec_journal_health *h = &r->journal_health;
	char msg[sizeof(h->error)];

	snprintf(msg, sizeof(msg), "save failed: %s", err_msg(err));
	/* One line per change of state: the first failure, or a changed reason. */
	if (strcmp(msg, h->error) != 0)
		log_error("cannot save the journal, retrying with backoff", "path",
			  journal_path(r->journal), "error", err_msg(err));
	snprintf(h->error, sizeof(h->error), "%s", msg);
	h->failures++;
	h->retry_delay_ms = h->retry_delay_ms ? h->retry_delay_ms * 2 : JOURNAL_RETRY_MIN_MS;
	if (h->retry_delay_ms > JOURNAL_RETRY_MAX_MS)
		h->retry_delay_ms = JOURNAL_RETRY_MAX_MS;
	h->retry_ms = now + h->retry_delay_ms;
	metrics_journal_save(false);
}

static void journal_save_succeeded(struct reconciler *r)
{
	struct rec_journal_health *h = &r->journal_health;

	if (h->error[0])
		log_info("journal saved again", "path", journal_path(r->journal), "failed_saves",
			 LOG_INT(h->failures));
	h->error[0] = '\0';
	h->failures = 0;
	h->retry_delay_ms = 0;
	h->retry_ms = 0;
	r->csi.save_due_ms = 0;
	metrics_journal_save(true);
}

/* When the loop's next save is due, or UINT64_MAX: the CSI entries' batching delay, or a
 * waiting save's retry after a failure, whichever is later. */
static uint64_t journal_save_deadline(const struct reconciler *r)
{
	uint64_t due = r->csi.save_due_ms, retry = r->journal_health.retry_ms;

	if (!due && (!retry || !journal_is_dirty(r->journal)))
		return UINT64_MAX;
	return due > retry ? due : retry;
}

/* Saves the journal if a device record changed, or CSI entries changed and their save is due
 * (or force).  One save carries everything.  After a failure the next try waits for its
 * backoff, unless forced (at shutdown). */
void rec_save_journal(struct reconciler *r, bool force)
{
	struct error_info err = { 0 };
	uint64_t now = now_ms();
	bool csi_due = r->csi.save_due_ms && (force || now >= r->csi.save_due_ms);
	json_t *csi;

	if (!journal_is_dirty(r->journal) && !csi_due)
		return;
	if (!force && r->journal_health.retry_ms && now < r->journal_health.retry_ms)
		return;
	journal_mark_dirty(r->journal);
	csi = rec_requests_export_csi(r);
	if (journal_flush(r->journal, r->asw, csi, &err) < 0)
		journal_save_failed(r, &err, now);
	else
		journal_save_succeeded(r);
	json_decref(csi);
}

/* --- the mount table --- */

/* A target a mount event or a full read changed: only its part of the actual state is
 * synced. */
static void table_changed(const struct mount_table *t, const char *target, uint32_t hash,
			  void *userdata)
{
	struct reconciler *r = userdata;

	asw_sync_target(r->asw, t, target, hash);
	rec_touch_target(r, target);
}

static void state_changed(const char *target, void *userdata)
{
	rec_touch_target(userdata, target);
}

int rec_refresh_table(struct reconciler *r, struct error_info *err)
{
	/* The first read cannot say what changed since the agent last looked: all of it. */
	bool first = mount_table_generation(r->table) == 0;
	uint64_t start_us = now_us();
	int k = mount_table_refresh(r->table, NULL, first ? NULL : table_changed, r, err);

	if (k < 0)
		return k;
	r->loop.last_refresh_ms = now_ms();
	r->loop.last_refresh_cost_ms = (now_us() - start_us + 999) / 1000;
	r->loop.table_dirty = false;
	r->loop.table_reads++;
	/* Also what changed without a trace in the table: a mount an operation reported that
	 * went again before the table showed it. */
	if (first) {
		asw_sync_with_table(r->asw, r->table, NULL, r);
		rec_want_full_pass(r);
	} else {
		asw_sync_changed(r->asw, r->table, state_changed, r);
	}
	return 0;
}

/* A read of the whole table costs O(mounts) (the kernel formats every line, libmount parses
 * it).  While a burst of changes goes on, the table is read at most every
 * refresh_min_interval_ms, and not more often than leaves the reads 1/REFRESH_COST_FACTOR of
 * the loop's time: with a fixed interval, a converge of N volumes on the fallback path would
 * read a table of N lines N/rate times, O(N^2) (what made 5,000 volumes take 6.4x the time of
 * 1,000; docs/performance.md).  systemd rate-limits its mountinfo re-reads for the same
 * reason. */
#define REFRESH_COST_FACTOR 5

static uint64_t refresh_interval_ms(const struct reconciler *r)
{
	uint64_t by_cost = r->loop.last_refresh_cost_ms * REFRESH_COST_FACTOR;

	return by_cost > r->cfg.refresh_min_interval_ms ? by_cost : r->cfg.refresh_min_interval_ms;
}

/* A batch of mount events that comes within this many ms of the last one is a burst (a
 * converge, CSI calls in flight: each of our own mounts comes back as an event): the monitor's
 * fd is then not watched for this long, the kernel queues what comes meanwhile, and one read
 * applies it all, so that a burst of N mounts costs N/(rate * this) wake-ups, not N.  A change
 * made by someone else during a burst is seen within this time (the fallback re-reads the
 * table at most every refresh_min_interval_ms); a queue that overflows meanwhile is read in
 * full, as ever.  An event that comes alone is read at once. */
#define EVENT_COALESCE_MS 10

static uint64_t event_coalesce_ms(const struct reconciler *r)
{
	uint64_t ms = r->cfg.refresh_min_interval_ms;

	return ms < EVENT_COALESCE_MS ? ms : EVENT_COALESCE_MS;
}

/* Whether the loop watches fd (one of its set) for input.  Not watched means out of the set:
 * EPOLL_CTL_MOD to no events is no pause, because the kernel adds EPOLLERR | EPOLLHUP to every
 * mask it is given, and a wake-up that names no event (fanotify's, for each mount event) then
 * still wakes the thread in epoll_wait, which finds nothing to report and sleeps again: a
 * wake-up of a halted CPU for each event, the very thing a pause is for.  So the fd is removed
 * and added again; an fd with input waiting when it is added wakes the loop at once, as
 * before. */
static int watch_input(struct reconciler *r, int fd, bool on)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	if (epoll_ctl(r->loop.epoll_fd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fd, on ? &ev : NULL) ==
	    0)
		return 0;
	return errno == (on ? EEXIST : ENOENT) ? 0 : -errno; /* already so: done */
}

static int watch_monitor(struct reconciler *r, bool on)
{
	return watch_input(r, mount_monitor_get_fd(r->monitor), on);
}

/* The end of a pause: the fd is watched again, and what the kernel queued meanwhile wakes the
 * loop at once; a batch read then is still part of the burst. */
static void resume_mount_monitor(struct reconciler *r, uint64_t now)
{
	if (!r->loop.monitor_paused || now < r->loop.monitor_resume_ms)
		return;
	if (watch_monitor(r, true) < 0) {
		/* Out of memory for the fd's entry in the set: events are not followed until it
		 * can be added, so read the table as the fallback would, and try again then. */
		r->loop.table_dirty = true;
		r->loop.monitor_resume_ms = now + r->cfg.refresh_min_interval_ms;
		return;
	}
	r->loop.monitor_paused = r->loop.monitor_held = false;
	r->loop.last_event_batch_ms = now;
}

/* Operations complete one by one, and each completion that finds the reconciler asleep wakes
 * it: a converge of N volumes would cost N wake-ups, and on a virtual machine a wake-up costs
 * about what an operation does.  So while a burst goes on (operations still in flight after a
 * batch of completions was taken) and no caller waits for an answer (a CSI call, `volagent
 * status`), the executor's fd is not watched for this long: the completions queue up and one
 * wake-up takes them all.  A completion someone waits for is taken at once: a request that
 * comes during a pause ends it. */
#define COMPLETION_COALESCE_MS 1

/* How long after an operation was queued the loop may spin for its completion while a CSI
 * caller waits (executor_spin_for_done): a bind set-up takes 30-60 us on a 2-CPU VM. */
#define COMPLETION_SPIN_US 150

static void pause_completions(struct reconciler *r)
{
	if (r->loop.completions_paused || r->csi.waiting || executor_pending(r->ex) == 0)
		return;
	if (watch_input(r, executor_get_fd(r->ex), false) < 0)
		return; /* cannot happen for an fd in the set; if it does, not paused */
	r->loop.completions_paused = true;
	/* now_ms() + 1 may be a few us away: the pause lasts at least one whole ms. */
	r->loop.completions_resume_ms = now_ms() + COMPLETION_COALESCE_MS + 1;
}

static void resume_completions(struct reconciler *r, uint64_t now)
{
	if (!r->loop.completions_paused || (now < r->loop.completions_resume_ms && !r->csi.waiting))
		return;
	if (watch_input(r, executor_get_fd(r->ex), true) < 0) {
		/* Out of memory for the fd's entry: the completions are taken on each turn of the
		 * loop until it can be added. */
		rec_drain_completed(r);
		r->loop.completions_resume_ms = now + 1;
		return;
	}
	r->loop.completions_paused = false;
}

/* How long the loop may wait in epoll_wait: until a pause ends (a pause moves with every batch
 * of a burst: a wait's timeout, not the timer, which would cost a timerfd_settime each time)
 * or the executor is due for a kick (kick_ms from now), else as long as nothing happens (-1). */
static int wait_timeout(const struct reconciler *r, uint64_t kick_ms)
{
	uint64_t now = now_ms(), until = UINT64_MAX;

	if (r->loop.monitor_paused)
		until = r->loop.monitor_resume_ms;
	if (r->loop.completions_paused && r->loop.completions_resume_ms < until)
		until = r->loop.completions_resume_ms;
	if (kick_ms != UINT64_MAX && now + kick_ms < until)
		until = now + kick_ms;
	if (until == UINT64_MAX)
		return -1;
	return until > now ? (int)(until - now) : 0;
}

/* The monitor's fd is readable: events are applied as they come; libmount's monitor (and an
 * event queue that overflowed) make the table due for a full read. */
/* Reads the monitor's events into the table (see dispatch_mount_monitor).  Returns whether it
 * has an event queue (else libmount's monitor told a change: the table is due for a read). */
static bool read_mount_events(struct reconciler *r)
{
	int k = mount_monitor_dispatch(r->monitor, r->table, table_changed, r);

	if (!mount_monitor_has_events(r->monitor)) {
		if (k > 0)
			r->loop.table_dirty = true;
		return false;
	}
	r->loop.mount_event_batches++;
	if (k == MOUNT_MONITOR_UNREAD) {
		/* Mounts that went before they could be read: which targets they were on, only a
		 * full read can tell (of what the state believed), within refresh_min_interval_ms
		 * when a burst of them goes on. */
		r->loop.table_dirty = true;
	} else if (k != 0) {
		if (k > 0)
			r->loop.mount_event_overflows++;
		log_debug("reconcile", "mount events lost, reading the table again", "error",
			  k < 0 ? strerror(-k) : "queue overflow");
		r->loop.table_dirty = true;
		r->loop.last_refresh_ms = 0;
	}
	return true;
}

static void dispatch_mount_monitor(struct reconciler *r)
{
	uint64_t now;

	if (!read_mount_events(r))
		return;
	now = now_ms();
	if (now - r->loop.last_event_batch_ms < event_coalesce_ms(r) &&
	    watch_monitor(r, false) == 0) {
		r->loop.monitor_paused = true;
		r->loop.monitor_resume_ms = now + event_coalesce_ms(r);
	}
	r->loop.last_event_batch_ms = now;
}

bool rec_monitor_hold(struct reconciler *r)
{
	if (r->loop.monitor_paused || watch_monitor(r, false) < 0)
		return false;
	r->loop.monitor_paused = r->loop.monitor_held = true;
	r->loop.monitor_resume_ms = now_ms() + event_coalesce_ms(r);
	return true;
}

void rec_monitor_release(struct reconciler *r)
{
	if (!r->loop.monitor_held)
		return; /* the loop's timer ended the pause (the operation took that long) */
	(void)read_mount_events(r);
	if (watch_monitor(r, true) < 0) {
		r->loop.table_dirty = true; /* as resume_mount_monitor: the loop reads the table */
		return;
	}
	r->loop.monitor_paused = r->loop.monitor_held = false;
}

/* The loop's refresh, and the one place its failure is logged: once when the table becomes
 * unreadable and once when it is readable again, not per retry.  Meanwhile the last table
 * read stays in force and the read is retried every refresh_min_interval_ms. */
static void refresh_table_in_loop(struct reconciler *r)
{
	struct error_info err = { 0 };

	if (rec_refresh_table(r, &err) < 0) {
		r->loop.last_refresh_ms = now_ms();
		if (!r->loop.table_unreadable)
			log_error(
				"cannot read the mount table, keeping the last one read and retrying",
				"error", err_msg(&err));
		r->loop.table_unreadable = true;
		return;
	}
	if (r->loop.table_unreadable)
		log_info("the mount table is readable again");
	r->loop.table_unreadable = false;
}

/* --- the loop --- */

/* STATUS= goes out at most this often during a burst (each sd_notify is a dozen syscalls); the
 * last value of a burst goes out when the interval is over, by the loop's timer. */
#define STATUS_MIN_INTERVAL_MS 1000

void rec_arm_timer(struct reconciler *r)
{
	uint64_t now = now_ms(), next = r->loop.last_resync_ms + r->cfg.resync_ms;
	uint64_t b = backoff_next_deadline(r->backoff);
	struct itimerspec its = { 0 };

	if (b < next)
		next = b;
	if (r->cfg.health_interval_ms && r->loop.last_health_ms + r->cfg.health_interval_ms < next)
		next = r->loop.last_health_ms + r->cfg.health_interval_ms;
	if (journal_save_deadline(r) < next)
		next = journal_save_deadline(r);
	if (r->loop.monitor_held && r->loop.monitor_resume_ms < next)
		next = r->loop.monitor_resume_ms;
	if (r->loop.table_dirty) {
		uint64_t t = r->loop.last_refresh_ms + refresh_interval_ms(r);
		if (t < next)
			next = t;
	}
	if (r->status.watchdog_interval_ms &&
	    r->status.last_watchdog_ms + r->status.watchdog_interval_ms < next)
		next = r->status.last_watchdog_ms + r->status.watchdog_interval_ms;
	if (r->status.status_due && r->status.last_status_ms + STATUS_MIN_INTERVAL_MS < next)
		next = r->status.last_status_ms + STATUS_MIN_INTERVAL_MS;
	if (rec_trim_deadline(r) < next)
		next = rec_trim_deadline(r);
	if (rec_requests_next_deadline(r) < next)
		next = rec_requests_next_deadline(r);
	if (next <= now)
		next = now + 1;
	/* Armed for next already, and not expired (next > now, on the timer's clock): a loop
	 * turn that moved no deadline (most of them, in a burst of events) costs no syscall. */
	if (next == r->loop.timer_armed_ms)
		return;
	its.it_value.tv_sec = (time_t)(next / 1000);
	its.it_value.tv_nsec = (long)(next % 1000) * 1000000;
	r->loop.timer_armed_ms =
		timerfd_settime(r->loop.timer_fd, TFD_TIMER_ABSTIME, &its, NULL) == 0 ? next : 0;
}

static void notify_systemd(struct reconciler *r)
{
	uint64_t now = now_ms();
	char status[128];

	if (r->status.watchdog_interval_ms &&
	    now - r->status.last_watchdog_ms >= r->status.watchdog_interval_ms) {
		sd_notify(0, "WATCHDOG=1");
		r->status.last_watchdog_ms = now;
	}
	snprintf(status, sizeof(status), "STATUS=desired=%zu mounted=%zu failing=%u",
		 r->status.stats.desired_pod_volumes, r->status.stats.mounted_pod_volumes,
		 r->status.stats.failing);
	r->status.status_due = !streq(status, r->status.last_status);
	if (r->status.status_due && (!r->status.last_status_ms ||
				     now - r->status.last_status_ms >= STATUS_MIN_INTERVAL_MS)) {
		sd_notify(0, status);
		memcpy(r->status.last_status, status, sizeof(status));
		r->status.last_status_ms = now;
		r->status.status_due = false;
	}
}

static bool should_stop(struct reconciler *r)
{
	bool stop;

	pthread_mutex_lock(&r->status.lock);
	stop = r->loop.stop;
	pthread_mutex_unlock(&r->status.lock);
	return stop;
}

static bool take_resync_request(struct reconciler *r)
{
	bool requested;

	pthread_mutex_lock(&r->status.lock);
	requested = r->loop.resync_requested;
	r->loop.resync_requested = false;
	pthread_mutex_unlock(&r->status.lock);
	return requested;
}

/* A resync an operator asked for: the table is read and a pass run now, and both are timed. */
static void forced_resync(struct reconciler *r)
{
	struct timespec a, b, c;

	clock_gettime(CLOCK_MONOTONIC, &a);
	refresh_table_in_loop(r);
	clock_gettime(CLOCK_MONOTONIC, &b);
	rec_want_full_pass(r);
	rec_pass(r);
	clock_gettime(CLOCK_MONOTONIC, &c);
	log_info("forced resync", "table_entries", LOG_INT(mount_table_size(r->table)),
		 "desired_pod_volumes", LOG_INT(hashmap_size(dsw_pod_volumes(r->dsw))),
		 "refresh_us",
		 LOG_INT((b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000),
		 "pass_us",
		 LOG_INT((c.tv_sec - b.tv_sec) * 1000000 + (c.tv_nsec - b.tv_nsec) / 1000));
}

void rec_run_on_thread(struct reconciler *r, void (*fn)(struct reconciler *r, void *arg), void *arg)
{
	uint64_t one = 1;

	if (!r->loop.thread_started) {
		fn(r, arg);
		return;
	}
	pthread_mutex_lock(&r->csi.lock);
	r->csi.call_fn = fn;
	r->csi.call_arg = arg;
	r->csi.call_done = false;
	pthread_mutex_unlock(&r->csi.lock);
	(void)!write(r->loop.wake_fd, &one, sizeof(one));
	pthread_mutex_lock(&r->csi.lock);
	while (!r->csi.call_done)
		pthread_cond_wait(&r->csi.cond, &r->csi.lock);
	r->csi.call_fn = NULL;
	pthread_mutex_unlock(&r->csi.lock);
}

/* Makes the call rec_run_on_thread asked for, if any. */
static void run_call(struct reconciler *r)
{
	void (*fn)(struct reconciler *, void *);
	void *arg;

	pthread_mutex_lock(&r->csi.lock);
	fn = r->csi.call_done ? NULL : r->csi.call_fn;
	arg = r->csi.call_arg;
	pthread_mutex_unlock(&r->csi.lock);
	if (!fn)
		return;
	fn(r, arg);
	pthread_mutex_lock(&r->csi.lock);
	r->csi.call_done = true;
	pthread_cond_broadcast(&r->csi.cond);
	pthread_mutex_unlock(&r->csi.lock);
}

static void handle_event(struct reconciler *r, int fd)
{
	uint64_t n;

	if (r->specs && fd == spec_source_get_fd(r->specs)) {
		/* What changed was touched through the desired state's change hook. */
		(void)spec_source_dispatch(r->specs);
	} else if (fd == mount_monitor_get_fd(r->monitor)) {
		dispatch_mount_monitor(r);
	} else if (fd == executor_get_fd(r->ex)) {
		rec_drain_completed(r);
		pause_completions(r);
	} else if (fd == r->loop.timer_fd) {
		(void)!read(r->loop.timer_fd, &n, sizeof(n)); /* the loop looks at what is due */
	} else if (fd == r->loop.wake_fd) {
		(void)!read(r->loop.wake_fd, &n, sizeof(n));
		rec_requests_take_incoming(r);
		run_call(r);
	} else {
		for (size_t i = 0; i < r->cfg.n_sources; i++)
			if (fd == r->cfg.sources[i].fd)
				r->cfg.sources[i].dispatch(r->cfg.sources[i].userdata);
	}
}

static void touch_key(void *userdata, const char *key)
{
	rec_touch_key(userdata, key);
}

static void *reconciler_main(void *arg)
{
	struct reconciler *r = arg;

	(void)pthread_setname_np(pthread_self(), "reconciler"); /* top -H, perf, gdb */

	/* A turn's lines (a burst logs several per volume) go out with one write, before the
	 * loop waits; warnings and errors at once. */
	(void)log_buffer_start();
	pthread_mutex_lock(&r->state_lock);
	r->loop_running = true;
	while (!should_stop(r)) {
		struct epoll_event evs[8];
		uint64_t now = now_ms(), kick_ms;
		int n, timeout;

		if (now - r->loop.last_resync_ms >= r->cfg.resync_ms) {
			r->loop.last_resync_ms = now;
			rec_want_full_pass(r);
			r->loop.table_dirty = true;
			r->loop.last_refresh_ms = 0; /* a resync reads the table now */
		}
		if (r->cfg.health_interval_ms &&
		    now - r->loop.last_health_ms >= r->cfg.health_interval_ms) {
			r->loop.last_health_ms = now;
			r->loop.health_due = true; /* checks queued by the next pass, full or not */
		}
		/* Our own operations report their mounts; the table is re-read for changes made by
		 * others, at most every refresh_interval_ms() while a burst goes on. */
		resume_mount_monitor(r, now);
		resume_completions(r, now);
		if (take_resync_request(r))
			forced_resync(r);
		if (r->loop.table_dirty && now - r->loop.last_refresh_ms >= refresh_interval_ms(r))
			refresh_table_in_loop(r);
		/* Operations whose backoff is over are retried, and only those. */
		backoff_take_due(r->backoff, now_ms(), touch_key, r);
		if (rec_pass_pending(r))
			rec_pass(r);
		rec_requests_check_waiting(r);
		rec_save_journal(r, false);
		notify_systemd(r);
		rec_trim_after_burst(r);

		rec_arm_timer(r);
		log_flush();
		/* Jobs queued behind a slow one get a worker of their own. */
		kick_ms = executor_kick(r->ex);
		timeout = wait_timeout(r, kick_ms);
		/* A CSI caller waits for an operation just started: spin for it briefly rather
		 * than sleep and be woken (the wake-up would cost what the bind does); whatever
		 * else is ready is taken by the same wait, which then does not block. */
		if (timeout != 0 && r->csi.waiting &&
		    executor_spin_for_done(r->ex, COMPLETION_SPIN_US))
			timeout = 0;
		/* Asleep, the state is free for a CSI call to take (reconciler-caller.c). */
		pthread_mutex_unlock(&r->state_lock);
		n = epoll_wait(r->loop.epoll_fd, evs, ARRAY_SIZE(evs), timeout);
		pthread_mutex_lock(&r->state_lock);
		if (n < 0 && errno != EINTR) {
			log_error("epoll_wait failed", "error", strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++)
			handle_event(r, evs[i].data.fd);
	}
	/* From now on a call is handed to the stopping loop's queue (answered -ESHUTDOWN), not
	 * run on its own thread; one that runs its operation already is waited for below. */
	r->loop_running = false;
	/* Let operations in flight finish so the journal records what they did. */
	r->loop.completions_resume_ms = 0; /* every completion is taken as it comes */
	resume_completions(r, 0);
	while (executor_pending(r->ex) > 0 || hashmap_size(r->ops.inflight_pod) > 0 ||
	       hashmap_size(r->ops.inflight_dev) > 0) {
		/* The executor's fd alone: the loop's other inputs are no longer read, and one
		 * left readable (a mount event of an operation in flight) would make every wait
		 * return at once.  The wait ends when a kick falls due, or after 100 ms. */
		struct pollfd done = { .fd = executor_get_fd(r->ex), .events = POLLIN };
		uint64_t kick_ms;

		log_flush();
		kick_ms = executor_kick(r->ex);
		/* An operation a CSI call runs on its own thread applies its result with the
		 * lock (it is in inflight_pod or inflight_dev until then). */
		pthread_mutex_unlock(&r->state_lock);
		(void)poll(&done, 1, kick_ms < 100 ? (int)kick_ms : 100);
		pthread_mutex_lock(&r->state_lock);
		rec_drain_completed(r);
	}
	rec_drain_completed(r);
	rec_requests_abort_all(r);
	rec_save_journal(r, true);
	pthread_mutex_unlock(&r->state_lock);
	log_buffer_stop();
	return NULL;
}

static int watch_fd(struct reconciler *r, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(r->loop.epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

static int watch_sources(struct reconciler *r)
{
	for (size_t i = 0; i < r->cfg.n_sources; i++)
		if (watch_fd(r, r->cfg.sources[i].fd) < 0)
			return -errno;
	return 0;
}

/* The table of the agent's trees (its root dir; the kubelet dir when CSI is on: targets and
 * staging paths) and its source, chosen by probing the kernel once, and logged. */
static int open_mount_table(struct reconciler *r, struct error_info *err)
{
	_cleanup_free_ char *root = realpath(r->root_dir, NULL), *kubelet = NULL;
	_cleanup_free_ char *lean0 = NULL, *lean1 = NULL;
	const char *trees[2], *lean[2];
	char reason[256] = "";
	size_t n = 0;

	if (r->csi.kubelet_root)
		kubelet = realpath(r->csi.kubelet_root, NULL);
	trees[n++] = root ? root : r->root_dir;
	if (r->csi.kubelet_root)
		trees[n++] = kubelet ? kubelet : r->csi.kubelet_root;
	r->table = mount_table_new(trees, n);
	if (!r->table)
		return -ENOMEM;
	/* Pod volume dirs (and CSI publish targets): only their target, IDs and flags are used. */
	lean[0] = lean0 = strdup_printf("%s/pods", trees[0]);
	if (n > 1)
		lean[1] = lean1 = strdup_printf("%s/pods", trees[1]);
	if (!lean0 || (n > 1 && !lean1) || mount_table_set_lean(r->table, lean, n) < 0)
		return -ENOMEM;
	r->monitor = mount_monitor_new(!r->cfg.mount_events_off, reason, sizeof(reason), err);
	if (!r->monitor)
		return err->code ? err->code : -ENOMEM;
	mount_table_use_listmount(r->table, mount_monitor_has_events(r->monitor));
	asw_set_table(r->asw, r->table);
	log_info("mount table source", "source",
		 mount_monitor_has_events(r->monitor) ? "mount events" : "libmount", "reason",
		 reason);
	return 0;
}

int reconciler_new(const struct reconciler_config *cfg, struct reconciler **ret,
		   struct error_info *err)
{
	struct reconciler *r = calloc(1, sizeof(*r));
	int k;

	if (!r)
		return -ENOMEM;
	r->loop.epoll_fd = r->loop.timer_fd = r->loop.wake_fd = -1;
	pthread_mutex_init(&r->status.lock, NULL);
	pthread_mutex_init(&r->csi.lock, NULL);
	pthread_mutex_init(&r->state_lock, NULL);
	{
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* waits use CLOCK_MONOTONIC */
		pthread_cond_init(&r->csi.cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	r->csi.kubelet_root = cfg->kubelet_root ? strdup(cfg->kubelet_root) : NULL;
	r->csi.driver_name = cfg->driver_name ? strdup(cfg->driver_name) : NULL;
	r->cfg = *cfg;
	r->root_dir = strdup(cfg->root_dir);
	r->state_dir = strdup(cfg->state_dir);
	r->pods_dir = cfg->pods_dir ? strdup(cfg->pods_dir) : NULL;
	r->pods_root = strdup_printf("%s/pods", cfg->root_dir);
	r->plugins_prefix = strdup_printf("%s/plugins/kubernetes.io/", cfg->root_dir);
	r->cfg.root_dir = r->root_dir;
	r->cfg.state_dir = r->state_dir;
	r->cfg.pods_dir = r->pods_dir;
	r->cfg.kubelet_root = r->csi.kubelet_root;
	r->cfg.driver_name = r->csi.driver_name;
	r->dsw = dsw_new(cfg->root_dir);
	r->asw = asw_new(cfg->root_dir);
	r->backoff = backoff_new(cfg->backoff_initial_ms, cfg->backoff_max_ms);
	r->ops.inflight_pod = hashmap_new();
	r->ops.inflight_dev = hashmap_new();
	r->ops.busy = hashmap_new();
	r->node_vols = node_volumes_new(cfg->stale_stage_after_ms);
	r->ops.max_pod_ops = REC_MAX_POD_OPS_IN_FLIGHT;
	if (!r->root_dir || !r->state_dir || (cfg->pods_dir && !r->pods_dir) || !r->pods_root ||
	    !r->plugins_prefix || !r->dsw || !r->asw || !r->backoff || !r->ops.inflight_pod ||
	    !r->ops.inflight_dev || !r->ops.busy || !r->node_vols || rec_pass_init(r) < 0) {
		reconciler_free(r);
		return -ENOMEM;
	}
	dsw_set_change_hook(r->dsw, rec_dsw_changed, r);
	k = path_mkdir_p(r->pods_root, 0750);
	if (k < 0) {
		reconciler_free(r);
		return err_set(err, k, "root dir %s: %s", cfg->root_dir, strerror(-k));
	}
	k = open_mount_table(r, err);
	if (k < 0) {
		reconciler_free(r);
		return k;
	}
	k = journal_open(cfg->state_dir, &r->journal, err);
	if (k == 0)
		k = executor_new(cfg->workers, &r->ex, err);
	if (k == 0 && cfg->pods_dir)
		k = spec_source_new(cfg->pods_dir, cfg->insecure_pods_dir, r->dsw, &r->specs, err);
	if (k < 0) {
		reconciler_free(r);
		return k;
	}
	r->loop.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	r->loop.timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	r->loop.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->loop.epoll_fd < 0 || r->loop.timer_fd < 0 || r->loop.wake_fd < 0 ||
	    watch_fd(r, r->loop.timer_fd) < 0 || watch_fd(r, r->loop.wake_fd) < 0 ||
	    watch_fd(r, executor_get_fd(r->ex)) < 0 ||
	    watch_fd(r, mount_monitor_get_fd(r->monitor)) < 0 ||
	    (r->specs && watch_fd(r, spec_source_get_fd(r->specs)) < 0) || watch_sources(r) < 0) {
		k = -errno;
		reconciler_free(r);
		return err_set(err, k, "reconciler: cannot set up its event loop: %s",
			       strerror(-k));
	}
	*ret = r;
	return 0;
}

int reconciler_start(struct reconciler *r, struct error_info *err)
{
	uint64_t usec = 0;
	sigset_t all, old;
	int k;

	k = rec_reconstruct(r, err);
	if (k < 0)
		return k;
	if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0)
		r->status.watchdog_interval_ms = usec / 2000; /* ping twice per interval */
	r->loop.last_resync_ms = r->loop.last_health_ms = r->status.started_ms = now_ms();
	rec_want_full_pass(r);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	k = -pthread_create(&r->loop.thread, NULL, reconciler_main, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (k < 0)
		return err_set(err, k, "cannot start the reconciler thread: %s", strerror(-k));
	r->loop.thread_started = true;
	return 0;
}

void reconciler_set_on_ready(struct reconciler *r, void (*on_ready)(void *), void *userdata)
{
	r->cfg.on_ready = on_ready;
	r->cfg.on_ready_userdata = userdata;
}

void reconciler_request_resync(struct reconciler *r)
{
	uint64_t one = 1;

	pthread_mutex_lock(&r->status.lock);
	r->loop.resync_requested = true;
	pthread_mutex_unlock(&r->status.lock);
	(void)!write(r->loop.wake_fd, &one, sizeof(one));
}

void reconciler_stop(struct reconciler *r)
{
	uint64_t one = 1;

	if (!r || !r->loop.thread_started)
		return;
	pthread_mutex_lock(&r->status.lock);
	r->loop.stop = true;
	pthread_mutex_unlock(&r->status.lock);
	(void)!write(r->loop.wake_fd, &one, sizeof(one));
	pthread_join(r->loop.thread, NULL);
	r->loop.thread_started = false;
}

static void drop_job(struct executor_job *job)
{
	volume_op_free(volume_op_from_job(job));
}

struct reconciler *reconciler_free(struct reconciler *r)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	void *v;

	if (!r)
		return NULL;
	reconciler_stop(r);
	executor_free(r->ex, drop_job);
	r->ops.inflight_oldest = r->ops.inflight_newest = NULL; /* dropped with their jobs */
	spec_source_free(r->specs);
	node_volumes_free(r->node_vols);
	journal_free(r->journal);
	mount_monitor_free(r->monitor);
	mount_table_free(r->table);
	dsw_free(r->dsw);
	asw_free(r->asw);
	backoff_free(r->backoff);
	hashmap_free(r->ops.inflight_pod);
	hashmap_free(r->ops.inflight_dev);
	rec_pass_fini(r);
	rec_requests_export_fini(r);
	rec_requests_record_fini(r);
	while (r->ops.busy && hashmap_iterate(r->ops.busy, &it, &v, NULL)) {
		free(((struct vol_busy *)v)->name);
		free(v);
	}
	hashmap_free(r->ops.busy);
	if (r->loop.epoll_fd >= 0)
		close(r->loop.epoll_fd);
	if (r->loop.timer_fd >= 0)
		close(r->loop.timer_fd);
	if (r->loop.wake_fd >= 0)
		close(r->loop.wake_fd);
	pthread_mutex_destroy(&r->status.lock);
	pthread_mutex_destroy(&r->csi.lock);
	pthread_mutex_destroy(&r->state_lock);
	pthread_cond_destroy(&r->csi.cond);
	free(r->csi.kubelet_root);
	free(r->csi.driver_name);
	free(r->root_dir);
	free(r->state_dir);
	free(r->pods_dir);
	free(r->pods_root);
	free(r->plugins_prefix);
	free(r);
	return NULL;
}

bool reconciler_is_ready(struct reconciler *r)
{
	bool ready;

	pthread_mutex_lock(&r->status.lock);
	ready = r->status.ready;
	pthread_mutex_unlock(&r->status.lock);
	return ready;
}

void reconciler_get_stats(struct reconciler *r, struct reconciler_stats *ret)
{
	pthread_mutex_lock(&r->status.lock);
	*ret = r->status.stats;
	pthread_mutex_unlock(&r->status.lock);
}
