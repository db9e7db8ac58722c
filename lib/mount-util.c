/* mount-util.c - see mount-util.h.
 *
 * A bind uses the new mount API (open_tree + move_mount) on the descriptors it is given, and
 * libmount only on kernels without it; mounts of a filesystem (nfs through its mount.nfs
 * helper, devices) always go through libmount.
 *
 * Unmount uses umount2(2) directly: libmount's umount path looks the target up in the mount
 * table first, which costs a parse of the whole of mountinfo per call (O(n) per unmount, O(n^2)
 * for a node with thousands of pod mounts), and volagent needs none of the mtab or helper
 * handling it buys. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <libmount.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "mount-util.h"
#include "mount-utab.h"
#include "path-util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct libmnt_context *, mnt_free_context)

/* Turns a failed mnt_context_mount() into -errno and a message naming what failed. */
static int context_error(struct libmnt_context *cxt, int rc, const char *what,
			 struct error_info *err)
{
	char buf[256] = "";
	int syserr = mnt_context_get_syscall_errno(cxt);
	int code;

	if (syserr > 0)
		code = -syserr;
	else if (rc < 0)
		code = rc;
	else
		code = -EIO; /* a helper (mount.nfs) failed; its message says why */
	mnt_context_get_excode(cxt, rc, buf, sizeof(buf));
	if (!buf[0])
		snprintf(buf, sizeof(buf), "%s", strerror(-code));
	return err_set(err, code, "%s: %s", what, buf);
}

static struct libmnt_context *new_context(void)
{
	struct libmnt_context *cxt;

	/* libmount reads LIBMOUNT_DEBUG only when asked to (once): its own trace of what it is
	 * given and hands to mount(2), e.g. LIBMOUNT_DEBUG=cxt. */
	mnt_init_debug(0);
	cxt = mnt_new_context();

	if (!cxt)
		return NULL;
	/* The kernel resolves /proc/self/fd/N; libmount must not resolve it to a path first. */
	mnt_context_disable_canonicalize(cxt, 1);
	/* libmount would record the /proc/self/fd/N target in utab (/run/mount): a mount with
	 * userspace options is recorded by mnt_utab_record instead, with its real path. */
	mnt_context_disable_mtab(cxt, 1);
	return cxt;
}

