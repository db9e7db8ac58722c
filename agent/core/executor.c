/* executor.c - see executor.h.
 *
 * Waking a sleeping worker costs a context switch on each side, and on a virtual machine that
 * is about what a bind mount costs.  So the pool keeps only as many workers awake as there are
 * CPUs (awake_cap): a job queued while that many run is taken by one of them when it finishes,
 * with no wake-up.  A worker whose job has run for SLOW_JOB_US (an NFS server that does not
 * answer, a mkfs) no longer counts: the next submit, or executor_kick() once that time is up,
 * wakes another, so a slow job holds up a queued one for about SLOW_JOB_US at most.  A burst
 * of quick jobs (a converge, CSI calls in flight) thus costs a wake-up or two, not one per job;
 * jobs that block get as many workers as there are, one more every SLOW_JOB_US.
 *
 * The other side of a hand-off is the reconciler waking for a completion.  When a caller
 * waits for a job just submitted (a CSI publish), the reconciler may spin for it a little
 * (executor_spin_for_done) instead of sleeping: at most a fixed time from the job's
 * submission, so a job that turns out slow costs that spin once, not once per loop turn. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "executor.h"
#include "macro.h"
#include "time-util.h"

#define SLOW_JOB_US 2000

struct worker {
	struct executor *ex;
	pthread_t thread;
	uint64_t started_us; /* when its job started (CLOCK_MONOTONIC); 0 while it waits */
};

struct executor {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct executor_job *queue_head, *queue_tail;
	struct executor_job *done_head, *done_tail;
	size_t queued;	    /* jobs on the queue */
	size_t pending;	    /* queued or running */
	unsigned idle;	    /* workers waiting on cond */
	unsigned woken;	    /* of those, signalled and not yet up */
	uint64_t woken_us;  /* when the last of those was signalled */
	uint64_t submit_us; /* when the last job was queued */
	uint64_t wakes;	    /* signals sent, in all */
	bool done_ready;    /* done_head is set: read without the lock by the spin */
	unsigned awake_cap;
	uint64_t slow_us;
	bool stopping;
	int event_fd;
	struct worker *workers;
	unsigned n_threads;
};

/* Under ex->lock: workers running a job that is not slow yet. */
static unsigned running_fresh(const struct executor *ex, uint64_t now)
{
	unsigned n = 0;

	for (unsigned i = 0; i < ex->n_threads; i++)
		if (ex->workers[i].started_us && now - ex->workers[i].started_us < ex->slow_us)
			n++;
	return n;
}

/* Under ex->lock: how many waiting workers to wake for the jobs on the queue, and counts them
 * as woken.  The caller signals the condition that many times, after the unlock (the worker
 * woken does not then block on ex->lock at once). */
static unsigned take_wakes(struct executor *ex)
{
	uint64_t now;
	unsigned awake, n = 0;

	if (!ex->queued)
		return 0;
	now = now_us();
	/* A worker signalled that long ago and still not up counts as slow too: the count can
	 * then never keep a queued job waiting for good, whatever happened to that signal. */
	if (ex->woken && now - ex->woken_us >= ex->slow_us)
		ex->woken = 0;
	if (ex->woken >= ex->idle)
		return 0;
	/* A worker signalled and not yet up takes a queued job when it is: only the jobs no
	 * such worker will take call for another (a pass that submits and then kicks would
	 * otherwise wake two workers for one job). */
	awake = ex->woken + running_fresh(ex, now);
	while (ex->woken + n < ex->queued && ex->woken + n < ex->idle && awake + n < ex->awake_cap)
		n++;
	if (n) {
		ex->wakes += n;
		ex->woken += n;
		ex->woken_us = now;
	}
	return n;
}

