/* process.h - the one way the agent runs something in a child process: a helper program
 * (mkfs, resize2fs, rbd map, ...) or a function (a mount or statfs that may hang on a dead
 * server), killable, with a deadline, its output captured.
 *
 * Each child leads its own process group, so a timeout stops whatever it started too: the
 * group gets SIGTERM, then SIGKILL after a grace period (at once for function children: a
 * mount stuck in the kernel only answers SIGKILL).  A child that does not die even then (a
 * task in uninterruptible sleep) is handed to a detached reaper thread; at most
 * PROCESS_MAX_STUCK such children may be pending, and past that process_start refuses with
 * -EAGAIN, so a dead server cannot pile up processes without bound.
 *
 * A program may leave a daemon behind that keeps our output pipe open (rbd-nbd does): the
 * run ends when the direct child exits, with whatever it printed until then.
 *
 * Nothing here logs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

#define PROCESS_MAX_STUCK 64
#define PROCESS_KILL_GRACE_MS 2000 /* SIGTERM to SIGKILL, unless the options say */
#define PROCESS_OUTPUT_MAX 4096	   /* output kept, unless the options say */

/* The function run in a child: returns 0 or -errno, may fill err and, when the caller gave
 * one, the result buffer (the child's copy: it is sent back to the parent).  It may use
 * libmount and malloc (glibc makes them safe after fork) but must not log or take locks
 * that another agent thread may hold. */
typedef int (*process_fn)(void *arg, void *result, struct error_info *err);

struct process_options {
	uint64_t timeout_ms;	/* 0: no deadline */
	uint64_t kill_grace_ms; /* SIGTERM to SIGKILL; 0: PROCESS_KILL_GRACE_MS */
	bool kill_at_once;	/* SIGKILL without a SIGTERM first */
	const char *stdin_data; /* written to its stdin; NULL: stdin is /dev/null */
	size_t stdin_len;
	size_t output_max; /* bytes of output kept; 0: PROCESS_OUTPUT_MAX */
	char *const *envp; /* programs only; NULL: process_helper_env */
};

struct process {
	pid_t pid;
	struct process_options opts;
	int pidfd;     /* readable once the child exited; -1 when unsupported */
	int output_fd; /* its stdout + stderr */
	int status_fd; /* exec errno, or a function's error_info + result */
	int stdin_fd;
	size_t stdin_off;
	bool exited;
	bool done;
	int wait_status; /* as waitpid gives it, once exited */
	int exec_errno;	 /* programs: why exec failed, 0 when it did not */
	bool is_fn;
	bool has_result;	  /* functions: the child sent its outcome */
	struct error_info result; /* functions: fn's return in result.code */
	void *result_data;	  /* functions: where the result buffer goes, or NULL */
	size_t result_size;
	size_t status_got;
	char *status_buf;
	char *output; /* NUL-terminated, output_max bytes at most */
	size_t output_len;
	bool output_truncated;
};

/* The environment helpers run with unless the options give one: the system dirs as PATH and
 * LC_ALL=C, nothing of the agent's own (no CEPH_ARGS, LD_PRELOAD, proxy or locale of the
 * caller's). */
extern char *const process_helper_env[];

/* The absolute path of the helper program name into ret (PATH_MAX bytes): looked up in the
 * system dirs (/usr/local/sbin, /usr/local/bin, /usr/sbin, /usr/bin, /sbin, /bin), never in
 * $PATH, once, and kept for later calls; a name with a '/' is taken as it is.  Returns 0,
 * -ENOENT or -EACCES. */
int process_find_helper(const char *name, char *ret);

/* Starts argv (argv[0] found by process_find_helper, before the fork) in a child, with
 * process_helper_env unless opts has envp, and every inherited fd but 0-2 closed at exec
 * (close_range CLOSE_RANGE_CLOEXEC).  opts may be NULL (no deadline, defaults).  Returns 0, -ENOENT when the program is not found, -EAGAIN
 * when too many children are stuck, or another -errno; err names what failed. */
int process_start(struct process *p, const char *const argv[], const struct process_options *opts,
		  struct error_info *err);

/* Starts fn(arg, result) in a forked child.  result (may be NULL) of result_size bytes
 * receives the child's copy when it finishes; it must stay valid until the process is done. */
int process_start_fn(struct process *p, process_fn fn, void *arg, void *result, size_t result_size,
		     const struct process_options *opts, struct error_info *err);

/* Waits up to timeout_ms (0: do not wait) for the child to exit, collecting its output.
 * Returns 1 when it has exited and is reaped (p->done), 0 when it is still running. */
int process_wait(struct process *p, uint64_t timeout_ms);

/* Stops a child that is still running: its process group gets SIGTERM, SIGKILL after the
 * grace period (or at once), and it is reaped, or handed to a reaper thread when it does not
 * die within a moment.  No-op once done.  Either way p is done afterwards. */
void process_stop(struct process *p);

/* Stops the child if it still runs and frees what p holds.  Accepts a zeroed p. */
void process_done(struct process *p);

/* How a finished program ended: its exit status (0..255), 128 + N when killed by signal N,
 * or -ENOENT/-EACCES/... when it could not be executed at all. */
int process_exit_code(const struct process *p);

/* Runs argv to completion: starts it, waits for the deadline, stops it when it runs past
 * it.  What it printed goes to out (outlen bytes, always terminated; may be NULL), up to
 * the deadline when it timed out.  Returns the exit code as process_exit_code gives it,
 * -ETIMEDOUT when it ran past the deadline (it and its group are stopped), or -errno when it
 * could not be started (-ENOENT: no such program). */
int process_run(const char *const argv[], const struct process_options *opts, char *out,
		size_t outlen);

/* Runs fn(arg, result) in a child to completion, as process_run does.  Returns fn's result
 * (err filled from the child), -ETIMEDOUT (err not filled: the caller knows what it waited
 * for), -EIO when the child died without a result, or -errno when it could not start. */
int process_run_fn(process_fn fn, void *arg, void *result, size_t result_size,
		   const struct process_options *opts, struct error_info *err, char *out,
		   size_t outlen);

/* How many stopped children are still waited for by reaper threads (tests, limits). */
unsigned process_stuck_count(void);
