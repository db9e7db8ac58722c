/* quota.h - a size for a directory: XFS and ext4 project quotas through the kernel's own
 * interface (FS_IOC_FSGETXATTR/FS_IOC_FSSETXATTR for the directory's project ID and inherit
 * flag, quotactl_fd(2) with the Q_X* commands for the limit and the usage), never by running
 * xfs_quota or setquota.
 *
 * The Q_X* commands are XFS's; the kernel's generic quota layer answers them for ext4 too
 * (Q_XGETQSTATV, Q_XGETQUOTA, Q_XSETQLIM on PRJQUOTA), so one code path serves both.
 *
 * Project IDs: volagent takes IDs from its own range, QUOTA_PRJ_ID_MIN..QUOTA_PRJ_ID_MAX (above
 * what /etc/projid files hand out by hand), starting from a hash of the volume's key and
 * stepping past every ID the filesystem already accounts for (any usage or any limit).  The ID
 * is kept on the directory's inode itself, so a restarted agent, or one whose journal was
 * lost, finds the same ID there and never hands it to another volume. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

#define QUOTA_PRJ_ID_MIN 0x40000000u
#define QUOTA_PRJ_ID_MAX 0x7ffffffeu

struct quota_usage {
	uint32_t project_id;
	uint64_t bytes_limit; /* 0: none */
	uint64_t bytes_used;
	uint64_t inodes_limit; /* 0: none */
	uint64_t inodes_used;
};

/* Whether a filesystem of statfs type f_type can have project quotas at all (xfs, ext4): the
 * only ones where asking is worth an open (and never a network filesystem, which may hang). */
bool quota_fs_type_has_projects(long f_type);

/* Whether the filesystem holding fd accounts and enforces project quotas.  Returns 0, or
 * -EOPNOTSUPP with a message naming the filesystem (its type, path and device) and what to
 * enable on it. */
int quota_prj_check_enforced(int fd, const char *path, struct error_info *err);

/* Gives the directory dir_fd (at path, for messages) a limit of bytes: a project ID of
 * volagent's range (the one it already has, or a free one derived from key) with the inherit
 * flag, and that ID's block hard limit.  A directory that carries a project ID outside
 * volagent's range (someone else's project) is refused with -EBUSY.  Serialized within the
 * process, so two volumes set up at once never pick the same ID.  Idempotent.  Stores the ID
 * in *ret_id when ret_id is not NULL.  Returns 0 or -errno with err set. */
int quota_prj_set_size(int dir_fd, const char *path, const char *key, uint64_t bytes,
		       uint32_t *ret_id, struct error_info *err);

/* Undoes quota_prj_set_size on dir_fd: the ID's limit is lifted and the directory no longer
 * hands the ID to new files.  Nothing to do (0) when the directory has no ID of volagent's
 * range or the filesystem has no quotas.  Returns 0 or -errno with err set. */
int quota_prj_clear_size(int dir_fd, const char *path, struct error_info *err);

/* The limit and usage of the project of the directory at fd, when it has a project ID of
 * volagent's range with a block limit.  Returns 1 and fills *ret, 0 when the directory has no
 * such limit (or the filesystem no quotas), -errno when it cannot be read. */
int quota_prj_dir_usage(int fd, struct quota_usage *ret);

/* quota_prj_dir_usage() of the directory at path (opened without following a final link). */
int quota_prj_dir_usage_at(const char *path, struct quota_usage *ret);
