/* nfs.c - the "nfs" plugin: an export of an NFS server, mounted with the kernel's NFS client
 * through libmount, which runs mount.nfs (nfs-common) as mount(8) does on any node.  This
 * file is its ops tables; the rest of the folder does the work:
 *   nfs-spec.c       the spec checked and made a struct nfs_volume; its name; masked texts
 *   nfs-settings.c   the plugin's options (--nfs-mode, --nfs-timeout, ...)
 *   nfs-mount.c      mount, bind, unmount (escalating) and statfs, in killable children
 *   nfs-mountinfo.c  what is mounted at a path, from mountinfo, never by touching the path
 *   nfs-server.c     the server's reachability check and its gate (lib/server-health.h)
 *   nfs-child.c      one blocking call in a child with a deadline (lib/process.h)
 *   nfs-probe.c      the NFS NULL call that tells a down server answers again
 *
 * Spec: pod spec files give {"nfs": {"server": ..., "path": ..., "readOnly": bool}} and the
 * volume's "mountOptions" (Kubernetes' names); a CSI volume_context gives type=nfs, server,
 * share (or path) and mountOptions (one comma-separated string), plus the capability's mount
 * flags.  The mount is source "server:/path" ("[v6addr]:/path") with the spec's options,
 * plus "ro" when read-only, and "nosuid" and "nodev" unless the options ask "suid" or "dev"
 * (as on the agent's device mounts; kubelet's nfs plugin adds neither; mount.nfs itself
 * adds addr= and clientaddr=).
 *
 * Modes (--nfs-mode, this plugin's option):
 *   shared (default): one NFS mount per node per export and options, at the node-wide dir the
 *     core gives mount_device (or kubelet's staging dir with CSI), bind-mounted into each pod;
 *     unmounted when the last pod goes.
 *   direct: each pod dir gets its own NFS mount, as kubelet's in-tree plugin does.
 *
 * A dead server never blocks an agent thread: every mount, unmount and statfs of an NFS path
 * runs in a killable child (nfs-child.h) with a deadline (--nfs-timeout); a stuck unmount
 * is escalated to MNT_FORCE, then MNT_DETACH, each after --nfs-unmount-escalate.  Whether a
 * path is mounted, and by what, is read from /proc/self/mountinfo, never by stat()ing the
 * path.  Before a mount, a TCP connect to the server's port (port= or 2049) with a short
 * timeout (--nfs-connect-timeout) turns "server down" into an error in milliseconds.
 *
 * Every message this plugin produces has the values of sensitive mount options masked (see
 * mount-options.h; the spec attribute "sensitiveMountOptions" lists more option names). */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "macro.h"
#include "nfs-mount.h"
#include "nfs-mountinfo.h"
#include "nfs-settings.h"
#include "nfs-spec.h"
#include "plugin.h"

static bool nfs_can_support(const struct volume_spec *spec)
{
	return streq(spec->type, "nfs");
}

static bool nfs_uses_device(const struct volume_spec *spec)
{
	return !nfs_settings.direct;
}

/* Reads the target's entry itself (seen is not used: nfs compares the source and the
 * superblock's root, which the lean table does not keep). */
static int nfs_check_set_up(const struct volume_mounter *m, const char *target,
			    struct mount_seen *seen, struct error_info *err)
{
	struct nfs_volume v;
	struct nfs_mount_entry e, d;
	char canon[PATH_MAX], dcanon[PATH_MAX];
	int r;

	r = nfs_canonical_path(target, canon, sizeof(canon));
	if (r < 0)
		return r == -ENOENT ? 0 : err_set(err, r, "%s: %s", target, strerror(-r));
	r = nfs_mountinfo_lookup(canon, &e);
	if (r <= 0)
		return r;
	if (m->device_mount_path) {
		r = nfs_canonical_path(m->device_mount_path, dcanon, sizeof(dcanon));
		if (r < 0)
			return r == -ENOENT ? 0 : r;
		r = nfs_mountinfo_lookup(dcanon, &d);
		if (r <= 0)
			return r;
		return e.devno == d.devno && streq(e.root, d.root) && e.ro == m->read_only;
	}
	r = nfs_volume_load(m->spec, m->read_only, &v, err);
	if (r < 0) {
		nfs_volume_done(&v);
		return r;
	}
	r = nfs_is_nfs_type(e.fstype) && streq(e.source, v.source) && e.ro == m->read_only;
	nfs_volume_done(&v);
	return r;
}

static int nfs_set_up_at(const struct volume_mounter *m, const struct mount_target *target,
			 struct error_info *err)
{
	struct nfs_volume v;
	char canon[PATH_MAX];
	int r = nfs_check_set_up(m, target->path, &(struct mount_seen){ 0 }, err);

	if (r == 1)
		return 0;
	r = nfs_canonical_target(target, canon, sizeof(canon));
	if (r < 0)
		return err_set(err, r, "%s: %s", target->path, strerror(-r));
	r = nfs_mountinfo_lookup(canon, NULL);
	if (r == 1)
		return err_set(err, -EBUSY,
			       "%s is already a mount point of something else; refusing to mount "
			       "over it",
			       target->path);
	r = nfs_volume_load(m->spec, m->read_only, &v, err);
	if (r < 0)
		goto out;
	if (m->device_mount_path) {
		r = nfs_bind_at(m->device_mount_path, target, canon, m->read_only, err);
		goto out;
	}
	r = nfs_mount_at(&v, target, canon, err);
out:
	return nfs_volume_finish(&v, r, err);
}

static int nfs_tear_down_at(const char *volume_name, const char *pod_uid, const char *target,
			    struct error_info *err)
{
	char canon[PATH_MAX];
	int r = nfs_canonical_path(target, canon, sizeof(canon));

	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return err_set(err, r, "%s: %s", target, strerror(-r));
	r = nfs_unmount(canon, err);
	return r == -EINVAL ? 0 : r;
}

static int nfs_mount_device(const struct volume_spec *spec, const char *device_path, bool read_only,
			    const struct mount_target *target, struct error_info *err)
{
	struct nfs_volume v;
	char canon[PATH_MAX];
	int r = nfs_volume_load(spec, read_only, &v, err);

	if (r < 0)
		goto out;
	r = nfs_canonical_target(target, canon, sizeof(canon));
	if (r < 0) {
		err_set(err, r, "%s: %s", target->path, strerror(-r));
		goto out;
	}
	r = nfs_mount_at(&v, target, canon, err);
out:
	return nfs_volume_finish(&v, r, err);
}

static int nfs_unmount_device(const char *path, struct error_info *err)
{
	return nfs_tear_down_at(NULL, NULL, path, err);
}

static int nfs_check_health(const struct volume_spec *spec, const char *path,
			    struct error_info *err)
{
	return nfs_statfs(path, err);
}

static const struct volume_ops nfs_ops = {
	.can_support = nfs_can_support,
	.validate = nfs_spec_validate,
	.get_volume_name = nfs_spec_volume_name,
	.set_up_at = nfs_set_up_at,
	.tear_down_at = nfs_tear_down_at,
	.check_set_up = nfs_check_set_up,
	.construct_spec = nfs_spec_from_name,
	.check_health = nfs_check_health,
};

/* No attach: mount_device gets no device and mounts the export at the staging dir. */
static const struct device_mount_ops nfs_device_ops = {
	.uses_device = nfs_uses_device,
	.mount_device = nfs_mount_device,
	.unmount_device = nfs_unmount_device,
};

const struct volume_plugin nfs_plugin = {
	.name = "nfs",
	.ops = &nfs_ops,
	.device = &nfs_device_ops,
	.options = nfs_options,
};
