/* quota.c - project quotas for directory sizes (see quota.h): the directory's project ID and
 * inherit flag through FS_IOC_FSGETXATTR/FS_IOC_FSSETXATTR, the limit and usage through
 * quotactl_fd(2) with the Q_X* commands, which XFS implements and the generic quota layer
 * (ext4) answers as well. */
#include <errno.h>
#include <fcntl.h>
#include <linux/dqblk_xfs.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/quota.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "macro.h"
#include "quota.h"

#ifndef SYS_quotactl_fd
#define SYS_quotactl_fd 443
#endif
#ifndef PRJQUOTA
#define PRJQUOTA 2
#endif

/* How many IDs past the hashed one are looked at before giving up: each in use is another
 * volume's (or someone's) project on this filesystem. */
#define PROBE_MAX 4096

/* Basic blocks of quotactl's XFS structures. */
#define BB_SHIFT 9

/* One ID choice at a time in this process: between the probe and the directory's new ID no
 * other volume may pick the same one. */
static pthread_mutex_t assign_lock = PTHREAD_MUTEX_INITIALIZER;

static int qctl(int fd, int cmd, uint32_t id, void *addr)
{
	return syscall(SYS_quotactl_fd, fd, QCMD(cmd, PRJQUOTA), id, addr) < 0 ? -errno : 0;
}

static bool id_is_ours(uint32_t id)
{
	return id >= QUOTA_PRJ_ID_MIN && id <= QUOTA_PRJ_ID_MAX;
}

static const char *fs_name(int fd)
{
	struct statfs sfs;

	if (fstatfs(fd, &sfs) < 0)
		return "unknown";
	switch (sfs.f_type) {
	case XFS_SUPER_MAGIC:
		return "xfs";
	case EXT4_SUPER_MAGIC: /* ext2/3/4 share it */
		return "ext4";
	case TMPFS_MAGIC:
		return "tmpfs";
	case BTRFS_SUPER_MAGIC:
		return "btrfs";
	default:
		return "other";
	}
}

bool quota_fs_type_has_projects(long f_type)
{
	return f_type == XFS_SUPER_MAGIC || f_type == EXT4_SUPER_MAGIC;
}

int quota_prj_check_enforced(int fd, const char *path, struct error_info *err)
{
	struct fs_quota_statv sv = { .qs_version = FS_QSTATV_VERSION1 };
	const char *type = fs_name(fd);
	const char *how;
	struct stat st;
	char dev[32] = "?";
	int r;

	if (fstat(fd, &st) == 0)
		snprintf(dev, sizeof(dev), "%u:%u", major(st.st_dev), minor(st.st_dev));
	r = qctl(fd, Q_XGETQSTATV, 0, &sv);
	if (r == 0 && (sv.qs_flags & FS_QUOTA_PDQ_ACCT) && (sv.qs_flags & FS_QUOTA_PDQ_ENFD))
		return 0;
	if (!strcmp(type, "xfs"))
		how = "mount it with the prjquota option (the kernel needs XFS quota support)";
	else if (!strcmp(type, "ext4"))
		how = "give it the project and quota features (mkfs.ext4 -O project,quota, or "
		      "tune2fs -O project,quota while unmounted) and mount it with prjquota";
	else
		how = "only xfs and ext4 with project quotas enforce a size; put the directory on "
		      "one";
	return err_set(err, -EOPNOTSUPP,
		       "size: the %s filesystem holding %s (device %s) does not enforce project "
		       "quotas (%s): %s",
		       type, path, dev,
		       r < 0				    ? strerror(-r)
		       : !(sv.qs_flags & FS_QUOTA_PDQ_ACCT) ? "no project accounting"
							    : "project limits not enforced",
		       how);
}

static int get_xattr(int fd, struct fsxattr *ret)
{
	return ioctl(fd, FS_IOC_FSGETXATTR, ret) < 0 ? -errno : 0;
}

static int set_dir_project(int fd, uint32_t id, bool inherit)
{
	struct fsxattr fa;
	int r = get_xattr(fd, &fa);

	if (r < 0)
		return r;
	if (fa.fsx_projid == id && !!(fa.fsx_xflags & FS_XFLAG_PROJINHERIT) == inherit)
		return 0;
	fa.fsx_projid = id;
	if (inherit)
		fa.fsx_xflags |= FS_XFLAG_PROJINHERIT;
	else
		fa.fsx_xflags &= ~FS_XFLAG_PROJINHERIT;
	return ioctl(fd, FS_IOC_FSSETXATTR, &fa) < 0 ? -errno : 0;
}

/* 1 when the filesystem accounts something to id (usage or a limit), 0 when not. */
static int id_in_use(int fd, uint32_t id)
{
	struct fs_disk_quota dq = { 0 };
	int r = qctl(fd, Q_XGETQUOTA, id, &dq);

	if (r == -ENOENT || r == -ESRCH)
		return 0;
	if (r < 0)
		return r;
	return dq.d_bcount || dq.d_icount || dq.d_blk_hardlimit || dq.d_blk_softlimit ||
	       dq.d_ino_hardlimit || dq.d_ino_softlimit;
}

