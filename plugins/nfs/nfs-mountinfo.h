/* nfs-mountinfo.h - what is mounted at a path, read from /proc/self/mountinfo through
 * libmount, never by touching the path: a stat() of a mount whose NFS server is dead hangs.
 * Paths are made canonical the same way, resolving the parent (a local directory) and never
 * the last component (which may be the NFS mount). */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "nfs-spec.h"
#include "plugin.h"

/* The topmost mount at a path, as far as the nfs plugin asks. */
struct nfs_mount_entry {
	char source[NFS_SOURCE_MAX];
	char fstype[32];
	char root[PATH_MAX];
	dev_t devno;
	bool ro;
};

/* Looks up the topmost mount at path (canonical).  Returns 1 (found, ret filled; ret may be
 * NULL), 0 when nothing is mounted there, or -errno. */
int nfs_mountinfo_lookup(const char *path, struct nfs_mount_entry *ret);

/* path with its parent resolved, as mountinfo shows it.  Returns 0 or -errno (-ENOENT: the
 * parent does not exist). */
int nfs_canonical_path(const char *path, char *ret, size_t size);

/* The canonical path of t's name in its parent directory. */
int nfs_canonical_target(const struct mount_target *t, char *ret, size_t size);

/* Whether fstype is the kernel NFS client's ("nfs", "nfs4"). */
bool nfs_is_nfs_type(const char *fstype);
