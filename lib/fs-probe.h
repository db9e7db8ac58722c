/* fs-probe.h - statfs and "is it a mount point" of a path, with a time limit.
 *
 * On a dead NFS server (or a dead FUSE daemon) statfs can hang for minutes.  The probe runs in
 * a detached thread; the caller stops waiting after timeout_ms and gets -ETIMEDOUT.  A thread
 * that is stuck in the kernel cannot be cancelled: it finishes (and frees its state) whenever
 * the kernel lets it, and at most FS_PROBE_MAX_STUCK of them may be stuck at once (-EAGAIN
 * past that, so a dead server cannot exhaust the process). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define FS_PROBE_MAX_STUCK 16

struct fs_probe_result {
	int error;		/* 0, or the -errno of statfs */
	bool mount_root;	/* path is the root of a mount */
	uint64_t bytes_total, bytes_available, bytes_used;
	uint64_t inodes_total, inodes_available, inodes_used;
	long fs_type;		/* statfs f_type */
	dev_t dev;		/* st_dev of path */
};

/* Returns 0 with ret filled (ret->error may still say statfs failed: -ENOTCONN, -ESTALE,
 * -EIO...), -ETIMEDOUT, -EAGAIN (too many stuck probes) or -ENOMEM. */
int fs_probe(const char *path, int timeout_ms, struct fs_probe_result *ret);
