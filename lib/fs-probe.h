/* fs-probe.h - statfs and "is it a mount point" of a path, with a time limit.
 *
 * On a dead NFS server (or a dead FUSE daemon) statfs can hang for minutes.  The probe runs in
 * a child process through the agent's process runner (process.h); the caller stops waiting
 * after timeout_ms and gets -ETIMEDOUT, and the child is killed (the kernel's NFS and FUSE
 * waits are killable, which a thread's are not).  One that does not die at once is left to
 * the runner's reaper, and at most PROCESS_MAX_STUCK of them may be pending (-EAGAIN past
 * that, so a dead server cannot exhaust the node). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "process.h"

#define FS_PROBE_MAX_STUCK PROCESS_MAX_STUCK

struct fs_probe_result {
	int error;	 /* 0, or the -errno of statfs */
	bool mount_root; /* path is the root of a mount */
	uint64_t bytes_total, bytes_available, bytes_used;
	uint64_t inodes_total, inodes_available, inodes_used;
	long fs_type; /* statfs f_type */
	dev_t dev;    /* st_dev of path */
};

/* Returns 0 with ret filled (ret->error may still say statfs failed: -ENOTCONN, -ESTALE,
 * -EIO...), -ETIMEDOUT, -EAGAIN (too many stuck probes), -EIO (the child died) or -ENOMEM. */
int fs_probe(const char *path, int timeout_ms, struct fs_probe_result *ret);
