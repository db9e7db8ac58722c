/* plugin.h - the volume plugin vtable, modelled on kubelet's VolumePlugin.
 *
 * A plugin turns a volume_spec into mounts.  Every plugin has pod-level ops (set a volume up
 * in a pod's volume directory, tear it down).  Plugins whose volumes are a block device that is
 * attached and mounted once per node (local block devices, rbd) also have device ops; the core
 * calls them in this order and never concurrently for one volume:
 *
 *   attach -> mount_device -> set_up_at (per pod) ... tear_down_at (per pod) -> unmount_device -> detach
 *
 * Threads and locks: every op except can_support, validate, get_volume_name and uses_device
 * runs on an executor worker, holds no agent lock, and may block (mkfs, a mount helper, the
 * network).  The core never runs two ops for the same volume at once (nor two pod ops for
 * the same volume and pod), so ops need no locking of their own.  Ops must not touch the
 * desired or actual state; what they learn goes back through their out-parameters.
 *
 * Errors: ops return 0 or a negative errno and fill err with a message a user can act on.
 * They never log above debug (the reconciler logs once per failure change).
 *
 * Idempotency: every op may be called again after a crash at any point, so each must succeed
 * when its work is already done (set_up_at on a target that already holds the volume,
 * tear_down_at on a target that is not mounted, unmount_device of an unmounted path).
 *
 * Ops marked "Optional" may be NULL; what NULL means is said at each. */
#pragma once

#include <stdbool.h>

#include "error.h"
#include "volume-spec.h"

struct pod_ref {
	const char *uid;
	const char *name;	/* may be NULL */
	const char *namespace;	/* may be NULL */
};

/* A directory to mount on, opened safely by the core: parent_fd is an O_PATH descriptor of the
 * target's parent (reached without following symlinks), name the last component.  Mount with
 * mnt_util_bind_at(src, parent_fd, name, ...) so the checked directory is the one used. */
struct mount_target {
	const char *path;	/* for messages and for umount */
	int parent_fd;
	const char *name;
};

/* What attach made, kept in the journal so that detach, and a restarted agent, know it. */
struct device_attachment {
	char *device_path;		/* the block device to probe, format and mount */
	struct volume_attr *meta;	/* plugin records, e.g. loop=/dev/loop5, fuse_dir=... */
	size_t n_meta;
};

struct volume_mounter {
	const struct volume_plugin *plugin;
	struct volume_spec *spec;	/* a reference, dropped by plugin_free_mounter */
	char *pod_uid;
	bool read_only;			/* pod-level readOnly, or the spec's own */
	char *device_mount_path;	/* for device volumes: where the device is mounted */
};

struct volume_plugin {
	/* "local", "nfs", "rbd": the key in pod spec files, the CSI volume_context "type", and
	 * the directory kubernetes.io~<name> under a pod's volumes. */
	const char *name;

	/* Whether spec is for this plugin.  Cheap, never blocks. */
	bool (*can_support)(const struct volume_spec *spec);

	/* Checks the spec's fields and fills err with "<field>: <reason>" for the first bad one
	 * (the caller prefixes the location, e.g. "volumes[1].local.").  Never blocks. */
	int (*validate)(const struct volume_spec *spec, struct error_info *err);

	/* The node-wide identity of the volume, e.g. "local:/dev/loop3": two pods whose specs
	 * give the same name share one device mount.  Returns a new string or NULL on ENOMEM. */
	char *(*get_volume_name)(const struct volume_spec *spec);

	/* Mounts the volume on target.  Idempotent: if target already holds this volume, return
	 * 0.  For device volumes, m->device_mount_path is set and mounted. */
	int (*set_up_at)(const struct volume_mounter *m, const struct mount_target *target,
			 struct error_info *err);

	/* Unmounts target (a pod volume dir of this plugin).  Does not remove the directory
	 * (the core does, with rmdir only).  Returns 0 when target is not mounted. */
	int (*tear_down_at)(const char *volume_name, const char *pod_uid, const char *target,
			    struct error_info *err);

