/* server-thread.c - see server-thread.h. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "server-thread.h"

int server_thread_open(struct server_thread *t, int flags)
{
	t->stop_fd = eventfd(0, EFD_CLOEXEC | flags);
	if (t->stop_fd < 0)
		return -errno;
	t->open = true;
	return 0;
}

int server_thread_start(struct server_thread *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int k;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	k = -pthread_create(&t->thread, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (k < 0)
		return k;
	t->started = true;
	return 0;
}

void server_thread_stop(struct server_thread *t)
{
	uint64_t one = 1;

	if (!t->started)
		return;
	(void)!write(t->stop_fd, &one, sizeof(one));
	pthread_join(t->thread, NULL);
	t->started = false;
}

void server_thread_close(struct server_thread *t)
{
	server_thread_stop(t);
	if (t->open)
		close(t->stop_fd);
	t->open = false;
}
