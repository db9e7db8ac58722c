/* nfs-child.h - runs one blocking filesystem call (mount, umount2, statfs) in a forked child
 * with a deadline, so that a dead NFS server stalls a child process, never an agent thread.
 * A thin user of the agent's one process runner (lib/process.h), which forks, captures, kills
 * and reaps; this adds what the nfs plugin wants of it: a fixed-size copy of the output and
 * of the outcome that outlives the run.
 *
 * Why a process and not a thread: a thread stuck in the kernel on a hard NFS mount can never
 * be stopped, while a process can be killed (the NFS client waits in TASK_KILLABLE), and
 * mount.nfs, which libmount runs for type nfs, is killed with it (the child leads its own
 * process group; it gets SIGKILL at once, as nothing in it handles SIGTERM usefully).  The
 * child's stdout and stderr, and so those of mount.nfs, are captured: mount.nfs says on
 * stderr why a mount failed ("access denied by server").
 *
 * A child that does not die at once after SIGKILL (a task in uninterruptible sleep) is left
 * to the runner's reaper; past PROCESS_MAX_STUCK of them nfs_child_start refuses with
 * -EAGAIN, so a node whose NFS server is gone cannot pile up processes without bound.
 *
 * The child is single-threaded; it runs fn and _exits.  fn may use libmount and malloc
 * (glibc makes them safe after fork) but must not log or take agent locks. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

#include "process.h"

#define NFS_CHILD_MAX_STUCK PROCESS_MAX_STUCK

/* The function run in the child: returns 0 or -errno and may fill err. */
typedef int (*nfs_child_fn)(void *arg, struct error_info *err);

struct nfs_child {
	struct process proc;
	nfs_child_fn fn; /* what the child runs, on arg */
	void *arg;
	bool done;
	struct error_info result; /* valid once done */
	char output[1024];	  /* what it printed, truncated */
	size_t output_len;
};

/* Forks a child that runs fn(arg).  Returns 0 or -errno (-EAGAIN: too many stuck). */
int nfs_child_start(struct nfs_child *c, nfs_child_fn fn, void *arg, struct error_info *err);

/* Waits up to timeout_ms for the child to finish.  Returns 1 when it finished (c->result
 * holds its outcome and the child is reaped), 0 when it is still running. */
int nfs_child_wait(struct nfs_child *c, uint64_t timeout_ms);

/* Kills a child that is still running (its whole process group) and reaps it, or leaves the
 * reaping to a reaper thread when it does not die within a moment.  No-op once done. */
void nfs_child_abandon(struct nfs_child *c);

/* Starts fn, waits up to timeout_ms, abandons it if it is not done.  Returns fn's result
 * (err filled from the child, output in c->output), or -ETIMEDOUT (err not filled: the
 * caller knows what it waited for). */
int nfs_child_run(struct nfs_child *c, nfs_child_fn fn, void *arg, uint64_t timeout_ms,
		  struct error_info *err);

/* How many abandoned children are still waited for by reaper threads (for tests). */
unsigned nfs_child_stuck_count(void);
