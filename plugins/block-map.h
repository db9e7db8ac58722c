/* block-map.h - raw block volumes (volumeMode: Block): a block device node bind-mounted onto a
 * file, the way kubelet hands a pod a device (its volumeDevices layout).  One implementation
 * for every plugin with block ops: the node-wide hold (the attached device onto a file under
 * <root>/plugins/kubernetes.io/<plugin>/volumeDevices/) and each pod's file (a bind of the
 * held one) are made and undone here. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "plugin.h"

/* The name of the held file in a volume's volumeDevices dir. */
#define BLOCK_MAP_HELD_NAME "dev"

/* Whether target is the root of a bind of the block device that device (a device node, or a
 * file holding a bind of one) is, read-only exactly when read_only: 1 yes, 0 no (not mounted,
 * or something else), -errno when it cannot be told. */
int block_map_check(const char *target, const char *device, bool read_only);

/* Binds device (a block device node, or a file holding a bind of one) onto target, creating
 * the target file (mode 0600) when it is missing; target->parent_fd must exist.  Read-only
 * binds are never writable, not even for a moment; a read-only bind of a held file (a pod's
 * file) whose device is writable binds a read-only loop device over it, which the kernel
 * refuses writes to (a read-only mount alone does not stop writes to a device node).
 * Idempotent: 1 (nothing done) when target already holds the device as asked, 0 when the
 * bind was made.  A target that is a directory or another mount is refused (-EISDIR,
 * -EBUSY); a device that is not a block device is -ENOTBLK.  A file made here is removed
 * again when the bind fails. */
int block_map_bind(const char *device, const struct mount_target *target, bool read_only,
		   struct error_info *err);

/* Unmounts the bind at target (lazily when the device is gone) and removes the file.  0 when
 * neither is there.  A directory at target is left alone (-EISDIR). */
int block_map_unbind(const char *target, struct error_info *err);

/* The size in bytes of the block device at path (a device node or a bind of one). */
int block_map_size(const char *path, uint64_t *ret_bytes, struct error_info *err);

/* block_map_size() after making the kernel re-read the device's size where it does not on
 * its own: a loop device's backing file grew (LOOP_SET_CAPACITY; an rbd image seen through
 * rbd-fuse is such a file).  krbd and rbd-nbd follow an image's resize by themselves. */
int block_map_reread_size(const char *path, uint64_t *ret_bytes, struct error_info *err);
