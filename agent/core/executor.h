/* executor.h - a fixed pool of worker threads for blocking work (mount(2), mkfs, attach, NFS).
 *
 * The reconciler embeds a struct executor_job in each operation, submits it, and later takes
 * the completed jobs back on its own thread when the executor's eventfd is readable.  Workers
 * touch nothing but the job.  Which jobs may run together is the reconciler's business.
 *
 * Only as many workers are kept awake as there are CPUs; a job that runs long (blocks) makes
 * room for another within a few ms, provided the owner calls executor_kick() when told to. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

struct executor_job {
	struct executor_job *next;
	/* Runs on a worker; may block. */
	void (*run)(struct executor_job *job);
};

struct executor;

int executor_new(unsigned workers, struct executor **ret, struct error_info *err);
/* Waits for running jobs to finish, drops queued ones (they are returned by
 * executor_take_completed before this, or leaked to the caller via drop), joins the workers. */
struct executor *executor_free(struct executor *ex, void (*drop)(struct executor_job *job));
/* Queues job.  Never blocks. */
void executor_submit(struct executor *ex, struct executor_job *job);
/* Queues the jobs linked through next from first (NULL: none), in that order, under one lock.
 * Never blocks. */
void executor_submit_list(struct executor *ex, struct executor_job *first);
/* Wakes a waiting worker for a queued job whose running peers turned slow (see executor.c).
 * Returns the ms until the next call is due (UINT64_MAX: none is, until the next submit). */
uint64_t executor_kick(struct executor *ex);
/* Tests: at most awake_cap workers kept running at once (default: the CPUs online), and how
 * long a job runs before it is slow (default 2 ms). */
void executor_set_limits(struct executor *ex, unsigned awake_cap, uint64_t slow_us);
/* An eventfd that is readable while completed jobs wait to be taken. */
int executor_get_fd(const struct executor *ex);
/* Whether a completed job waits to be taken, spinning for one while jobs are pending, until
 * max_us after the last submission (not after the call: a slow job costs one spin).  For a
 * caller that waits for a quick job: sleeping and being woken costs about what a bind mount
 * does on a virtual machine. */
bool executor_spin_for_done(struct executor *ex, uint64_t max_us);
/* Takes all completed jobs (in completion order, linked through next), or NULL. */
struct executor_job *executor_take_completed(struct executor *ex);
/* Workers waiting for a job (tests). */
unsigned executor_idle(struct executor *ex);
/* Jobs queued or running. */
size_t executor_pending(struct executor *ex);
/* How many times a waiting worker was signalled, since the start. */
uint64_t executor_wakes(struct executor *ex);
