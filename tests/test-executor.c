/* test-executor.c - the worker pool: every job submitted comes back once; no more workers run
 * at once than the awake limit while jobs are quick; up to that many do run together; and a
 * job that blocks (a real blocking read on a pipe, as a mount of a dead NFS server would)
 * does not hold up a job queued behind it, once executor_kick() is called. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "executor.h"
#include "testlib.h"

#define WORKERS 4
#define LONG_US (3600ULL * 1000000) /* no job turns slow within a test */

struct counting_job {
	struct executor_job job;
	atomic_int *running, *max_running;
	int wait_for;	   /* > 0: spin until this many ran at once (bounded by give_up) */
	int block_fd;	   /* >= 0: read one byte from it first */
	int sleep_us;	   /* then sleep this long: a job that takes a while, but not slow */
	atomic_bool *done; /* set when it ran */
	bool gave_up;
};

static atomic_bool give_up;

static void counting_run(struct executor_job *job)
{
	struct counting_job *j = (struct counting_job *)job;
	int now = atomic_fetch_add(j->running, 1) + 1;
	int max = atomic_load(j->max_running);
	char c;

	while (now > max && !atomic_compare_exchange_weak(j->max_running, &max, now))
		;
	if (j->block_fd >= 0)
		(void)!read(j->block_fd, &c, 1);
	if (j->sleep_us)
		usleep(j->sleep_us);
	while (j->wait_for > 0 && atomic_load(j->max_running) < j->wait_for &&
	       !atomic_load(&give_up))
		usleep(100);
	j->gave_up = j->wait_for > 0 && atomic_load(j->max_running) < j->wait_for;
	if (j->done)
		atomic_store(j->done, true);
	atomic_fetch_sub(j->running, 1);
}

struct taking {
	struct executor *ex;
	size_t want, got;
};

/* Takes what completed (kicking the pool, as the reconciler's loop does); true once every job
 * came back and none is left. */
static bool all_back(void *arg)
{
	struct taking *t = arg;

	for (struct executor_job *j = executor_take_completed(t->ex); j; j = j->next)
		t->got++;
	(void)executor_kick(t->ex);
	return t->got == t->want && executor_pending(t->ex) == 0;
}

static bool all_idle(void *arg)
{
	return executor_idle(arg) == WORKERS;
}

/* A new pool whose workers all wait: a worker that has not started yet would take a queued
 * job without being woken, which is not what these tests look at. */
static struct executor *new_pool(unsigned awake_cap, uint64_t slow_us)
{
	struct executor *ex;

	assert_int_equal(executor_new(WORKERS, &ex, NULL), 0);
	executor_set_limits(ex, awake_cap, slow_us);
	assert_true(test_wait_until(all_idle, ex, 10000));
	return ex;
}

static bool take_all(struct executor *ex, size_t n)
{
	struct taking t = { .ex = ex, .want = n };

	return test_wait_until(all_back, &t, 10000);
}

/* With a limit of one awake worker and no job ever slow, 200 jobs of 200 us each, in batches,
 * run one at a time (with no limit, the workers woken for a batch would overlap), and all come
 * back. */
static void test_quick_jobs_keep_to_the_limit(void **state)
{
	static struct counting_job jobs[200];
	atomic_int running = 0, max_running = 0;
	struct executor *ex;

	ex = new_pool(1, LONG_US);
	for (size_t i = 0; i < 200; i++) {
		jobs[i] = (struct counting_job){ .job.run = counting_run,
						 .running = &running,
						 .max_running = &max_running,
						 .block_fd = -1,
						 .sleep_us = 200 };
		if (i % 10 == 0)
			executor_submit(ex, &jobs[i].job);
		else if (i % 10 == 9) {
			for (size_t k = i - 8; k < i; k++)
				jobs[k].job.next = &jobs[k + 1].job;
			jobs[i].job.next = NULL;
			executor_submit_list(ex, &jobs[i - 8].job);
		}
	}
	assert_true(take_all(ex, 200));
	assert_int_equal(atomic_load(&max_running), 1);
	executor_free(ex, NULL);
}

/* Three jobs that each wait until three run at once: with a limit of three they all get a
 * worker; with a limit of one they could not (the first would give up). */
static void test_jobs_run_together_up_to_the_limit(void **state)
{
	struct counting_job jobs[3];
	atomic_int running = 0, max_running = 0;
	struct executor *ex;

	atomic_store(&give_up, false);
	ex = new_pool(3, LONG_US);
	for (size_t i = 0; i < 3; i++) {
		jobs[i] = (struct counting_job){ .job.run = counting_run,
						 .running = &running,
						 .max_running = &max_running,
						 .wait_for = 3,
						 .block_fd = -1 };
		executor_submit(ex, &jobs[i].job);
	}
	if (!take_all(ex, 3)) {
		atomic_store(&give_up, true);
		fail_msg("three jobs did not run together with a limit of three: max %d",
			 atomic_load(&max_running));
	}
	assert_int_equal(atomic_load(&max_running), 3);
	for (size_t i = 0; i < 3; i++)
		assert_false(jobs[i].gave_up);
	executor_free(ex, NULL);
}

struct kicked {
	struct executor *ex;
	atomic_bool *done;
};

static bool ran_kicked(void *arg)
{
	struct kicked *k = arg;

	(void)executor_kick(k->ex);
	return atomic_load(k->done);
}

/* A job blocked in read(2) holds the one awake worker; a quick job queued behind it still
 * runs, while the first one blocks, once the first one is slow (1 ms here) and the owner
 * kicks.  Without the kick, nothing would wake a second worker. */
static void test_blocked_job_does_not_hold_up_the_queue(void **state)
{
	struct counting_job blocked, quick;
	atomic_int running = 0, max_running = 0;
	atomic_bool blocked_done = false, quick_done = false;
	struct executor *ex;
	int fds[2];

	assert_int_equal(pipe(fds), 0);
	ex = new_pool(1, 1000);
	blocked = (struct counting_job){ .job.run = counting_run,
					 .running = &running,
					 .max_running = &max_running,
					 .block_fd = fds[0],
					 .done = &blocked_done };
	quick = (struct counting_job){ .job.run = counting_run,
				       .running = &running,
				       .max_running = &max_running,
				       .block_fd = -1,
				       .done = &quick_done };
	executor_submit(ex, &blocked.job);
	executor_submit(ex, &quick.job);
	assert_true(test_wait_until(ran_kicked, &(struct kicked){ ex, &quick_done }, 10000));
	assert_false(atomic_load(&blocked_done)); /* the quick one did not wait for it */
	assert_int_equal(write(fds[1], "x", 1), 1);
	assert_true(take_all(ex, 2));
	assert_true(atomic_load(&blocked_done));
	executor_free(ex, NULL);
	close(fds[0]);
	close(fds[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quick_jobs_keep_to_the_limit),
		cmocka_unit_test(test_jobs_run_together_up_to_the_limit),
		cmocka_unit_test(test_blocked_job_does_not_hold_up_the_queue),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
