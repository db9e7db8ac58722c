/* device-fs.c - see device-fs.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blkdev.h"
#include "device-fs.h"
#include "macro.h"
#include "mount-options.h"
#include "mount-util.h"

int device_fs_join_options(char *const *mount_options, bool read_only, char **ret,
			   struct error_info *err)
{
	size_t n = mount_options_count(mount_options), limit = (size_t)sysconf(_SC_PAGESIZE);
	_cleanup_free_ char **v = calloc(n + 2, sizeof(*v));
	char *joined;

	if (!v)
		return -ENOMEM;
	/* A vector of borrowed strings: mount_options_join only reads it. */
	for (size_t i = 0; i < n; i++)
		v[i] = mount_options[i];
	if (read_only)
		v[n] = (char *)"ro";
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
	struct stat st_dev, st_target;
	char type[32];
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
	r = blkdev_prepare_for_mount(dev, fstype ? fstype : default_fstype, read_only, type, err);
	if (r < 0)
		return r;
	return mnt_util_mount_at(dev, target->parent_fd, target->name, type,
				 options[0] ? options : NULL, err);
}