static void signal_n(struct executor *ex, unsigned n)
{
	while (n--)
		pthread_cond_signal(&ex->cond);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct executor *ex = w->ex;

	(void)pthread_setname_np(pthread_self(), "worker");

	pthread_mutex_lock(&ex->lock);
	for (;;) {
		struct executor_job *job;
		uint64_t one = 1;
		bool notify;

		while (!ex->queue_head && !ex->stopping) {
			ex->idle++;
			pthread_cond_wait(&ex->cond, &ex->lock);
			ex->idle--;
			if (ex->woken)
				ex->woken--;
		}
		if (ex->stopping)
			break;
		job = ex->queue_head;
		ex->queue_head = job->next;
		if (!ex->queue_head)
			ex->queue_tail = NULL;
		ex->queued--;
		w->started_us = now_us();
		pthread_mutex_unlock(&ex->lock);

		job->next = NULL;
		job->run(job);

		pthread_mutex_lock(&ex->lock);
		w->started_us = 0;
		notify = !ex->done_tail;
		if (ex->done_tail) {
			/* Not taken yet: the write that put the first one there wakes the
			 * reconciler for this one too (executor_take_completed takes them all). */
			ex->done_tail->next = job;
		} else {
			ex->done_head = job;
			__atomic_store_n(&ex->done_ready, true, __ATOMIC_RELEASE);
		}
		ex->done_tail = job;
		ex->pending--;
		if (notify) {
			/* Written with the lock dropped: the reconciler, woken by it, takes the
			 * lock at once (executor_take_completed) and would block on it. */
			pthread_mutex_unlock(&ex->lock);
			(void)!write(ex->event_fd, &one, sizeof(one));
			pthread_mutex_lock(&ex->lock);
		}
	}
	pthread_mutex_unlock(&ex->lock);
	return NULL;
}

int executor_new(unsigned workers, struct executor **ret, struct error_info *err)
{
	struct executor *ex = calloc(1, sizeof(*ex));
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	sigset_t all, old;
	int r = 0;

	if (!ex)
		return -ENOMEM;
	pthread_mutex_init(&ex->lock, NULL);
	pthread_cond_init(&ex->cond, NULL);
	ex->awake_cap = cpus > 1 ? (unsigned)cpus : 1;
	ex->slow_us = SLOW_JOB_US;
	ex->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ex->workers = calloc(workers, sizeof(*ex->workers));
	if (ex->event_fd < 0 || !ex->workers) {
		executor_free(ex, NULL);
		return err_set(err, -ENOMEM, "executor: cannot allocate");
	}
	/* Workers never take signals: the main thread handles them through signalfd. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (unsigned i = 0; i < workers; i++) {
		ex->workers[i].ex = ex;
		r = -pthread_create(&ex->workers[i].thread, NULL, worker_main, &ex->workers[i]);
		if (r < 0)
			break;
		ex->n_threads++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		executor_free(ex, NULL);
		return err_set(err, r, "executor: cannot start worker threads: %s", strerror(-r));
	}
	*ret = ex;
	return 0;
}

struct executor *executor_free(struct executor *ex, void (*drop)(struct executor_job *job))
{
	if (!ex)
		return NULL;
	pthread_mutex_lock(&ex->lock);
	ex->stopping = true;
	pthread_cond_broadcast(&ex->cond);
	pthread_mutex_unlock(&ex->lock);
	for (unsigned i = 0; i < ex->n_threads; i++)
		pthread_join(ex->workers[i].thread, NULL);
	for (struct executor_job *j = ex->queue_head, *n; j; j = n) {
		n = j->next;
		if (drop)
			drop(j);
	}
	for (struct executor_job *j = ex->done_head, *n; j; j = n) {
		n = j->next;
		if (drop)
			drop(j);
	}
	if (ex->event_fd >= 0)
		close(ex->event_fd);
	pthread_mutex_destroy(&ex->lock);
	pthread_cond_destroy(&ex->cond);
	free(ex->workers);
	free(ex);
	return NULL;
}

void executor_submit(struct executor *ex, struct executor_job *job)
{
	job->next = NULL;
	executor_submit_list(ex, job);
}

void executor_submit_list(struct executor *ex, struct executor_job *first)
{
	struct executor_job *last = first;
	unsigned wakes;
	size_t n = 1;

	if (!first)
		return;
	while (last->next) {
		last = last->next;
		n++;
	}
	pthread_mutex_lock(&ex->lock);
	if (ex->queue_tail)
		ex->queue_tail->next = first;
	else
		ex->queue_head = first;
	ex->queue_tail = last;
	ex->queued += n;
	ex->pending += n;
	ex->submit_us = now_us();
	wakes = take_wakes(ex);
	pthread_mutex_unlock(&ex->lock);
	signal_n(ex, wakes);
}

void executor_set_limits(struct executor *ex, unsigned awake_cap, uint64_t slow_us)
{
	pthread_mutex_lock(&ex->lock);
	ex->awake_cap = awake_cap ? awake_cap : 1;
	ex->slow_us = slow_us;
	pthread_mutex_unlock(&ex->lock);
}

uint64_t executor_kick(struct executor *ex)
{
	uint64_t now, next = UINT64_MAX;
	unsigned wakes;

	pthread_mutex_lock(&ex->lock);
	wakes = take_wakes(ex);
	if (ex->queued && ex->idle > 0) {
		/* Jobs wait while workers are idle: the first running job, or signal, to turn
		 * slow. */
		now = now_us();
		if (ex->woken && ex->woken_us + ex->slow_us > now)
			next = ex->woken_us + ex->slow_us;
		for (unsigned i = 0; i < ex->n_threads; i++) {
			uint64_t at = ex->workers[i].started_us + ex->slow_us;

			if (ex->workers[i].started_us && at > now && at < next)
				next = at;
		}
		if (next != UINT64_MAX)
			next = (next - now + 999) / 1000; /* in ms from now, rounded up */
	}
	pthread_mutex_unlock(&ex->lock);
	signal_n(ex, wakes);
	return next;
}

