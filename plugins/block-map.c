/* block-map.c - see block-map.h.  The bind is made with the mount API on descriptors (no path
 * is looked up twice), and a read-only one is made read-only before it is attached.
 *
 * A read-only mount does not stop writes to a device node (the kernel checks it for files,
 * not for devices), but a read-only block device does (EPERM).  So a pod's read-only file
 * over a writable device is a bind of a read-only loop device over it, named RO_LOOP_NAME:
 * check knows such a loop over the device as the device, and unbind detaches it.  The
 * node-wide hold stays a plain bind (read-only flag only): a read-write pod may share it. */
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
#include "loop-device.h"
#include "macro.h"
#include "mount-util.h"

/* lo_file_name of the read-only loops made here: how check and unbind tell them from any
 * other loop device (a volume's own device may be a loop). */
#define RO_LOOP_NAME "volagent: read-only bind"

static int stat_block(const char *path, struct stat *st)
{
	if (stat(path, st) < 0)
		return -errno;
	return S_ISBLK(st->st_mode) ? 0 : -ENOTBLK;
}

/* Whether the block device at path (of device number rdev) is a read-only loop made here,
 * over the device over_rdev (over any device when 0). */
static bool is_ro_loop(const char *path, dev_t rdev, dev_t over_rdev)
{
	_cleanup_close_ int fd = -1;
	struct loop_info64 info;
	dev_t backing;

	if (major(rdev) != LOOP_MAJOR)
		return false;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 || ioctl(fd, LOOP_GET_STATUS64, &info) < 0)
		return false;
	backing = makedev(major(info.lo_rdevice), minor(info.lo_rdevice));
	return (info.lo_flags & LO_FLAGS_READ_ONLY) &&
	       strncmp((const char *)info.lo_file_name, RO_LOOP_NAME, LO_NAME_SIZE) == 0 &&
	       (!over_rdev || backing == over_rdev);
}

/* Whether the block device at path is read-only (BLKROGET). */
static bool bdev_read_only(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	int ro = 0;

	return fd >= 0 && ioctl(fd, BLKROGET, &ro) == 0 && ro;
}

/* A read-only loop device over device, named RO_LOOP_NAME, into ret_dev (>= 32 bytes). */
static int ro_loop_attach(const char *device, char *ret_dev, struct error_info *err)
{
	_cleanup_close_ int fd = -1;
	struct loop_info64 info;
	int r = rbd_loop_attach(device, true, ret_dev);

	if (r < 0)
		return err_set(err, r, "read-only loop device over %s: %s", device, strerror(-r));
	fd = open(ret_dev, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || ioctl(fd, LOOP_GET_STATUS64, &info) < 0) {
		r = -errno;
		goto out_detach;
	}
	memset(info.lo_file_name, 0, sizeof(info.lo_file_name));
	snprintf((char *)info.lo_file_name, sizeof(info.lo_file_name), "%s", RO_LOOP_NAME);
	if (ioctl(fd, LOOP_SET_STATUS64, &info) < 0) {
		r = -errno;
		goto out_detach;
	}
	return 0;
out_detach:
	(void)rbd_loop_detach(ret_dev, NULL);
	return err_set(err, r, "read-only loop device over %s: %s", device, strerror(-r));
}

/* The node of the block device rdev in /dev ("/dev/loopN") into buf (>= 32 bytes), from its
 * name in sysfs. */
static int bdev_node_path(dev_t rdev, char *buf)
{
	char link[64], dest[256];
	const char *name;
	ssize_t n;

	snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", major(rdev), minor(rdev));
	n = readlink(link, dest, sizeof(dest) - 1);
	if (n < 0)
		return -errno;
	dest[n] = '\0';
	name = strrchr(dest, '/');
	name = name ? name + 1 : dest;
	if (strlen(name) > 24)
		return -ENAMETOOLONG;
	snprintf(buf, 32, "/dev/%.24s", name);
	return 0;
}

/* Detaches the loop device open at fd (now, or at its last close when someone still has it
 * open). */
