/* executor.c - see executor.h. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "executor.h"
#include "macro.h"

struct executor {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct executor_job *queue_head, *queue_tail;
	struct executor_job *done_head, *done_tail;
	size_t pending;
	bool stopping;
	int event_fd;
	pthread_t *threads;
	unsigned n_threads;
};

static void *worker_main(void *arg)
{
	struct executor *ex = arg;

	(void)pthread_setname_np(pthread_self(), "worker");

	pthread_mutex_lock(&ex->lock);
	for (;;) {
		struct executor_job *job;
		uint64_t one = 1;

		while (!ex->queue_head && !ex->stopping)
			pthread_cond_wait(&ex->cond, &ex->lock);
		if (ex->stopping)
			break;
		job = ex->queue_head;
		ex->queue_head = job->next;
		if (!ex->queue_head)
			ex->queue_tail = NULL;
		pthread_mutex_unlock(&ex->lock);

		job->next = NULL;
		job->run(job);

		pthread_mutex_lock(&ex->lock);
		if (ex->done_tail) {
			/* Not taken yet: the write that put the first one there wakes the
			 * reconciler for this one too (executor_take_completed takes them all). */
			ex->done_tail->next = job;
		} else {
			ex->done_head = job;
			(void)!write(ex->event_fd, &one, sizeof(one));
		}
		ex->done_tail = job;
		ex->pending--;
	}
	pthread_mutex_unlock(&ex->lock);
	return NULL;
}

int executor_new(unsigned workers, struct executor **ret, struct error_info *err)
{
	struct executor *ex = calloc(1, sizeof(*ex));
	sigset_t all, old;
	int r = 0;

	if (!ex)
		return -ENOMEM;
	pthread_mutex_init(&ex->lock, NULL);
	pthread_cond_init(&ex->cond, NULL);
	ex->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ex->threads = calloc(workers, sizeof(pthread_t));
	if (ex->event_fd < 0 || !ex->threads) {
		executor_free(ex, NULL);
		return err_set(err, -ENOMEM, "executor: cannot allocate");
	}
	/* Workers never take signals: the main thread handles them through signalfd. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (unsigned i = 0; i < workers; i++) {
		r = -pthread_create(&ex->threads[i], NULL, worker_main, ex);
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
		pthread_join(ex->threads[i], NULL);
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
	free(ex->threads);
	free(ex);
	return NULL;
}

void executor_submit(struct executor *ex, struct executor_job *job)
{
	job->next = NULL;
	pthread_mutex_lock(&ex->lock);
	if (ex->queue_tail)
		ex->queue_tail->next = job;
	else
		ex->queue_head = job;
	ex->queue_tail = job;
	ex->pending++;
	pthread_mutex_unlock(&ex->lock);
	/* After the unlock: the worker woken does not block on ex->lock at once. */
	pthread_cond_signal(&ex->cond);
}

void executor_submit_list(struct executor *ex, struct executor_job *first)
{
	struct executor_job *last = first;
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
	ex->pending += n;
	pthread_mutex_unlock(&ex->lock);
	/* One wake-up per job up to one per worker: a pass's many jobs are not one lock round
	 * and one wake-up each. */
	for (size_t i = 0; i < n && i < ex->n_threads; i++)
		pthread_cond_signal(&ex->cond);
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
	pthread_mutex_unlock(&ex->lock);
	return list;
}

size_t executor_pending(struct executor *ex)
{
	size_t n;

	pthread_mutex_lock(&ex->lock);
	n = ex->pending;
	pthread_mutex_unlock(&ex->lock);
	return n;
}
