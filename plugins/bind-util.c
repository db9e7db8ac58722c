/* bind-util.c - see bind-util.h. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/statvfs.h>

#include "bind-util.h"
#include "mount-util.h"

static bool is_read_only(const char *path)
{
	struct statvfs sv;

	return statvfs(path, &sv) == 0 && (sv.f_flag & ST_RDONLY);
}

/* Whether the target (the name target_name in target_dir; path names it for the read-only
 * test) holds the source (source_name in source_dir, "" for source_dir itself) as read_only
 * asks: 1 yes, 0 no (*ret_mount_root says whether something else is mounted there), -errno
 * when it cannot be told.  The mount-root test and the target's identity come from one statx
 * of the target (not following a final symlink: a symlink is never a mount root).  The set-up
 * passes the descriptors it holds (one lookup of one name), bind_check() whole paths. */
static int check_target(int target_dir, const char *target_name, const char *path, int source_dir,
			const char *source_name, bool read_only, bool *ret_mount_root)
{
	struct statx stx;
	struct stat src;

	*ret_mount_root = false;
	if (statx(target_dir, target_name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_INO, &stx) <
	    0)
		return errno == ENOENT ? 0 : -errno;
	if (!(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return -EOPNOTSUPP;
	if (!(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
		return 0;
	*ret_mount_root = true;
	if (fstatat(source_dir, source_name, &src,
		    source_name[0] || source_dir == AT_FDCWD ? 0 : AT_EMPTY_PATH) < 0)
		return -errno;
	if (makedev(stx.stx_dev_major, stx.stx_dev_minor) != src.st_dev ||
	    stx.stx_ino != src.st_ino)
		return 0;
	return is_read_only(path) == read_only;
}

int bind_check(const char *target, const char *source, bool read_only)
{
	bool mount_root;

	return check_target(AT_FDCWD, target, target, AT_FDCWD, source, read_only, &mount_root);
}

int bind_check_seen(const char *target, const char *source, bool read_only, struct mount_seen *seen)
{
	struct statx t, s;

	if (!seen->mount_id)
		return bind_check(target, source, read_only);
	if (statx(AT_FDCWD, target, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_INO | STATX_MNT_ID,
		  &t) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!(t.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return -EOPNOTSUPP;
	if (!(t.stx_attributes & STATX_ATTR_MOUNT_ROOT))
		return 0;
	/* Another mount than the table showed: it is looked at for real. */
	if (!(t.stx_mask & STATX_MNT_ID) || (int)t.stx_mnt_id != seen->mount_id)
		return bind_check(target, source, read_only);
	if (seen->stacked || seen->read_only != read_only)
		return 0;
	if (statx(AT_FDCWD, source, AT_NO_AUTOMOUNT, STATX_INO, &s) < 0)
		return -errno;
	if (t.stx_dev_major != s.stx_dev_major || t.stx_dev_minor != s.stx_dev_minor ||
	    t.stx_ino != s.stx_ino)
		return 0;
	seen->confirmed = true;
	return 1;
}

int bind_set_up(int source_fd, const char *source, const struct mount_target *target,
		bool read_only, struct error_info *err)
{
	bool mount_root = false;

	/* A dir made just now holds nothing: no look first, and no open of it to mount on. */
	if (target->fresh)
		return mnt_util_bind_new_dir(source_fd, target->parent_fd, target->name, read_only,
					     err);
	if (check_target(target->parent_fd, target->name, target->path, source_fd, "", read_only,
			 &mount_root) == 1)
		return 0;
	if (mount_root)
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
