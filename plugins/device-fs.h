/* device-fs.h - the format-once-and-mount step shared by the plugins whose volumes are block
 * devices (local, rbd): probe the device with libblkid, format it only when it carries no
 * signature at all (and the volume is writable), and mount it on the node-wide target with
 * the spec's mount options and "ro" when read-only. */
#pragma once

#include <stdbool.h>

#include "error.h"
#include "plugin.h"

/* Mounts the block device dev on target.  fstype (may be NULL) is what the spec asked for,
 * default_fstype (may be NULL: leave it to the probe, ext4 for a blank device) what to
 * format with when the spec says nothing.  mount_options (NULL-terminated, may be NULL) are
 * passed on whole, "ro" added when read_only, "nosuid" and "nodev" unless the spec asks "suid"
 * or "dev": a list the kernel cannot take whole (longer than
 * a page) is refused with -E2BIG naming mountOptions, never shortened.  Idempotent: 0 when
 * target already is a mount of dev; -EBUSY when it is a mount of something else.
 * target->fs_uuid, when set, is the filesystem the volume's record names: a device that
 * probes blank is then refused with -EUCLEAN (never formatted), one holding another
 * filesystem with -ESTALE (blkdev_prepare_for_mount); target->ret_fs_uuid gets the UUID of
 * the filesystem mounted (left as it was when the target was mounted already).
 * Returns: 0 on success, negative errno with err filled on failure. */
int device_fs_mount(const char *dev, const char *fstype, const char *default_fstype,
		    char *const *mount_options, bool read_only, const struct mount_target *target,
		    struct error_info *err);

/* The options device_fs_mount passes to mount(2): mount_options joined with ',', ",ro"
 * when read_only, and ",nosuid" and ",nodev" unless mount_options has "suid" or "dev".  Returns 0 with a new string in *ret ("" for none), -E2BIG (err names
 * mountOptions) when it is longer than the kernel takes, or -ENOMEM. */
int device_fs_join_options(char *const *mount_options, bool read_only, char **ret,
			   struct error_info *err);

/* resize2fs and xfs_growfs run through lib/process.h with this deadline. */
#define DEVICE_FS_GROW_TIMEOUT_MS (10 * 60 * 1000)

/* Grows the ext4 or xfs filesystem mounted at mount_path, on the block device dev, to fill
 * the device (the expand op of local and rbd).  new_size: the size asked for, 0 for any; a
 * device smaller than that is -ERANGE.  Stores the device's size in *ret_capacity.  Other
 * errors: -EOPNOTSUPP (not ext4 or xfs), -EPERM (ext4 online resize needs
 * CAP_SYS_RESOURCE), -ETIMEDOUT (the tool ran past its deadline and was stopped), -EIO (the
 * tool failed; err has its first line), or the -errno of looking at the mount. */
int device_fs_expand(const char *dev, const char *mount_path, unsigned long long new_size,
		     unsigned long long *ret_capacity, struct error_info *err);
