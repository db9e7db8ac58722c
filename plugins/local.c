/* local.c - the "local" plugin: a directory or a block device already on this node.
 *
 * A directory is bind-mounted into each pod.  A block device is probed with libblkid,
 * formatted only when it carries no signature at all, mounted once at its node-wide path, and
 * bind-mounted from there into each pod (kubelet's local volume plugin does the same for
 * block-backed local PVs).  With volumeMode Block the device is neither formatted nor
 * mounted: it is checked (it must be a block device) and bound onto a held file, and each
 * pod's file is a bind of that (block-map.c).
 *
 * Symlinks: a directory path may contain none (a link could point the bind anywhere).  A
 * device path may be a udev link (/dev/disk/by-id/...), but no link outside /dev, and must
 * resolve to a block device under /dev. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bind-util.h"
#include "block-map.h"
#include "blkdev.h"
#include "device-fs.h"
#include "macro.h"
#include "mount-util.h"
#include "path-util.h"
#include "plugin.h"

static bool local_can_support(const struct volume_spec *spec)
{
	return streq(spec->type, "local");
}

static int local_validate(const struct volume_spec *spec, struct error_info *err)
{
	const char *path = volume_spec_get(spec, "path");
	const char *fstype = volume_spec_get(spec, "fsType");

	for (size_t i = 0; i < spec->n_attrs; i++) {
		const char *k = spec->attrs[i].key;
		if (!streq(k, "path") && !streq(k, "fsType"))
			return err_set(err, -EINVAL, "%s: unknown field (local takes path, fsType)",
				       k);
	}
	if (!path)
		return err_set(err, -EINVAL, "path: required");
	if (path_validate_absolute(path, "path", err) < 0)
		return err->code;
	if (fstype && spec->block)
		return err_set(err, -EINVAL,
			       "fsType: a volume with volumeMode Block is never formatted; give "
			       "no fsType");
	if (fstype && !blkdev_can_format(fstype))
		return err_set(err, -EINVAL, "fsType: \"%s\" is not supported (ext4, xfs, btrfs)",
			       fstype);
	return 0;
}

static char *local_get_volume_name(const struct volume_spec *spec)
{
	return strdup_printf("local:%s", volume_spec_get(spec, "path"));
}

/* A block device is looked at (stat) for raw block volumes and for paths under /dev only:
 * a device elsewhere is refused anyway (resolve_device takes only a path under /dev), so a
 * filesystem volume's path outside /dev is a directory without a stat per spec load (the
 * reconciler thread loads thousands); a device node there is refused at set-up. */
static bool local_uses_device(const struct volume_spec *spec)
{
	const char *path = volume_spec_get(spec, "path");
	struct stat st;

	if (!path || (!spec->block && !startswith(path, "/dev/")))
		return false;
	return stat(path, &st) == 0 && S_ISBLK(st.st_mode);
}

/* Resolves a device path (udev links allowed) to a block device under /dev. */
static int resolve_device(const char *path, char *ret, struct error_info *err)
{
	char real[PATH_MAX];
	struct stat st;

	if (!realpath(path, real))
		return err_set(err, -errno, "device %s: %s", path, strerror(errno));
	if (!startswith(real, "/dev/"))
		return err_set(err, -EPERM, "device %s resolves to %s, outside /dev; refusing it",
			       path, real);
	/* Links are udev's business: one outside /dev names a device the spec did not. */
	if (!startswith(path, "/dev/") && !streq(path, real))
		return err_set(err, -EPERM,
			       "device %s is a link to %s; name the device (or its /dev/disk/by-* "
			       "link) instead",
			       path, real);
	if (stat(real, &st) < 0)
		return err_set(err, -errno, "device %s: %s", real, strerror(errno));
	if (!S_ISBLK(st.st_mode))
		return err_set(err, -ENOTBLK, "device %s is not a block device", real);
	snprintf(ret, PATH_MAX, "%s", real);
	return 0;
}

/* What the pod's bind comes from: the device's node-wide mount, or the directory. */
static const char *bind_source(const struct volume_mounter *m)
{
	return m->device_mount_path ? m->device_mount_path : volume_spec_get(m->spec, "path");
}

static int local_check_set_up(const struct volume_mounter *m, const char *target,
			      struct mount_seen *seen, struct error_info *err)
{
	if (m->spec->block)
		return m->device_mount_path
			       ? block_map_check(target, m->device_mount_path, m->read_only)
			       : 0;
	return bind_check_seen(target, bind_source(m), m->read_only, seen);
}

static int local_set_up_at(const struct volume_mounter *m, const struct mount_target *target,
			   struct error_info *err)
{
	_cleanup_close_ int src = -1;
	int r;

	if (m->device_mount_path) {
		src = bind_open_device_mount(m->device_mount_path, err);
	} else {
		/* A directory source may contain no symlink: a link could point the bind
		 * anywhere. */
		const char *path = volume_spec_get(m->spec, "path");
		struct stat st;

		r = path_open_dir_below("/", path + 1, false, 0, &src, err);
		if (r == -ENOTDIR && stat(path, &st) == 0 && S_ISBLK(st.st_mode))
			return err_set(err, -EPERM,
				       "path: %s is a block device outside /dev; name the device "
				       "by its path under /dev (or a /dev/disk/by-* link)",
				       path);
		if (r < 0)
			return err_prefix(err, "local path");
	}
	if (src < 0)
		return src;
	return bind_set_up(src, bind_source(m), target, m->read_only, err);
}