/* Opens name in dir_fd as an O_PATH descriptor, refusing symlinks and non-directories. */
static int open_target(int dir_fd, const char *name, struct error_info *err)
{
	int fd = openat(dir_fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return err_set(err, -errno, "mount target %s: %s%s", name, strerror(errno),
			       errno == ENOTDIR || errno == ELOOP ? " (a symlink is never followed)"
								  : "");
	return fd;
}

static int remount_ro(int dir_fd, const char *name, struct error_info *err)
{
	_cleanup_(mnt_free_contextp) struct libmnt_context *cxt = new_context();
	_cleanup_close_ int fd = open_target(dir_fd, name, err);
	char dst[FD_PATH_MAX];
	int rc;

	if (fd < 0)
		return fd;
	if (!cxt)
		return err_set(err, -ENOMEM, "remount: out of memory");
	if (mnt_context_set_target(cxt, path_fd_path(fd, dst)) < 0 ||
	    mnt_context_set_options(cxt, "remount,bind,ro") < 0)
		return err_set(err, -ENOMEM, "remount: cannot set up mount context");
	mnt_context_disable_helpers(cxt, 1);
	rc = mnt_context_mount(cxt);
	if (rc != 0)
		return context_error(cxt, rc, "remount read-only", err);
	return 0;
}

/* A bind through the new mount API: a detached clone of the source (not recursive, as
 * MS_BIND without MS_REC), made read-only first when asked (so it is never writable, not even
 * for a moment), then moved onto the target.  Two or three syscalls on descriptors: no path
 * is resolved again, and no libmount context is built for what is a plain bind (libmount adds
 * nothing to it: no helper, no fstab, no utab).  Returns -ENOSYS on kernels without the new
 * mount API (before 5.2; 5.12 for read-only), for the caller to fall back to libmount. */
static int bind_new_api(int source_fd, int target_dir_fd, const char *target_name, bool read_only,
			struct error_info *err)
{
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY };
	_cleanup_close_ int tree =
		open_tree(source_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);

	if (tree < 0)
		return errno == ENOSYS ? -ENOSYS
				       : err_set(err, -errno, "bind: %s", strerror(errno));
	if (read_only && mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return errno == ENOSYS
			       ? -ENOSYS
			       : err_set(err, -errno, "read-only bind: %s", strerror(errno));
	/* No MOVE_MOUNT_T_SYMLINKS: a target name that is a symlink is not followed (and a
	 * directory is never mounted on anything but a directory: ENOTDIR). */
	if (move_mount(tree, "", target_dir_fd, target_name,
		       MOVE_MOUNT_F_EMPTY_PATH | (*target_name ? 0 : MOVE_MOUNT_T_EMPTY_PATH)) < 0)
		return err_set(err, -errno, "%sbind: %s", read_only ? "read-only " : "",
			       strerror(errno));
	return 0;
}

/* The bind through libmount, for kernels without the new mount API: the bind, then
 * "remount,bind,ro". */
static int bind_libmount(int source_fd, int dir_fd, const char *name, int target_fd, bool read_only,
			 struct error_info *err)
{
	_cleanup_(mnt_free_contextp) struct libmnt_context *cxt = new_context();
	char src[FD_PATH_MAX], dst[FD_PATH_MAX];
	int rc;

	if (!cxt)
		return err_set(err, -ENOMEM, "bind: out of memory");
	if (mnt_context_set_source(cxt, path_fd_path(source_fd, src)) < 0 ||
	    mnt_context_set_target(cxt, path_fd_path(target_fd, dst)) < 0 ||
	    mnt_context_set_options(cxt, "bind") < 0)
		return err_set(err, -ENOMEM, "bind: cannot set up mount context");
	mnt_context_disable_helpers(cxt, 1);
	rc = mnt_context_mount(cxt);
	if (rc != 0)
		return context_error(cxt, rc, "bind mount", err);
	if (read_only) {
		rc = remount_ro(dir_fd, name, err);
		if (rc < 0) {
			/* Never leave a writable bind where a read-only one was asked for. */
			(void)umount2(dst, UMOUNT_NOFOLLOW | MNT_DETACH);
			return rc;
		}
	}
	return 0;
}

int mnt_util_bind_at(int source_fd, int dir_fd, const char *name, bool read_only,
		     struct error_info *err)
{
	_cleanup_close_ int target_fd = -1;
	int rc;

	target_fd = open_target(dir_fd, name, err);
	if (target_fd < 0)
		return target_fd;
	rc = bind_new_api(source_fd, target_fd, "", read_only, err);
	if (rc != -ENOSYS)
		return rc;
	return bind_libmount(source_fd, dir_fd, name, target_fd, read_only, err);
}

int mnt_util_bind_new_dir(int source_fd, int dir_fd, const char *name, bool read_only,
			  struct error_info *err)
{
	int rc = bind_new_api(source_fd, dir_fd, name, read_only, err);

	return rc == -ENOSYS ? mnt_util_bind_at(source_fd, dir_fd, name, read_only, err) : rc;
}

int mnt_util_mount_at(const char *source, int dir_fd, const char *name, const char *fstype,
		      const char *options, struct error_info *err)
{
	_cleanup_(mnt_free_contextp) struct libmnt_context *cxt = new_context();
	_cleanup_close_ int target_fd = -1;
	char dst[FD_PATH_MAX];
	int rc;

	if (!cxt)
		return err_set(err, -ENOMEM, "mount: out of memory");
	target_fd = open_target(dir_fd, name, err);
	if (target_fd < 0)
		return target_fd;
	if (mnt_context_set_source(cxt, source) < 0 ||
	    mnt_context_set_target(cxt, path_fd_path(target_fd, dst)) < 0 ||
	    (fstype && mnt_context_set_fstype(cxt, fstype) < 0) ||
	    (options && *options && mnt_context_set_options(cxt, options) < 0))
		return err_set(err, -ENOMEM, "mount: cannot set up mount context");
	rc = mnt_context_mount(cxt);
	if (rc != 0)
		return context_error(cxt, rc, "mount", err);
	if (mnt_utab_has_userspace_options(options))
		mnt_utab_record(source, target_fd, options);
	return 0;
}

/* A mount is often busy for a moment only: a stat or statfs of the target by another process
 * (kubelet, cadvisor, a monitoring agent polling its mounts) holds a reference to it while it
 * runs.  EBUSY is tried again after 1, 2, 4, ... ms, this many times, before it is reported. */
#define UMOUNT_BUSY_RETRIES 6

int mnt_util_umount(const char *target, int flags, struct error_info *err)
{
	for (int attempt = 0;; attempt++) {
		int e;

		if (umount2(target, flags | UMOUNT_NOFOLLOW) == 0) {
			mnt_utab_forget(target);
			return 0;
		}
		e = errno;
		if (e == EINVAL)
			return -EINVAL; /* not a mount point: nothing to do, the caller decides */
		if (e == EBUSY && !(flags & MNT_DETACH) && attempt < UMOUNT_BUSY_RETRIES) {
			struct timespec ts = { .tv_nsec = 1000000L << attempt };

			nanosleep(&ts, NULL);
			continue;
		}
		return err_set(err, -e, "unmount %s: %s", target, strerror(e));
	}
}

int mnt_util_mount_id(const char *path, int *ret_id)
{
	return mnt_util_mount_id_at(AT_FDCWD, path, ret_id);
}

int mnt_util_mount_id_at(int dir_fd, const char *name, int *ret_id)
{
	struct statx stx;

	if (statx(dir_fd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_MNT_ID, &stx) < 0)
		return -errno;
	if (!(stx.stx_mask & STATX_MNT_ID))
		return -EOPNOTSUPP;
	*ret_id = (int)stx.stx_mnt_id;
	return 0;
}

int mnt_util_is_mount_root(const char *path)
{
	struct statx stx;

	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, 0, &stx) < 0)
		return -errno;
	if (!(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return -EOPNOTSUPP;
	return !!(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}
