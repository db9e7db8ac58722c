/* block-volume.c - see block-volume.h. */
#include <errno.h>

#include "blkdev.h"
#include "block-map.h"
#include "block-volume.h"
#include "crypt-volume.h"
#include "device-fs.h"

int block_volume_check_fstype(const struct volume_spec *spec, struct error_info *err)
{
	const char *fstype = volume_spec_get(spec, "fsType");

	if (fstype && spec->block)
		return err_set(err, -EINVAL,
			       "fsType: a volume with volumeMode Block is never formatted; give "
			       "no fsType");
	if (fstype && !blkdev_can_format(fstype))
		return err_set(err, -EINVAL, "fsType: \"%s\" is not supported (ext4, xfs, btrfs)",
			       fstype);
	return 0;
}

int block_volume_map(const struct volume_spec *spec, const char *device_path, bool read_only,
		     const struct mount_target *target, struct error_info *err)
{
	if (!device_path)
		return err_set(err, -EINVAL, "%s volumes are mapped through an attached device",
			       spec->type);
	return block_map_bind(device_path, target, read_only, err);
}

int block_volume_expand(const struct volume_spec *spec, const char *device_path,
			const char *mount_path, unsigned long long new_size,
			unsigned long long *ret_capacity, struct error_info *err)
{
	int r = crypt_volume_grow(device_path, err);

	return r < 0 ? r : device_fs_expand(device_path, mount_path, new_size, ret_capacity, err);
}

const struct block_ops block_volume_block_ops = {
	.map_device = block_volume_map,
	.unmap_device = block_map_unbind,
};

const struct expand_ops block_volume_expand_ops = {
	.expand = block_volume_expand,
};
