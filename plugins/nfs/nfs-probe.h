/* nfs-probe.h - does an NFS server answer?  The cheap question asked of a server that is
 * down (server-health.h) before mounts to it are let through again: the NULL procedure of
 * the NFS program over a TCP connection already made, with a deadline.  A server whose
 * process is stopped still has its connections accepted by the kernel, so the connect alone
 * does not tell; any RPC reply does (even a version mismatch: the server answered).
 *
 * Uses libtirpc.  Runs in the calling thread and never waits past the deadline.  Nothing
 * here logs. */
#pragma once

#include <stdint.h>

#include "error.h"

/* Asks the server on the connected TCP socket fd (taken: closed here).  Returns 0 when it
 * answered, -ETIMEDOUT when no reply came within timeout_ms, or -EIO (err says why). */
int nfs_probe_null(int fd, uint64_t timeout_ms, struct error_info *err);
