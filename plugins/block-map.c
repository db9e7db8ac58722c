/* block-map.c - see block-map.h.  The bind is made with the mount API on descriptors (no path
 * is looked up twice), and a read-only one is made read-only before it is attached. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <linux/major.h>
#include <linux/mount.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "block-map.h"
#include "macro.h"
#include "mount-util.h"

static int stat_block(const char *path, struct stat *st)
{
	if (stat(path, st) < 0)
		return -errno;
	return S_ISBLK(st->st_mode) ? 0 : -ENOTBLK;
}

int block_map_check(const char *target, const char *device, bool read_only)
{
	struct stat t, d;
	struct statvfs sv;
	int r = mnt_util_is_mount_root(target);

	if (r <= 0)
		return r == -ENOENT ? 0 : r;
	if (stat_block(target, &t) < 0)
		return 0; /* a mount, but not of a device */
	r = stat_block(device, &d);
	if (r < 0)
		return r;
	if (t.st_rdev != d.st_rdev)
		return 0;
	if (statvfs(target, &sv) < 0)
		return -errno;
	return !!(sv.f_flag & ST_RDONLY) == read_only;
}

static int sys_open_tree(int dfd, const char *path, unsigned flags)
{
	return (int)syscall(SYS_open_tree, dfd, path, flags);
}

static int sys_mount_setattr(int dfd, const char *path, unsigned flags, struct mount_attr *attr)
{
	return (int)syscall(SYS_mount_setattr, dfd, path, flags, attr, sizeof(*attr));
}

static int sys_move_mount(int from_dfd, const char *from, int to_dfd, const char *to,
			  unsigned flags)
{
	return (int)syscall(SYS_move_mount, from_dfd, from, to_dfd, to, flags);
}

/* A detached clone of device, read-only when asked, moved onto the file target_fd. */
static int bind_fd(int device_fd, int target_fd, bool read_only, struct error_info *err)
{
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY };
	_cleanup_close_ int tree =
		sys_open_tree(device_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);

	if (tree < 0)
		return err_set(err, -errno, "bind: %s", strerror(errno));
	if (read_only && sys_mount_setattr(tree, "", AT_EMPTY_PATH, &attr) < 0)
		return err_set(err, -errno, "read-only bind: %s", strerror(errno));
	if (sys_move_mount(tree, "", target_fd, "",
			   MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return err_set(err, -errno, "bind: %s", strerror(errno));
	return 0;
}

int block_map_bind(const char *device, const struct mount_target *target, bool read_only,
		   struct error_info *err)
{
	_cleanup_close_ int dev_fd = -1, target_fd = -1;
	bool created = false;
	struct stat st;
	int r;

	r = stat_block(device, &st);
	if (r < 0)
		return err_set(err, r, "device %s: %s", device,
			       r == -ENOTBLK ? "not a block device" : strerror(-r));
	r = block_map_check(target->path, device, read_only);
	if (r == 1)
		return 0;
	if (mnt_util_is_mount_root(target->path) == 1)
		return err_set(err, -EBUSY,
			       "%s is already a mount point of something else; refusing to mount "
			       "over it",
			       target->path);
	dev_fd = open(device, O_PATH | O_CLOEXEC);
	if (dev_fd < 0)
		return err_set(err, -errno, "device %s: %s", device, strerror(errno));
	/* kubelet's layout: the target is a file; make it when it is missing. */
	r = openat(target->parent_fd, target->name,
		   O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (r >= 0) {
		close(r);
		created = true;
	} else if (errno != EEXIST) {
		return err_set(err, -errno, "create %s: %s", target->path, strerror(errno));
	}
	target_fd = openat(target->parent_fd, target->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (target_fd < 0) {
		r = err_set(err, -errno, "%s: %s", target->path, strerror(errno));
		goto out_remove;
	}
	if (fstat(target_fd, &st) < 0) {
		r = err_set(err, -errno, "%s: %s", target->path, strerror(errno));
		goto out_remove;
	}
	if (S_ISDIR(st.st_mode))
		return err_set(err, -EISDIR,
			       "%s is a directory; a raw block volume's target must be a file",
			       target->path);
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
		return err_set(err, -EINVAL,
			       "%s is not a regular file (a symlink is never "
			       "followed)",
			       target->path);
	r = bind_fd(dev_fd, target_fd, read_only, err);
	if (r == 0)
		return 0;
	err_prefix(err, "%s onto %s", device, target->path);
out_remove:
	if (created)
		(void)unlinkat(target->parent_fd, target->name, 0);
	return r;
}

int block_map_unbind(const char *target, struct error_info *err)
{
	struct stat st;
	int r;

	r = mnt_util_umount(target, 0, err);
	if (r == -EIO || r == -ENOTCONN) /* the device died under it */
		r = mnt_util_umount(target, MNT_DETACH, err);
	if (r < 0 && r != -EINVAL && r != -ENOENT)
		return r;
	if (mnt_util_is_mount_root(target) == 1)
		return err_set(err, -EBUSY, "%s is still mounted (stacked binds)", target);
	if (lstat(target, &st) < 0)
		return errno == ENOENT ? 0
				       : err_set(err, -errno, "%s: %s", target, strerror(errno));
	if (S_ISDIR(st.st_mode))
		return err_set(err, -EISDIR, "%s is a directory, not a raw block volume's file",
			       target);
	if (unlink(target) < 0 && errno != ENOENT)
		return err_set(err, -errno, "remove %s: %s", target, strerror(errno));
	return 0;
}

int block_map_reread_size(const char *path, uint64_t *ret_bytes, struct error_info *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;

	if (fd < 0)
		return err_set(err, -errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0)
		return err_set(err, -errno, "%s: %s", path, strerror(errno));
	if (!S_ISBLK(st.st_mode))
		return err_set(err, -ENOTBLK, "%s is not a block device", path);
	if (major(st.st_rdev) == LOOP_MAJOR && ioctl(fd, LOOP_SET_CAPACITY, 0) < 0)
		return err_set(err, -errno, "%s: LOOP_SET_CAPACITY: %s", path, strerror(errno));
	return block_map_size(path, ret_bytes, err);
}

int block_map_size(const char *path, uint64_t *ret_bytes, struct error_info *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	uint64_t bytes;

	if (fd < 0)
		return err_set(err, -errno, "%s: %s", path, strerror(errno));
	if (ioctl(fd, BLKGETSIZE64, &bytes) < 0)
		return err_set(err, -errno, "%s: BLKGETSIZE64: %s", path, strerror(errno));
	*ret_bytes = bytes;
	return 0;
}
