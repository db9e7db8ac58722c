/* block-volume.h - what the plugins whose volume is a block device on this node after
 * attach (local's device, rbd's mapped image) do alike: the fsType their spec may give, the
 * raw block volume (volumeMode Block) bound from the attached device, and online growth of
 * the filesystem on it (through the dm-crypt mapping first when the volume is encrypted,
 * crypt-volume.h).  A plugin points its block_ops and expand_ops at these, or calls them
 * from its own op where it knows more (local finds its device from the spec's path when no
 * attachment names it).  Nothing here logs above debug. */
#pragma once

#include <stdbool.h>

#include "error.h"
#include "plugin.h"

/* The spec's fsType: none with volumeMode Block (a raw device is never formatted), else
 * absent or one the agent can format.  Returns 0 or -EINVAL naming the field. */
int block_volume_check_fstype(const struct volume_spec *spec, struct error_info *err);

/* block_ops.map_device: binds device_path (the attached device, or the held file for a
 * pod) onto target.  No device_path (no attachment) is -EINVAL. */
int block_volume_map(const struct volume_spec *spec, const char *device_path, bool read_only,
		     const struct mount_target *target, struct error_info *err);

/* expand_ops.expand: the attached device grew (a resized image, loop file or LVM volume);
 * grows its dm-crypt mapping when it has one, then the filesystem mounted at mount_path. */
int block_volume_expand(const struct volume_spec *spec, const char *device_path,
			const char *mount_path, unsigned long long new_size,
			unsigned long long *ret_capacity, struct error_info *err);

/* The tables of a plugin that needs nothing more than the above. */
extern const struct block_ops block_volume_block_ops;
extern const struct expand_ops block_volume_expand_ops;