	/* Whether target holds exactly this volume as m describes it (same source object, same
	 * read-only state): 1 yes, 0 no (something else is mounted there), -errno when it cannot
	 * be told.  Used to adopt mounts after a restart without remounting them.  May block
	 * (stat on a network filesystem). */
	int (*check_set_up)(const struct volume_mounter *m, const char *target,
			    struct error_info *err);

	/* Rebuilds a spec from a node-wide volume name (as get_volume_name made it) and a path
	 * where it is mounted, for volumes found on the node that no spec file or journal entry
	 * describes any more (after a restart).  Optional: NULL means such volumes can only be
	 * torn down, never adopted. */
	int (*construct_spec)(const char *volume_name, const char *mount_path,
			      struct volume_spec **ret_spec, struct error_info *err);

	/* --- device ops, for volumes staged once per node --- */

	/* Whether this spec's volume is a device to stage (attach + mount_device) before pods
	 * can use it.  Optional: NULL means never, and the other device ops are not called. */
	bool (*uses_device)(const struct volume_spec *spec);

	/* Makes the volume's block device appear on this node and describes it in ret.
	 * read_only: every pod using it mounts it read-only (or the source is read-only), so
	 * the attach may be read-only and need not be the only writer.  Optional: NULL means
	 * the device is already there, at the spec's "path". */
	int (*attach)(const struct volume_spec *spec, bool read_only, struct device_attachment *ret,
		      struct error_info *err);

	/* Probes the device, formats it if (and only if) it carries no signature and read_only
	 * is false, and mounts it on target.  Idempotent. */
	int (*mount_device)(const struct volume_spec *spec, const char *device_path, bool read_only,
			    const struct mount_target *target, struct error_info *err);

	/* Unmounts the device's node-wide mount at path.  0 when not mounted. */
	int (*unmount_device)(const char *path, struct error_info *err);

	/* Undoes attach.  Optional: NULL means there is nothing to undo. */
	int (*detach)(const struct volume_spec *spec, const struct device_attachment *att,
		      struct error_info *err);

	/* --- health --- */

	/* Whether the mount at path (the device's node-wide mount for device volumes, else a pod
	 * volume dir) still works.  Returns 0 when healthy; -ENOTCONN, -ESTALE or -EIO (with a
	 * message) when it is broken and must be healed: the core then unmounts the pod mounts,
	 * unmounts and detaches the device, and sets everything up again.  Must return within
	 * the plugin's own timeout even when the server behind the mount is dead (run the probe
	 * in a helper thread or process and give up waiting).  Optional: NULL means never
	 * checked. */
	int (*check_health)(const struct volume_spec *spec, const char *path,
			    struct error_info *err);
};

/* The registry: a static table of the built-in plugins.  plugin_registry_set() replaces it
 * (tests register a fake plugin this way); NULL restores the built-in table.  Not thread-safe:
 * call it before the agent starts. */
void plugin_registry_set(const struct volume_plugin *const *table, size_t n);
const struct volume_plugin *plugin_find_by_name(const char *name);
/* The one plugin whose can_support accepts spec.  None, or more than one, is -EINVAL with a
 * message naming the type. */
int plugin_find_for_spec(const struct volume_spec *spec, const struct volume_plugin **ret,
			 struct error_info *err);
/* "local, nfs, rbd": for messages. */
const char *plugin_names(void);
/* Calls the plugin's validate; -EINVAL from a plugin without one is impossible. */
int plugin_validate(const struct volume_plugin *p, const struct volume_spec *spec,
		    struct error_info *err);
char *plugin_get_volume_name(const struct volume_plugin *p, const struct volume_spec *spec);
bool plugin_uses_device(const struct volume_plugin *p, const struct volume_spec *spec);

struct volume_mounter *plugin_new_mounter(const struct volume_plugin *p, struct volume_spec *spec,
					  const char *pod_uid, bool read_only,
					  const char *device_mount_path);
struct volume_mounter *plugin_free_mounter(struct volume_mounter *m);

void device_attachment_clear(struct device_attachment *att);
int device_attachment_set_meta(struct device_attachment *att, const char *key, const char *value);
const char *device_attachment_get_meta(const struct device_attachment *att, const char *key);