static int ro_loop_detach_fd(int fd)
{
	struct loop_info64 info;

	if (ioctl(fd, LOOP_CLR_FD, 0) == 0 || errno == ENXIO)
		return 0;
	if (errno != EBUSY)
		return -errno;
	/* Older kernels refuse while it is open: clear it on its last close. */
	if (ioctl(fd, LOOP_GET_STATUS64, &info) < 0)
		return -errno;
	info.lo_flags |= LO_FLAGS_AUTOCLEAR;
	return ioctl(fd, LOOP_SET_STATUS64, &info) < 0 ? -errno : 0;
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
	if (t.st_rdev != d.st_rdev && !(read_only && is_ro_loop(target, t.st_rdev, d.st_rdev)))
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
	char loop[32] = "";
	struct stat st;
	int r;

	r = stat_block(device, &st);
	if (r < 0)
		return err_set(err, r, "device %s: %s", device,
			       r == -ENOTBLK ? "not a block device" : strerror(-r));
	r = block_map_check(target->path, device, read_only);
	if (r == 1)
		return 1; /* already in place: nothing done */
	if (mnt_util_is_mount_root(target->path) == 1)
		return err_set(err, -EBUSY,
			       "%s is already a mount point of something else; refusing to mount "
			       "over it",
			       target->path);
	dev_fd = open(device, O_PATH | O_CLOEXEC);
	if (dev_fd < 0)
		return err_set(err, -errno, "device %s: %s", device, strerror(errno));
	/* Only a pod's file (a bind of the held file, itself a mount) gets the loop: the hold is
	 * the agent's own, and a read-write pod may come to share it. */
	if (read_only && !bdev_read_only(device) && mnt_util_is_mount_root(device) == 1) {
		r = ro_loop_attach(device, loop, err);
		if (r < 0)
			return r;
		close(dev_fd);
		dev_fd = open(loop, O_PATH | O_CLOEXEC);
		if (dev_fd < 0) {
			r = err_set(err, -errno, "%s: %s", loop, strerror(errno));
			goto out_detach;
		}
	}
	/* kubelet's layout: the target is a file; make it when it is missing. */
	r = openat(target->parent_fd, target->name,
		   O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (r >= 0) {
		close(r);
		created = true;
	} else if (errno != EEXIST) {
		r = err_set(err, -errno, "create %s: %s", target->path, strerror(errno));
		goto out_detach;
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
	if (S_ISDIR(st.st_mode)) {
		r = err_set(err, -EISDIR,
			    "%s is a directory; a raw block volume's target must be a file",
			    target->path);
		goto out_detach;
	}
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		r = err_set(err, -EINVAL,
			    "%s is not a regular file (a symlink is never "
			    "followed)",
			    target->path);
		goto out_detach;
	}
	r = bind_fd(dev_fd, target_fd, read_only, err);
	if (r == 0)
		return 0;
	err_prefix(err, "%s onto %s", device, target->path);
out_remove:
	if (created)
		(void)unlinkat(target->parent_fd, target->name, 0);
out_detach:
	if (loop[0])
		(void)rbd_loop_detach(loop, NULL);
	return r;
}

int block_map_unbind(const char *target, struct error_info *err)
{
	char loop[32] = "";
	dev_t loop_rdev = 0;
	struct stat st;
	int r;

	/* A read-only loop of ours under the bind: found now, detached once unmounted (through
	 * its node in /dev: an fd through target would keep the mount busy). */
	if (stat(target, &st) == 0 && S_ISBLK(st.st_mode) && mnt_util_is_mount_root(target) == 1 &&
	    is_ro_loop(target, st.st_rdev, 0) && bdev_node_path(st.st_rdev, loop) == 0)
		loop_rdev = st.st_rdev;
	r = mnt_util_umount(target, 0, err);
	if (r == -EIO || r == -ENOTCONN) /* the device died under it */
		r = mnt_util_umount(target, MNT_DETACH, err);
	if (r < 0 && r != -EINVAL && r != -ENOENT)
		return r;
	if (mnt_util_is_mount_root(target) == 1)
		return err_set(err, -EBUSY, "%s is still mounted (stacked binds)", target);
	if (loop[0]) {
		_cleanup_close_ int fd = open(loop, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		struct stat ls;

		/* Still the same loop of ours (the number is not reused while it is bound). */
		if (fd >= 0 && fstat(fd, &ls) == 0 && ls.st_rdev == loop_rdev &&
		    is_ro_loop(loop, loop_rdev, 0)) {
			r = ro_loop_detach_fd(fd);
			if (r < 0)
				return err_set(err, r, "%s: detach %s: %s", target, loop,
					       strerror(-r));
		}
	}
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
