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
 * resolve to a block device under /dev.
 *
 * A directory volume may have a size (`size`, a quantity such as 512Mi): the directory gets a
 * project quota (lib/quota.h) before it is bound into a pod, and a filesystem that does not
 * enforce project quotas is refused then, with nothing mounted.  A spec without size lifts a
 * limit volagent set on the directory earlier.
 *
 * A directory may also be made per volume: `basePath` (with no `path`) and `volumeId` (the CSI
 * layer sets it to the request's volume id) name <basePath>/<volumeId>, created mode 0750 at
 * the first set-up below an existing basePath, reached without following a symlink; it stays
 * when the volume goes (deleting a volume's data is not the node's decision).
 *
 * An ephemeral volume (`ephemeral: "true"`; CSI: `csi.storage.k8s.io/ephemeral`) is a fresh
 * directory per published target (local-ephemeral.c), removed with its data when the target
 * is torn down. */
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
#include "block-volume.h"
#include "crypt-volume.h"
#include "device-fs.h"
#include "local-path-policy.h"
#include "macro.h"
#include "mount-util.h"
#include "path-util.h"
#include "local-ephemeral.h"
#include "local-provision.h"
#include "plugin.h"
#include "quantity.h"
#include "quota.h"

static bool local_can_support(const struct volume_spec *spec)
{
	return streq(spec->type, "local");
}

static bool is_ephemeral(const struct volume_spec *spec)
{
	return streq_ptr(volume_spec_get(spec, "ephemeral"), "true");
}

/* The directory of a directory volume into buf (PATH_MAX): `path`, <basePath>/<volumeId>, or
 * an ephemeral volume's for target (NULL: the volume as such, which has none).  NULL when the
 * spec names none (a validated spec always names one). */
static const char *dir_path(const struct volume_spec *spec, const char *target, char *buf)
{
	const char *path = volume_spec_get(spec, "path");
	const char *base = volume_spec_get(spec, "basePath");
	const char *id = volume_spec_get(spec, "volumeId");

	if (is_ephemeral(spec))
		return target ? local_ephemeral_path(target, buf) : NULL;
	if (path || !base || !id)
		return path;
	if (snprintf(buf, PATH_MAX, "%s/%s", base, id) >= PATH_MAX)
		return NULL;
	return buf;
}

static int validate_base_path(const struct volume_spec *spec, struct error_info *err)
{
	const char *base = volume_spec_get(spec, "basePath");
	const char *id = volume_spec_get(spec, "volumeId");
	char buf[PATH_MAX];

	if (volume_spec_get(spec, "path"))
		return err_set(err, -EINVAL,
			       "basePath: give either path (an existing directory or device) or "
			       "basePath (a directory per volume below it), not both");
	if (path_validate_absolute(base, "basePath", err) < 0)
		return err->code;
	if (!id)
		return err_set(err, -EINVAL,
			       "volumeId: required with basePath (the directory's name below it)");
	if (!path_is_safe_component(id))
		return err_set(err, -EINVAL,
			       "volumeId: \"%s\" is not usable as a directory name below basePath "
			       "([A-Za-z0-9._-], not . or ..)",
			       id);
	if (spec->block || volume_spec_get(spec, "fsType"))
		return err_set(err, -EINVAL,
			       "basePath: makes a directory; volumeMode Block and fsType need a "
			       "device path");
	if (!dir_path(spec, NULL, buf))
		return err_set(err, -ENAMETOOLONG, "basePath: too long with volumeId");
	return 0;
}

/* Encryption (crypt-volume.h) is for block devices only: a directory is never encrypted. */
static int local_validate_crypt(const struct volume_spec *spec, struct error_info *err)
{
	const char *path = volume_spec_get(spec, "path");

	if (crypt_volume_validate(spec, err) < 0)
		return err->code;
	if (crypt_volume_requested(spec) && (!path || !startswith(path, "/dev/")))
		return err_set(err, -EINVAL,
			       "encrypted: only a block device (a path under /dev) can be "
			       "encrypted, not a directory");
	return 0;
}

static int local_validate(const struct volume_spec *spec, struct error_info *err)
{
	const char *path = volume_spec_get(spec, "path");
	const char *fstype = volume_spec_get(spec, "fsType");

	for (size_t i = 0; i < spec->n_attrs; i++) {
		const char *k = spec->attrs[i].key;
		if (!streq(k, "path") && !streq(k, "fsType") && !streq(k, "size") &&
		    !streq(k, "basePath") && !streq(k, "volumeId") && !streq(k, "ephemeral") &&
		    !crypt_volume_is_attr(k))
			return err_set(err, -EINVAL,
				       "%s: unknown field (local takes path, fsType, size, "
				       "basePath, volumeId, ephemeral, encrypted)",
				       k);
	}
	if (volume_spec_get(spec, "ephemeral")) {
		const char *e = volume_spec_get(spec, "ephemeral");

		if (!streq(e, "true") && !streq(e, "false"))
			return err_set(err, -EINVAL, "ephemeral: \"%s\" is not true or false", e);
		if (streq(e, "true") &&
		    (path || volume_spec_get(spec, "basePath") || fstype || spec->block))
			return err_set(err, -EINVAL,
				       "ephemeral: a fresh directory of the node's; give no path, "
				       "basePath, fsType or volumeMode Block with it");
	}
	if (volume_spec_get(spec, "size")) {
		uint64_t bytes;

		if (quantity_parse_bytes(volume_spec_get(spec, "size"), "size", &bytes, err) < 0)
			return err->code;
		if (spec->block || fstype)
			return err_set(err, -EINVAL,
				       "size: only a directory volume takes a size (a device's "
				       "size is the device's)");
	}
	if (local_validate_crypt(spec, err) < 0)
		return err->code;
	if (is_ephemeral(spec))
		return 0;
	if (volume_spec_get(spec, "basePath"))
		return validate_base_path(spec, err);
	if (volume_spec_get(spec, "volumeId"))
		return err_set(err, -EINVAL, "volumeId: only with basePath");
	if (!path)
		return err_set(err, -EINVAL, "path: required (or basePath)");
	if (path_validate_absolute(path, "path", err) < 0)
		return err->code;
	if (local_path_policy_check(path, err) < 0)
		return err->code;
	return block_volume_check_fstype(spec, err);
}

static char *local_get_volume_name(const struct volume_spec *spec)
{
	char buf[PATH_MAX];
	const char *size = volume_spec_get(spec, "size");

	/* Ephemeral: each pod's directory is its own; the name only tells specs apart. */
	if (is_ephemeral(spec))
		return strdup_printf("local:ephemeral%s%s", size ? ":" : "", size ? size : "");
	return strdup_printf("local:%s", dir_path(spec, NULL, buf));
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

/* Gives the directory src (path) the spec's size, or lifts a size set earlier when the spec
 * has none (best effort: a directory volume without a size never fails on it).  Before the
 * bind, so a refusal leaves nothing mounted. */
static int apply_size(const struct volume_spec *spec, int src, const char *path,
		      struct error_info *err)
{
	const char *size = volume_spec_get(spec, "size");
	_cleanup_close_ int fd = -1;
	uint64_t bytes = 0, recorded;
	int r;

	if (size) {
		r = quantity_parse_bytes(size, "size", &bytes, err);
		if (r < 0)
			return r;
	}
	/* src is an O_PATH descriptor; the ioctls need the directory opened (its "." is the
	 * same directory, reached without a path lookup). */
	fd = openat(src, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!size) {
		struct error_info ignored = { 0 };

		if (fd >= 0)
			(void)quota_prj_clear_size(fd, path, &ignored);
		return 0;
	}
	if (fd < 0)
		return err_set(err, -errno, "local path %s: %s", path, strerror(errno));
	/* A provisioned volume grown by ControllerExpandVolume keeps its larger size: the
	 * volume_context kubelet sends still has the size it was made with. */
	if (local_prov_dir_enforced_size(fd, &recorded) == 1 && recorded > bytes)
		bytes = recorded;
	return quota_prj_set_size(fd, path, path, bytes, NULL, err);
}

/* What the pod's bind comes from: the device's node-wide mount, or the directory (buf
 * PATH_MAX). */
static const char *bind_source(const struct volume_mounter *m, const char *target, char *buf)
{
	return m->device_mount_path ? m->device_mount_path : dir_path(m->spec, target, buf);
}

/* Opens the directory of a directory volume (O_PATH, no symlink on the way): `path` as it
 * is, or <basePath>/<volumeId>, made (0750) below an existing basePath when missing. */
static int open_dir(const struct volume_spec *spec, const char *path, const char *target,
		    int *ret_fd, struct error_info *err)
{
	const char *base = volume_spec_get(spec, "basePath");
	_cleanup_close_ int base_fd = -1;
	int r;

	if (!path)
		return err_set(err, -ENAMETOOLONG, "the volume's directory path is too long");
	if (is_ephemeral(spec))
		return local_ephemeral_open(target, ret_fd, err);
	if (volume_spec_get(spec, "path") || !base)
		return path_open_dir_below("/", path + 1, false, 0, ret_fd, err);
	r = path_open_dir_below("/", base + 1, false, 0, &base_fd, err);
	if (r < 0)
		return err_prefix(err, "basePath");
	return path_open_dir_below_at(base_fd, base, volume_spec_get(spec, "volumeId"), true, 0750,
				      ret_fd, err);
}

static int local_check_set_up(const struct volume_mounter *m, const char *target,
			      struct mount_seen *seen, struct error_info *err)
{
	char buf[PATH_MAX];
	const char *path = dir_path(m->spec, target, buf);
	_cleanup_close_ int src = -1;
	int r;

	if (m->spec->block)
		return m->device_mount_path
			       ? block_map_check(target, m->device_mount_path, m->read_only)
			       : 0;
	r = bind_check_seen(target, bind_source(m, target, buf), m->read_only, seen);
	if (r != 1 || m->device_mount_path || !volume_spec_get(m->spec, "size"))
		return r;
	/* An adopted directory with a size (a restart) gets the spec's size now; one that
	 * cannot be set keeps the mount and is retried.  (A size removed from the spec is
	 * lifted at the next set-up, not here: adopting thousands of volumes stays a check of
	 * the mount table.) */
	r = open_dir(m->spec, path, target, &src, err);
	if (r == 0)
		r = apply_size(m->spec, src, path, err);
	return r < 0 ? r : 1;
}

static int local_set_up_at(const struct volume_mounter *m, const struct mount_target *target,
			   struct error_info *err)
{
	_cleanup_close_ int src = -1;
	char buf[PATH_MAX];
	int r;

	if (m->device_mount_path) {
		src = bind_open_device_mount(m->device_mount_path, err);
	} else {
		/* A directory source may contain no symlink: a link could point the bind
		 * anywhere. */
		const char *path = dir_path(m->spec, target->path, buf);
		struct stat st;

		if (crypt_volume_requested(m->spec))
			return err_set(err, -ENOTBLK,
				       "path: %s is no block device; an encrypted volume needs one",
				       path);
		r = open_dir(m->spec, path, target->path, &src, err);
		if (r == -ENOTDIR && path && stat(path, &st) == 0 && S_ISBLK(st.st_mode))
			return err_set(err, -EPERM,
				       "path: %s is a block device outside /dev; name the device "
				       "by its path under /dev (or a /dev/disk/by-* link)",
				       path);
		if (r < 0)
			return err_prefix(err, "local path");
		/* An ephemeral volume's directory is the agent's own, made under its dir. */
		r = is_ephemeral(m->spec) ? 0 : local_path_policy_check_dir(src, path, err);
		if (r < 0)
			return r;
		r = apply_size(m->spec, src, path, err);
		if (r < 0)
			return r;
	}
	if (src < 0)
		return src;
	return bind_set_up(src, bind_source(m, target->path, buf), target, m->read_only, err);
}

static int local_tear_down_at(const char *volume_name, const char *pod_uid, const char *target,
			      struct error_info *err)
{
	/* An ephemeral volume's directory goes with its target (none: nothing to do), first:
	 * one that cannot be removed whole (a mount left inside it) keeps the target mounted,
	 * so that the failure stays recorded and is retried. */
	int r = local_ephemeral_remove(target, err);

	if (r < 0)
		return r;
	r = mnt_util_umount(target, 0, err);
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
	_cleanup_free_ char *volume_name = NULL;
	char dev[PATH_MAX];
	int r = resolve_device(volume_spec_get(spec, "path"), dev, err);

	if (r < 0)
		return r;
	volume_name = local_get_volume_name(spec);
	ret->device_path = strdup(dev);
	if (!ret->device_path || !volume_name)
		return -ENOMEM;
	r = crypt_volume_attach(spec, volume_name, read_only, ret, err);
	if (r < 0)
		device_attachment_clear(ret);
	return r;
}

/* Only an encrypted volume has something to undo: its mapping. */
static int local_detach(const struct volume_spec *spec, const struct device_attachment *att,
			struct error_info *err)
{
	return crypt_volume_detach(att, err);
}

/* Without an attachment (a journal of an older agent) the device is the spec's path: never
 * for an encrypted volume, whose device is its mapping. */
static int spec_device(const struct volume_spec *spec, const char *device_path, const char **ret,
		       struct error_info *err)
{
	if (!device_path && crypt_volume_requested(spec))
		return err_set(err, -EINVAL, "%s: encrypted, but no mapping is known for it",
			       volume_spec_get(spec, "path"));
	*ret = device_path ? device_path : volume_spec_get(spec, "path");
	return 0;
}

static int local_mount_device(const struct volume_spec *spec, const char *device_path,
			      bool read_only, const struct mount_target *target,
			      struct error_info *err)
{
	char dev[PATH_MAX];
	const char *path = NULL;
	int r;

	if (spec_device(spec, device_path, &path, err) < 0)
		return err->code;
	/* A journal of an older agent may have recorded the spec's path (a link) as the device. */
	r = resolve_device(path, dev, err);
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
	const char *path = NULL;
	char dev[PATH_MAX];
	int r;

	if (!device_path) {
		if (spec_device(spec, NULL, &path, err) < 0)
			return err->code;
		if (!local_uses_device(spec))
			return err_set(err, -ENOTBLK,
				       "%s is no block device; volumeMode Block needs one",
				       volume_spec_get(spec, "path"));
		r = resolve_device(path, dev, err);
		if (r < 0)
			return r;
		device_path = dev;
	}
	return block_volume_map(spec, device_path, read_only, target, err);
}

/* A block device volume's filesystem grows online after the device grew (a loop file, an
 * LVM volume resized by hand). */
/* A directory volume with a size (a project quota) published at mount_path: its limit raised
 * to new_size (never lowered).  One without a size has no capacity of its own: 0, nothing
 * done, *ret_capacity 0. */
static int expand_dir(const char *mount_path, unsigned long long new_size,
		      unsigned long long *ret_capacity, struct error_info *err)
{
	_cleanup_close_ int fd = open(mount_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct quota_usage q;
	int r;

	*ret_capacity = 0;
	if (fd < 0)
		return err_set(err, -errno, "%s: %s", mount_path, strerror(errno));
	if (quota_prj_dir_usage(fd, &q) != 1)
		return 0;
	*ret_capacity = q.bytes_limit;
	if (new_size <= q.bytes_limit)
		return 0;
	r = quota_prj_set_size(fd, mount_path, mount_path, new_size, NULL, err);
	if (r < 0)
		return r;
	*ret_capacity = new_size;
	return 0;
}

static int local_expand(const struct volume_spec *spec, const char *device_path,
			const char *mount_path, unsigned long long new_size,
			unsigned long long *ret_capacity, struct error_info *err)
{
	const char *path = device_path ? device_path : spec ? volume_spec_get(spec, "path") : NULL;
	char dev[PATH_MAX];
	int r;

	/* Neither a device nor a spec: a directory volume (csi-node.c asks so). */
	if (!device_path && !spec)
		return expand_dir(mount_path, new_size, ret_capacity, err);
	if (!path)
		return err_set(err, -EINVAL, "%s: no device is known for it", mount_path);
	r = resolve_device(path, dev, err);
	if (r < 0)
		return r;
	return block_volume_expand(spec, dev, mount_path, new_size, ret_capacity, err);
}

static const struct volume_ops local_ops = {
	.can_support = local_can_support,
	.validate = local_validate,
	.get_volume_name = local_get_volume_name,
	.set_up_at = local_set_up_at,
	.tear_down_at = local_tear_down_at,
	.remove_orphans = local_ephemeral_remove_orphans,
	.release_target = local_ephemeral_remove,
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
	.detach = local_detach,
};

static const struct block_ops local_block_ops = {
	.map_device = local_map_device,
	.unmap_device = block_map_unbind,
};

static const struct expand_ops local_expand_ops = {
	.expand = local_expand,
};

/* The plugin's flags and config keys (plugin-option.h). */
static const struct plugin_option local_options[] = {
	{ "local-ephemeral-dir", PLUGIN_OPTION_STRING, "",
	  "where ephemeral local volumes get their directories (empty: <state-dir>/"
	  "local-ephemeral); its own xfs or ext4 with project quotas for sizes",
	  local_ephemeral_set_dir },
	{ "local-path-prefix", PLUGIN_OPTION_STRING, "",
	  "local volumes only below this dir (repeatable; in the config file a string or a "
	  "list); empty: any dir the path policy allows",
	  local_path_policy_add_prefix },
	{ 0 },
};

const struct volume_plugin local_plugin = {
	.name = "local",
	.flags = PLUGIN_NODE_LOCAL,
	.ops = &local_ops,
	.device = &local_device_ops,
	.attach = &local_attach_ops,
	.block = &local_block_ops,
	.expand = &local_expand_ops,
	.options = local_options,
};
