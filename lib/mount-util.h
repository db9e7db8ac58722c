/* mount-util.h - mount, bind and unmount through libmount, and cheap per-path mount checks.
 *
 * Targets (and bind sources) are passed as O_PATH descriptors and handed to the kernel as
 * /proc/self/fd/N with libmount's canonicalization off: the directory that was checked is
 * the one mounted on, even if someone swaps a symlink into the path in between. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "error.h"

/* Bind-mounts the object source_fd refers to (a directory, or the root of a mount) onto the
 * directory name in dir_fd, which is opened without following symlinks: a detached clone of
 * the source moved onto the target (open_tree, move_mount; not recursive, like MS_BIND).
 * read_only makes it a read-only bind that is never writable, even briefly: the clone is made
 * read-only (mount_setattr) before it is moved.  On kernels without that API, the bind
 * through libmount and then "remount,bind,ro" of the new mount only.  Returns 0 or
 * -errno with err filled; a failed remount unmounts the bind again, so nothing writable is
 * left behind. */
int mnt_util_bind_at(int source_fd, int dir_fd, const char *name, bool read_only,
		     struct error_info *err);

/* mnt_util_bind_at() onto a directory the caller has just made as name in dir_fd: the mount
 * goes onto the name (a single component, never followed if it is a symlink) without opening
 * it first. */
int mnt_util_bind_new_dir(int source_fd, int dir_fd, const char *name, bool read_only,
			  struct error_info *err);

/* Mounts source (a device or "server:/path") with fstype and options ("ro,noatime", may be
 * NULL) onto the directory name in dir_fd, opened without following symlinks.  For types with
 * a /sbin/mount.<type> helper (nfs) libmount runs it, as mount(8) would.  Userspace options
 * (_netdev, x-*) never reach the kernel: libmount records them in utab (/run/mount/utab),
 * where systemd and findmnt see them. */
int mnt_util_mount_at(const char *source, int dir_fd, const char *name, const char *fstype,
		      const char *options, struct error_info *err);

/* Unmounts target with umount2(2) flags (0, MNT_FORCE, MNT_DETACH; UMOUNT_NOFOLLOW is always
 * added).  Without MNT_DETACH, a busy mount is tried again a few times over some 60 ms (a
 * stat by another process makes it busy for a moment) before -EBUSY.  May block that long.
 * Once unmounted, utab's entry for target (userspace options) is dropped, if it has one.
 * Returns 0 when unmounted, -EINVAL when target is not a mount point. */
int mnt_util_umount(const char *target, int flags, struct error_info *err);

/* The mount ID (as in mountinfo) of the mount path is on, via statx(STATX_MNT_ID).
 * Returns 0 or -errno. */
int mnt_util_mount_id(const char *path, int *ret_id);
/* The same for name in the directory dir_fd: no walk of the whole path again. */
int mnt_util_mount_id_at(int dir_fd, const char *name, int *ret_id);

/* Whether path is the root of a mount (statx STATX_ATTR_MOUNT_ROOT), without following a
 * final symlink.  Returns 1, 0, or -errno. */
int mnt_util_is_mount_root(const char *path);
