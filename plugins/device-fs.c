/* device-fs.c - see device-fs.h. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blkdev.h"
#include "device-fs.h"
#include "fs-probe.h"
#include "macro.h"
#include "mount-options.h"
#include "mount-util.h"
#include "process.h"

int device_fs_join_options(char *const *mount_options, bool read_only, char **ret,
			   struct error_info *err)
{
	size_t n = mount_options_count(mount_options), limit = (size_t)sysconf(_SC_PAGESIZE);
	_cleanup_free_ char **v = mount_options_own_mount(mount_options, read_only);
	char *joined;

	if (!v)
		return -ENOMEM;
	joined = mount_options_join(v);
	if (!joined)
		return -ENOMEM;
	/* mount(2) copies at most one page of options and silently drops the rest. */
	if (strlen(joined) >= limit) {
		size_t len = strlen(joined);
		free(joined);
		return err_set(err, -E2BIG,
			       "mountOptions: %zu options joined are %zu bytes, more than the %zu "
			       "the kernel takes; refusing to mount with a shorter list",
			       n, len, limit - 1);
	}
	*ret = joined;
	return 0;
}

int device_fs_mount(const char *dev, const char *fstype, const char *default_fstype,
		    char *const *mount_options, bool read_only, const struct mount_target *target,
		    struct error_info *err)
{
	_cleanup_free_ char *options = NULL;
	_cleanup_close_ int claim = -1;
	struct stat st_dev, st_target;
	char type[32], uuid[BLKDEV_UUID_MAX] = "";
	int r;

	if (stat(dev, &st_dev) < 0)
		return err_set(err, -errno, "device %s: %s", dev, strerror(errno));
	if (!S_ISBLK(st_dev.st_mode))
		return err_set(err, -ENOTBLK, "%s is not a block device", dev);
	/* Already mounted here (a retry, or adopted after a restart)? */
	if (mnt_util_is_mount_root(target->path) == 1) {
		if (stat(target->path, &st_target) == 0 && st_target.st_dev == st_dev.st_rdev)
			return 0;
		return err_set(err, -EBUSY, "%s is already a mount point of another device",
			       target->path);
	}
	/* Options first: a list that cannot be mounted must not format the device either. */
	r = device_fs_join_options(mount_options, read_only, &options, err);
	if (r < 0)
		return r;
	/* One claim-probe-format-mount at a time per device (two names of one device: the
	 * second finds it mounted and is refused), and the claim held from before the probe
	 * until mkfs or the mount claims the device itself. */
	blkdev_lock_format(st_dev.st_rdev);
	claim = blkdev_claim(dev, err);
	r = claim < 0 ? claim
		      : blkdev_prepare_for_mount(dev, fstype ? fstype : default_fstype, read_only,
						 target->fs_uuid, type, uuid, &claim, err);
	if (claim >= 0)
		close(TAKE_FD(claim));
	if (r == 0)
		r = mnt_util_mount_at(dev, target->parent_fd, target->name, type,
				      options[0] ? options : NULL, err);
	blkdev_unlock_format(st_dev.st_rdev);
	if (r == 0 && target->ret_fs_uuid)
		snprintf(target->ret_fs_uuid, MOUNT_TARGET_UUID_MAX, "%s", uuid);
	return r;
}

_Static_assert(MOUNT_TARGET_UUID_MAX >= BLKDEV_UUID_MAX, "a probed UUID fits the target's");

#define EXT4_SUPER_MAGIC 0xEF53
#define XFS_SUPER_MAGIC 0x58465342
/* statfs of the mount, to tell ext4 from xfs: a local filesystem answers at once. */
#define STATFS_TIMEOUT_MS 10000

/* The size of the block device dev in bytes. */
static int device_size(const char *dev, unsigned long long *ret)
{
	_cleanup_close_ int fd = open(dev, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	return ioctl(fd, BLKGETSIZE64, ret) < 0 ? -errno : 0;
}

/* The first line of a tool's output that says something: not its version banner. */
static const char *first_message_line(char *out)
{
	for (char *l = out, *next; l && *l; l = next) {
		next = strchr(l, '\n');
		if (next)
			*next++ = '\0';
		if ((startswith(l, "resize2fs 1.") || startswith(l, "xfs_growfs version")) || !*l)
			continue;
		return l;
	}
	return "no output";
}

int device_fs_expand(const char *dev, const char *mount_path, unsigned long long new_size,
		     unsigned long long *ret_capacity, struct error_info *err)
{
	const struct process_options deadline = { .timeout_ms = DEVICE_FS_GROW_TIMEOUT_MS };
	struct fs_probe_result fs;
	unsigned long long size = 0;
	const char *tool, *why;
	char out[1024];
	int r;

	if (!dev)
		return err_set(err, -EINVAL, "%s: no block device is known for it", mount_path);
	r = device_size(dev, &size);
	if (r < 0)
		return err_set(err, r, "device %s: %s", dev, strerror(-r));
	if (new_size > size)
		return err_set(err, -ERANGE,
			       "the device %s has %llu bytes, less than the %llu required; grow it "
			       "first",
			       dev, size, new_size);
	r = fs_probe(mount_path, STATFS_TIMEOUT_MS, &fs);
	if (r == 0 && fs.error < 0)
		r = fs.error;
	if (r < 0)
		return err_set(err, r, "%s: %s", mount_path, strerror(-r));
	/* Online growth: resize2fs takes the device, xfs_growfs the mount point. */
	if (fs.fs_type == EXT4_SUPER_MAGIC) {
		tool = "resize2fs";
		r = process_run((const char *const[]){ tool, dev, NULL }, &deadline, out,
				sizeof(out));
	} else if (fs.fs_type == XFS_SUPER_MAGIC) {
		tool = "xfs_growfs";
		r = process_run((const char *const[]){ tool, mount_path, NULL }, &deadline, out,
				sizeof(out));
	} else {
		return err_set(err, -EOPNOTSUPP, "%s: only ext4 and xfs can be grown online",
			       mount_path);
	}
	if (r == -ETIMEDOUT)
		return err_set(err, r, "%s did not finish within %ds and was stopped", tool,
			       DEVICE_FS_GROW_TIMEOUT_MS / 1000);
	if (r != 0) {
		why = r < 0 ? strerror(-r) : first_message_line(out);
		if (strstr(why, "Permission denied") && fs.fs_type == EXT4_SUPER_MAGIC)
			return err_set(err, -EOPNOTSUPP,
				       "ext4 online resize needs CAP_SYS_RESOURCE, which this agent "
				       "lacks (%s)",
				       why);
		return err_set(err, r < 0 ? r : -EIO, "growing the filesystem failed: %s", why);
	}
	*ret_capacity = size;
	return 0;
}