static int set_limit(int fd, uint32_t id, uint64_t bytes)
{
	struct fs_disk_quota dq = {
		.d_version = FS_DQUOT_VERSION,
		.d_flags = FS_PROJ_QUOTA,
		.d_fieldmask = FS_DQ_BHARD | FS_DQ_BSOFT,
		.d_id = id,
		.d_blk_hardlimit = (bytes + (1u << BB_SHIFT) - 1) >> BB_SHIFT,
	};

	return qctl(fd, Q_XSETQLIM, id, &dq);
}

static uint32_t hash_key(const char *key)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (; *key; key++)
		h = (h ^ (unsigned char)*key) * 16777619u;
	return h;
}

static int pick_id(int fd, const char *key, uint32_t *ret_id)
{
	uint32_t span = QUOTA_PRJ_ID_MAX - QUOTA_PRJ_ID_MIN + 1;
	uint32_t start = hash_key(key) % span;

	for (uint32_t i = 0; i < PROBE_MAX; i++) {
		uint32_t id = QUOTA_PRJ_ID_MIN + (start + i) % span;
		int r = id_in_use(fd, id);

		if (r < 0)
			return r;
		if (r == 0) {
			*ret_id = id;
			return 0;
		}
	}
	return -ENOSPC;
}

int quota_prj_set_size(int dir_fd, const char *path, const char *key, uint64_t bytes,
		       uint32_t *ret_id, struct error_info *err)
{
	struct fsxattr fa;
	uint32_t id;
	int r;

	r = quota_prj_check_enforced(dir_fd, path, err);
	if (r < 0)
		return r;
	r = get_xattr(dir_fd, &fa);
	if (r < 0)
		return err_set(err, r, "size: reading the project ID of %s: %s", path,
			       strerror(-r));
	if (fa.fsx_projid != 0 && !id_is_ours(fa.fsx_projid))
		return err_set(err, -EBUSY,
			       "size: %s already belongs to project %u, which volagent did not "
			       "set; refusing to change it",
			       path, fa.fsx_projid);
	pthread_mutex_lock(&assign_lock);
	id = fa.fsx_projid;
	r = id ? 0 : pick_id(dir_fd, key, &id);
	if (r == 0)
		r = set_dir_project(dir_fd, id, true);
	pthread_mutex_unlock(&assign_lock);
	if (r == -ENOSPC)
		return err_set(err, r, "size: no free project ID found for %s", path);
	if (r < 0)
		return err_set(err, r, "size: setting project %u on %s: %s", id, path,
			       strerror(-r));
	r = set_limit(dir_fd, id, bytes);
	if (r < 0)
		return err_set(err, r, "size: setting the limit of project %u (%s): %s", id, path,
			       strerror(-r));
	if (ret_id)
		*ret_id = id;
	return 0;
}

int quota_prj_clear_size(int dir_fd, const char *path, struct error_info *err)
{
	struct fsxattr fa;
	int r = get_xattr(dir_fd, &fa);

	if (r == -ENOTTY || r == -EOPNOTSUPP)
		return 0;
	if (r < 0)
		return err_set(err, r, "size: reading the project ID of %s: %s", path,
			       strerror(-r));
	if (!id_is_ours(fa.fsx_projid))
		return 0;
	/* A filesystem whose quotas are off now keeps no limit to lift. */
	r = set_limit(dir_fd, fa.fsx_projid, 0);
	if (r < 0 && r != -ENOSYS && r != -ESRCH && r != -ENOENT && r != -EOPNOTSUPP)
		return err_set(err, r, "size: lifting the limit of project %u (%s): %s",
			       fa.fsx_projid, path, strerror(-r));
	r = set_dir_project(dir_fd, 0, false);
	if (r < 0)
		return err_set(err, r, "size: clearing the project of %s: %s", path, strerror(-r));
	return 0;
}

int quota_prj_dir_usage_at(const char *path, struct quota_usage *ret)
{
	_cleanup_close_ int fd =
		open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return -errno;
	return quota_prj_dir_usage(fd, ret);
}

int quota_prj_dir_usage(int fd, struct quota_usage *ret)
{
	struct fs_disk_quota dq = { 0 };
	struct fsxattr fa;
	int r = get_xattr(fd, &fa);

	if (r == -ENOTTY || r == -EOPNOTSUPP || r == -EINVAL)
		return 0;
	if (r < 0)
		return r;
	if (!id_is_ours(fa.fsx_projid) || !(fa.fsx_xflags & FS_XFLAG_PROJINHERIT))
		return 0;
	r = qctl(fd, Q_XGETQUOTA, fa.fsx_projid, &dq);
	if (r == -ENOENT || r == -ESRCH || r == -ENOSYS || r == -EOPNOTSUPP)
		return 0;
	if (r < 0)
		return r;
	if (!dq.d_blk_hardlimit)
		return 0;
	*ret = (struct quota_usage){
		.project_id = fa.fsx_projid,
		.bytes_limit = dq.d_blk_hardlimit << BB_SHIFT,
		.bytes_used = dq.d_bcount << BB_SHIFT,
		.inodes_limit = dq.d_ino_hardlimit,
		.inodes_used = dq.d_icount,
	};
	return 1;
}