static int local_tear_down_at(const char *volume_name, const char *pod_uid, const char *target,
			      struct error_info *err)
{
	int r = mnt_util_umount(target, 0, err);

	return r == -EINVAL ? 0 : r;
}

static int local_construct_spec(const char *volume_name, const char *mount_path,
				struct volume_spec **ret_spec, struct error_info *err)
{
	_cleanup_volume_spec_ struct volume_spec *s = NULL;

	if (!startswith(volume_name, "local:/"))
		return err_set(err, -EINVAL, "%s is not a local volume name", volume_name);
	s = volume_spec_new("local");
	if (!s || volume_spec_set(s, "path", volume_name + strlen("local:")) < 0)
		return -ENOMEM;
	*ret_spec = TAKE_PTR(s);
	return 0;
}

/* The device is on the node already: attaching it is resolving the path the spec names (a
 * udev link is fine) to the block device under /dev, which the journal then records. */
static int local_attach(const struct volume_spec *spec, bool read_only,
			struct device_attachment *ret, struct error_info *err)
{
	char dev[PATH_MAX];
	int r = resolve_device(volume_spec_get(spec, "path"), dev, err);

	if (r < 0)
		return r;
	ret->device_path = strdup(dev);
	return ret->device_path ? 0 : -ENOMEM;
}

static int local_mount_device(const struct volume_spec *spec, const char *device_path,
			      bool read_only, const struct mount_target *target,
			      struct error_info *err)
{
	char dev[PATH_MAX];
	int r;

	/* A journal of an older agent may have recorded the spec's path (a link) as the device. */
	r = resolve_device(device_path ? device_path : volume_spec_get(spec, "path"), dev, err);
	if (r < 0)
		return r;
	return device_fs_mount(dev, volume_spec_get(spec, "fsType"), NULL, spec->mount_options,
			       read_only, target, err);
}

static int local_unmount_device(const char *path, struct error_info *err)
{
	int r = mnt_util_umount(path, 0, err);

	return r == -EINVAL || r == -ENOENT ? 0 : r;
}

/* A raw block volume: device_path is what attach resolved (node-wide) or the held file (a
 * pod); NULL only when the spec's path is no block device (uses_device said no), which is
 * refused here. */
static int local_map_device(const struct volume_spec *spec, const char *device_path, bool read_only,
			    const struct mount_target *target, struct error_info *err)
{
	char dev[PATH_MAX];
	int r;

	if (!device_path) {
		if (!local_uses_device(spec))
			return err_set(err, -ENOTBLK,
				       "%s is no block device; volumeMode Block needs one",
				       volume_spec_get(spec, "path"));
		r = resolve_device(volume_spec_get(spec, "path"), dev, err);
		if (r < 0)
			return r;
		device_path = dev;
	}
	return block_map_bind(device_path, target, read_only, err);
}

static int local_unmap_device(const char *target, struct error_info *err)
{
	return block_map_unbind(target, err);
}

/* A block device volume's filesystem grows online after the device grew (a loop file, an
 * LVM volume resized by hand). */
static int local_expand(const struct volume_spec *spec, const char *device_path,
			const char *mount_path, unsigned long long new_size,
			unsigned long long *ret_capacity, struct error_info *err)
{
	const char *path = device_path ? device_path : spec ? volume_spec_get(spec, "path") : NULL;
	char dev[PATH_MAX];
	int r;

	if (!path)
		return err_set(err, -EINVAL, "%s: no device is known for it", mount_path);
	r = resolve_device(path, dev, err);
	if (r < 0)
		return r;
	return device_fs_expand(dev, mount_path, new_size, ret_capacity, err);
}

static const struct volume_ops local_ops = {
	.can_support = local_can_support,
	.validate = local_validate,
	.get_volume_name = local_get_volume_name,
	.set_up_at = local_set_up_at,
	.tear_down_at = local_tear_down_at,
	.check_set_up = local_check_set_up,
	.construct_spec = local_construct_spec,
};

static const struct device_mount_ops local_device_ops = {
	.uses_device = local_uses_device,
	.mount_device = local_mount_device,
	.unmount_device = local_unmount_device,
};

static const struct attach_ops local_attach_ops = {
	.attach = local_attach,
};

static const struct block_ops local_block_ops = {
	.map_device = local_map_device,
	.unmap_device = local_unmap_device,
};

static const struct expand_ops local_expand_ops = {
	.expand = local_expand,
};

const struct volume_plugin local_plugin = {
	.name = "local",
	.flags = PLUGIN_NODE_LOCAL,
	.ops = &local_ops,
	.device = &local_device_ops,
	.attach = &local_attach_ops,
	.block = &local_block_ops,
	.expand = &local_expand_ops,
};
