/* server-thread.h - a thread that serves a socket until it is told to stop, told through an
 * eventfd its loop watches (poll, or a libevent event): no signal, no cancellation, no lock
 * shared with the loop.  The admin socket and the metrics server run on one each. */
#pragma once

#include <pthread.h>
#include <stdbool.h>

/* All zero (calloc) is a valid state: not open, not started. */
struct server_thread {
	int stop_fd; /* readable once a stop is asked; the loop watches it */
	bool open;   /* stop_fd is ours */
	pthread_t thread;
	bool started;
};

/* Makes the stop eventfd (CLOEXEC, plus flags: 0 or EFD_NONBLOCK).  Returns 0 or -errno. */
int server_thread_open(struct server_thread *t, int flags);

/* Starts fn(arg) on a thread that blocks every signal (the agent's main thread takes them).
 * Returns 0 or -errno. */
int server_thread_start(struct server_thread *t, void *(*fn)(void *), void *arg);

/* Asks a started thread to stop and waits for it to end; nothing when it was not started. */
void server_thread_stop(struct server_thread *t);

/* server_thread_stop(), then closes the stop eventfd. */
void server_thread_close(struct server_thread *t);