int executor_get_fd(const struct executor *ex)
{
	return ex->event_fd;
}

struct executor_job *executor_take_completed(struct executor *ex)
{
	struct executor_job *list;
	uint64_t n;

	(void)!read(ex->event_fd, &n, sizeof(n));
	pthread_mutex_lock(&ex->lock);
	list = ex->done_head;
	ex->done_head = ex->done_tail = NULL;
	__atomic_store_n(&ex->done_ready, false, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&ex->lock);
	return list;
}

/* A counter of ex read under its lock, as its own type. */
#define READ_LOCKED(ex, field)                     \
	({                                         \
		__typeof__((ex)->field) _v;        \
		pthread_mutex_lock(&(ex)->lock);   \
		_v = (ex)->field;                  \
		pthread_mutex_unlock(&(ex)->lock); \
		_v;                                \
	})

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

bool executor_spin_for_done(struct executor *ex, uint64_t max_us)
{
	uint64_t until, submit_us;
	size_t pending;

	pthread_mutex_lock(&ex->lock);
	submit_us = ex->submit_us;
	pending = ex->pending;
	pthread_mutex_unlock(&ex->lock);
	until = submit_us + max_us;
	if (!pending)
		return __atomic_load_n(&ex->done_ready, __ATOMIC_ACQUIRE);
	while (!__atomic_load_n(&ex->done_ready, __ATOMIC_ACQUIRE)) {
		if (now_us() >= until)
			return false;
		for (int i = 0; i < 64; i++)
			cpu_relax();
	}
	return true;
}

unsigned executor_idle(struct executor *ex)
{
	return READ_LOCKED(ex, idle);
}

size_t executor_pending(struct executor *ex)
{
	return READ_LOCKED(ex, pending);
}

uint64_t executor_wakes(struct executor *ex)
{
	return READ_LOCKED(ex, wakes);
}
