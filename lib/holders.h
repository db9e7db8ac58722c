/* holders.h - who holds a mount: the processes with their cwd, root, an open file or a
 * mapping on it (PID, command, and the pod when the cgroup tells it), and the mounts stacked
 * on or below it or other mounts of its device.  Said when an unmount fails with EBUSY, and
 * by `volagent status --holders`.
 *
 * Found by reading /proc, never by exec'ing fuser or lsof, and without touching the
 * filesystem of the mount (it may be a dead NFS mount): open files are matched by the mount
 * ID the kernel gives in /proc/PID/fdinfo, mappings by the device number and path in
 * /proc/PID/maps, cwd and root by the path their link reads as (for processes of this mount
 * namespace); paths are only ever read as links (readlink), never stat'ed or opened.  The
 * scan runs in a child process with a deadline, so that a /proc file that blocks (a process
 * whose memory map is locked by a fault on a dead server) delays the answer, never the
 * caller, by more than the deadline; what is read per process is bounded too.
 *
 * Nothing here logs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

#define HOLDERS_MAX_PROCS 8
#define HOLDERS_MAX_MOUNTS 4

struct holder_proc {
	pid_t pid;
	char comm[17];
	char pod[40]; /* the pod's uid, from the cgroup path; "" when it cannot be told */
	/* "cwd .; fd 3 ./f; mmap ./m", as many as fit; "." is the target, paths elsewhere are
	 * whole */
	char uses[240];
};

struct holders {
	unsigned n_procs, n_mounts;
	bool more_procs;  /* more than HOLDERS_MAX_PROCS were found */
	bool more_mounts; /* more than HOLDERS_MAX_MOUNTS */
	bool incomplete;  /* the scan stopped at its deadline before the last process */
	struct holder_proc procs[HOLDERS_MAX_PROCS];
	/* "<source> on <path> (stacked on it | mounted below it | the same device)" */
	char mounts[HOLDERS_MAX_MOUNTS][200];
};

/* Finds who holds the mount at target (an absolute path as the mount table has it; the
 * topmost mount there; NULL: none).  device (NULL: none) is a device node that is held too
 * when a process has it open or another mount has it as its source.  Gives up after timeout_ms.  Returns 0 (ret filled; nothing found is n_procs
 * == n_mounts == 0), -ENOENT when nothing is mounted at target and no device was given,
 * -ETIMEDOUT, or another -errno with err set. */
int holders_find(const char *target, const char *device, uint64_t timeout_ms, struct holders *ret,
		 struct error_info *err);
/* What h says, on one line, paths below the target as "./...": "pid 1234 (sleep, pod
 * 0c9d...): cwd .; fd 3 ./f, mount tmpfs on ./sub (mounted below it)", or "" when it found
 * nothing.  Returns buf. */
char *holders_format(const struct holders *h, char *buf, size_t size);
/* For a failed unmount, unmap or detach: appends "; held by: ..." (or "; no holder found") to
 * err's message, looking for at most timeout_ms.  Returns err's code. */
int holders_explain(const char *target, const char *device, uint64_t timeout_ms,
		    struct error_info *err);
