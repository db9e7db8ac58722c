/* bind-util.c - see bind-util.h. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "bind-util.h"
#include "mount-util.h"

static int same_object(const char *a, const char *b)
{
	struct stat sa, sb;

	if (stat(a, &sa) < 0 || stat(b, &sb) < 0)
		return -errno;
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static bool is_read_only(const char *path)
{
	struct statvfs sv;

	return statvfs(path, &sv) == 0 && (sv.f_flag & ST_RDONLY);
}

int bind_check(const char *target, const char *source, bool read_only)
{
	int r = mnt_util_is_mount_root(target);

	if (r <= 0)
		return r == -ENOENT ? 0 : r;
	r = same_object(target, source);
	if (r <= 0)
		return r;
	return is_read_only(target) == read_only;
}

int bind_set_up(int source_fd, const char *source, const struct mount_target *target,
		bool read_only, struct error_info *err)
{
	if (bind_check(target->path, source, read_only) == 1)
		return 0;
	if (mnt_util_is_mount_root(target->path) == 1)
		return err_set(err, -EBUSY,
			       "%s is already a mount point of something else; refusing to mount "
			       "over it",
			       target->path);
	return mnt_util_bind_at(source_fd, target->parent_fd, target->name, read_only, err);
}

int bind_open_device_mount(const char *path, struct error_info *err)
{
	int fd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return err_set(err, -errno, "device mount %s: %s", path, strerror(errno));
	return fd;
}
