/* test-executor.c - the worker pool: every job submitted comes back once; no more workers run
 * at once than the awake limit while jobs are quick; up to that many do run together; and a
 * job that blocks (a real blocking read on a pipe, as a mount of a dead NFS server would)
 * does not hold up a job queued behind it, once executor_kick() is called; and a job costs one
 * wake-up, also when the pool is kicked right after the submit.
 *
 * Jobs and counters live in the test's fixture, not on its stack: when an assertion fails, the
 * teardown lets every job end (give_up, a byte on the pipe) and joins the workers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
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

struct fixture {
	struct executor *ex;
	int fds[2]; /* a blocked job reads fds[0] */
	atomic_int running, max_running;
	atomic_bool done[2];
	struct counting_job jobs[200];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || pipe(f->fds) < 0) {
		free(f);
		return -1;
	}
	atomic_store(&give_up, false);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	atomic_store(&give_up, true);
	(void)!write(f->fds[1], "x", 1); /* a job still blocked returns */
	executor_free(f->ex, NULL);
	close(f->fds[0]);
	close(f->fds[1]);
	free(f);
	return 0;
}

/* A counting job of f's, with no wait, block or sleep unless the caller sets one. */
static struct counting_job *job_at(struct fixture *f, size_t i)
{
	f->jobs[i] = (struct counting_job){ .job.run = counting_run,
					    .running = &f->running,
					    .max_running = &f->max_running,
					    .block_fd = -1 };
	return &f->jobs[i];
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

/* f's pool, its workers all waiting: a worker that has not started yet would take a queued job
 * without being woken, which is not what these tests look at. */
static struct executor *new_pool(struct fixture *f, unsigned awake_cap, uint64_t slow_us)
{
	assert_int_equal(executor_new(WORKERS, &f->ex, NULL), 0);
	executor_set_limits(f->ex, awake_cap, slow_us);
	assert_true(test_wait_until(all_idle, f->ex, 10000));
	return f->ex;
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
	struct fixture *f = *state;
	struct executor *ex = new_pool(f, 1, LONG_US);

	for (size_t i = 0; i < 200; i++) {
		job_at(f, i)->sleep_us = 200;
		if (i % 10 == 0)
			executor_submit(ex, &f->jobs[i].job);
		else if (i % 10 == 9) {
			for (size_t k = i - 8; k < i; k++)
				f->jobs[k].job.next = &f->jobs[k + 1].job;
			f->jobs[i].job.next = NULL;
			executor_submit_list(ex, &f->jobs[i - 8].job);
		}
	}
	assert_true(take_all(ex, 200));
	assert_int_equal(atomic_load(&f->max_running), 1);
}

/* Three jobs that each wait until three run at once: with a limit of three they all get a
 * worker; with a limit of one they could not (the first would give up). */
static void test_jobs_run_together_up_to_the_limit(void **state)
{
	struct fixture *f = *state;
	struct executor *ex = new_pool(f, 3, LONG_US);

	for (size_t i = 0; i < 3; i++) {
		job_at(f, i)->wait_for = 3;
		executor_submit(ex, &f->jobs[i].job);
	}
	if (!take_all(ex, 3))
		fail_msg("three jobs did not run together with a limit of three: max %d",
			 atomic_load(&f->max_running));
	assert_int_equal(atomic_load(&f->max_running), 3);
	for (size_t i = 0; i < 3; i++)
		assert_false(f->jobs[i].gave_up);
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
	struct fixture *f = *state;
	struct executor *ex = new_pool(f, 1, 1000);
	struct counting_job *blocked = job_at(f, 0), *quick = job_at(f, 1);

	blocked->block_fd = f->fds[0];
	blocked->done = &f->done[0];
	quick->done = &f->done[1];
	executor_submit(ex, &blocked->job);
	executor_submit(ex, &quick->job);
	assert_true(test_wait_until(ran_kicked, &(struct kicked){ ex, &f->done[1] }, 10000));
	assert_false(atomic_load(&f->done[0])); /* the quick one did not wait for it */
	assert_int_equal(write(f->fds[1], "x", 1), 1);
	assert_true(take_all(ex, 2));
	assert_true(atomic_load(&f->done[0]));
}

/* One job at a time, each submitted and then kicked at once, as the reconciler's loop kicks
 * after every pass: each job costs one wake-up.  A worker signalled and not up yet takes the
 * job when it is up; signalling a second one for it is a context switch for nothing (a kick
 * used to do that whenever it came before the first worker took the lock). */
static void test_one_wake_per_job(void **state)
{
	struct fixture *f = *state;
	struct executor *ex = new_pool(f, 2, LONG_US);
	const size_t rounds = 100;

	for (size_t i = 0; i < rounds; i++) {
		executor_submit(ex, &job_at(f, i)->job);
		(void)executor_kick(ex);
		assert_true(take_all(ex, 1));
		assert_true(test_wait_until(all_idle, ex, 10000));
	}
	assert_int_equal(executor_wakes(ex), rounds);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_quick_jobs_keep_to_the_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_jobs_run_together_up_to_the_limit, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_blocked_job_does_not_hold_up_the_queue, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_one_wake_per_job, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
