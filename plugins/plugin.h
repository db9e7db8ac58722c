/* plugin.h - the volume plugin vtable, split the way kubelet splits its plugin interfaces
 * (VolumePlugin, DeviceMountableVolumePlugin, AttachableVolumePlugin, BlockVolumePlugin,
 * NodeExpandableVolumePlugin) and written as kernel-style const ops tables.
 *
 * A plugin turns a volume_spec into mounts.  Every plugin has pod-level ops (struct
 * volume_ops: set a volume up in a pod's volume directory, tear it down).  Plugins whose
 * volumes are mounted once per node have device_mount_ops; those that must first make a
 * block device appear have attach_ops; those that can grow a filesystem online have
 * expand_ops.  The core calls them in this order and never concurrently for one volume:
 *
 *   [attach] -> mount_device -> set_up_at (per pod) ... tear_down_at (per pod)
 *            -> unmount_device -> [detach]
 *
 * Threads and locks: every op except can_support, validate, get_volume_name and uses_device
 * runs on an executor worker (or a CSI call's thread for expand), holds no agent lock, and
 * may block (mkfs, a mount helper, the network).  The core never runs two ops for the same
 * volume at once (nor two pod ops for the same volume and pod), so ops need no locking of
 * their own.  Ops must not touch the desired or actual state; what they learn goes back
 * through their out-parameters.
 *
 * Errors: ops return 0 or a negative errno and fill err with a message a user can act on.
 * They never log above debug (the reconciler logs once per failure change).  What the core
 * does with each errno is listed below, before struct volume_ops.
 *
 * Idempotency: every op may be called again after a crash at any point, so each must succeed
 * when its work is already done (set_up_at on a target that already holds the volume,
 * tear_down_at on a target that is not mounted, unmount_device of an unmounted path).
 *
 * Ops marked "Optional" may be NULL, and so may every capability table but volume_ops; what
 * NULL means is said at each.  Helper programs (mkfs, rbd map, mount.nfs in a child) run
 * through lib/process.h with a deadline. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "error.h"
#include "volume-spec.h"

struct pod_ref {
	const char *uid;
	const char *name;      /* may be NULL */
	const char *namespace; /* may be NULL */
};

/* A directory to mount on, opened safely by the core: parent_fd is an O_PATH descriptor of the
 * target's parent (reached without following symlinks), name the last component.  Mount with
 * mnt_util_bind_at(src, parent_fd, name, ...) so the checked directory is the one used. */
struct mount_target {
	const char *path; /* for messages and for umount */
	int parent_fd;
	const char *name;
	bool fresh; /* the target dir was made just now by this op: nothing is mounted on it */
	/* mount_device of a filesystem on a block device (device-fs.h) only, both may be NULL.
	 * fs_uuid: the UUID the volume's record names (the filesystem this agent made or
	 * mounted on it before): a device that probes blank is then not formatted, and one
	 * with another filesystem not mounted.  ret_fs_uuid (MOUNT_TARGET_UUID_MAX bytes): the
	 * UUID of the filesystem mounted now, "" when not known. */
	const char *fs_uuid;
	char *ret_fs_uuid;
};

#define MOUNT_TARGET_UUID_MAX 64

/* What attach made, kept in the journal so that detach, and a restarted agent, know it. */
struct device_attachment {
	char *device_path;	  /* the block device to probe, format and mount */
	struct volume_attr *meta; /* plugin records, e.g. loop=/dev/loop5, fuse_dir=... */
	size_t n_meta;
};

/* What the agent's mount table showed at a target when a check of it was queued, handed to
 * check_set_up so that the plugin need not find it out again.  The table may be older than
 * what is at the target when the check runs: a plugin that relies on it first sees that the
 * mount at the target is still mount_id (a statx with STATX_MNT_ID it makes anyway).
 * mount_id 0: the table showed nothing there, the plugin looks for itself. */
struct mount_seen {
	int mount_id;	/* mountinfo's (32-bit) ID of the visible mount; 0: none known */
	dev_t sb_dev;	/* its superblock's device (mountinfo's major:minor) */
	bool read_only; /* the mount's own read-only flag (MOUNT_ATTR_RDONLY, "ro") */
	bool stacked;	/* other mounts lie under it on the same target */
	/* Set by check_set_up when it returns 1 having seen that the mount it checked is
	 * mount_id (so the caller need not read the ID again); left false otherwise. */
	bool confirmed;
};

struct volume_mounter {
	const struct volume_plugin *plugin;
	struct volume_spec *spec; /* a reference, dropped by plugin_free_mounter */
	char *pod_uid;
	bool read_only;		 /* pod-level readOnly, or the spec's own */
	char *device_mount_path; /* for device volumes: where the device is mounted */
};

/* --- the ops, one const table per capability ---
 *
 * A plugin fills struct volume_ops (every plugin) and one table for each optional capability
 * it has.  A NULL table pointer in struct volume_plugin means the capability is absent, and
 * so does a NULL op marked "Optional" inside a table; the core never calls an op directly but
 * through the plugin_<op>() wrappers below (and asks plugin_has_<capability>()), which time
 * each call, count it in the metrics and log it at debug with the plugin's name.
 *
 * Error contract (what the core does with the -errno an op returns; err carries the message):
 *   - any error from set_up_at, mount_device, attach: the operation is retried with
 *     exponential backoff (per pod target, or per device), the message is reported once;
 *     a failed mount_device after attach is undone with detach (when there is one) before the
 *     retry; -EINVAL/-EPERM/-EROFS/-EMEDIUMTYPE/-E2BIG are not special: a bad spec fails the
 *     same way every time until the spec changes.
 *   - tear_down_at, unmount_device: -EINVAL and -ENOENT mean "not mounted" (done); any other
 *     error is retried with backoff and the mount stays recorded.
 *   - check_set_up: 1 adopt the mount, 0 tear it down and set it up again, -errno retry.
 *   - check_health: -ENOTCONN, -ESTALE, -EIO, -ETIMEDOUT mark the mount broken and make the
 *     core heal it (unmount pods, unmount_device, detach, stage again); any other error is a
 *     check that could not run, retried later; 0 healthy.
 *   - expand (called by NodeExpandVolume, not retried by the core): the errno becomes the
 *     CSI answer: -ERANGE OUT_OF_RANGE (the device is smaller than asked), -EOPNOTSUPP
 *     FAILED_PRECONDITION (not ext4/xfs, a missing capability such as CAP_SYS_RESOURCE, the
 *     mount gone), -ETIMEDOUT DEADLINE_EXCEEDED, -EIO INTERNAL.
 *   A failed CSI call hands the op's errno to the caller through the one errno -> gRPC code
 *   map, agent/csi/csi-status.c (-EBUSY, -EMEDIUMTYPE, -EROFS, -ENOTBLK FAILED_PRECONDITION,
 *   -ENOENT NOT_FOUND, -ECONNREFUSED, -EHOSTUNREACH UNAVAILABLE, ...). */

/* Every plugin. */
struct volume_ops {
	/* Whether spec is for this plugin.  Cheap, never blocks. */
	bool (*can_support)(const struct volume_spec *spec);

	/* Checks the spec's fields and fills err with "<field>: <reason>" for the first bad one
	 * (the caller prefixes the location, e.g. "volumes[1].local.").  Never blocks.
	 * Optional: NULL means every spec the plugin supports is valid. */
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

	/* Optional.  Removes what the plugin keeps on the node per target (an ephemeral
	 * volume's directory) for every target that is none of the n given (all the targets the
	 * agent wants, holds, records or works on) and is not mounted: left by a tear-down the
	 * agent did not finish.  Stores how many went in *ret_removed.  May block (it removes
	 * data); -errno with err set for the first that could not go (the others are tried). */
	int (*remove_orphans)(const char *const *targets, size_t n, unsigned *ret_removed,
			      struct error_info *err);

	/* Optional.  Removes what the plugin keeps on the node for target (an ephemeral
	 * volume's directory) once it is unpublished there and not mounted: an unpublish the
	 * agent has no record of (its record lost in a crash) still releases it.  0 when there
	 * is nothing.  May block (it removes data); -errno with err set. */
	int (*release_target)(const char *target, struct error_info *err);

	/* Whether target holds exactly this volume as m describes it (same source object, same
	 * read-only state, no other mount stacked under it): 1 yes, 0 no (something else is
	 * mounted there), -errno when it cannot be told.  Used to adopt mounts after a restart
	 * without remounting them.  seen (never NULL) is what the mount table shows at target:
	 * a plugin uses what it can of it instead of looking again (the mount ID, the read-only
	 * flag, the superblock) once it has seen that the mount at target is seen->mount_id, and
	 * then sets seen->confirmed; a plugin may also ignore it and check everything itself.
	 * May block (stat on a network filesystem). */
	int (*check_set_up)(const struct volume_mounter *m, const char *target,
			    struct mount_seen *seen, struct error_info *err);

	/* Rebuilds a spec from a node-wide volume name (as get_volume_name made it) and a path
	 * where it is mounted, for volumes found on the node that no spec file or journal entry
	 * describes any more (after a restart).  Optional: NULL means such volumes can only be
	 * torn down, never adopted. */
	int (*construct_spec)(const char *volume_name, const char *mount_path,
			      struct volume_spec **ret_spec, struct error_info *err);

	/* Whether the mount at path (the device's node-wide mount for device volumes, else a pod
	 * volume dir) still works.  Returns 0 when healthy; -ENOTCONN, -ESTALE, -EIO or
	 * -ETIMEDOUT (with a message) when it is broken and must be healed.  Must return within
	 * the plugin's own timeout even when the server behind the mount is dead (run the probe
	 * in a killable child and give up waiting).  Optional: NULL means never checked. */
	int (*check_health)(const struct volume_spec *spec, const char *path,
			    struct error_info *err);
};

/* Plugins whose volumes are mounted once per node (at a staging path) and bound from there
 * into each pod (kubelet's DeviceMountableVolumePlugin).  The core calls, never concurrently
 * for one volume:
 *   [attach] -> mount_device -> set_up_at (per pod) ... tear_down_at -> unmount_device
 *   -> [detach] */
struct device_mount_ops {
	/* Whether this spec's volume is staged at all (local: only block devices, nfs: only in
	 * shared mode).  Never blocks.  Optional: NULL means every volume of the plugin is. */
	bool (*uses_device)(const struct volume_spec *spec);

	/* Mounts the volume on target, formatting a block device first if (and only if) it
	 * carries no signature and read_only is false.  device_path is what attach made, or NULL
	 * for a plugin without attach (nfs mounts its export there; local finds its device from
	 * the spec).  Idempotent: 0 when target already is this volume's mount. */
	int (*mount_device)(const struct volume_spec *spec, const char *device_path, bool read_only,
			    const struct mount_target *target, struct error_info *err);

	/* Unmounts the node-wide mount at path.  0 when not mounted. */
	int (*unmount_device)(const char *path, struct error_info *err);
};

/* Plugins that must make a block device appear on the node first (kubelet's
 * AttachableVolumePlugin): rbd maps its image, local resolves the device the spec names.
 * Both ops may block and are idempotent; the attachment is journaled by the core. */
struct attach_ops {
	/* Makes the volume's block device appear on this node and describes it in ret.
	 * read_only: every pod using it mounts it read-only (or the source is read-only), so
	 * the attach may be read-only and need not be the only writer. */
	int (*attach)(const struct volume_spec *spec, bool read_only, struct device_attachment *ret,
		      struct error_info *err);

	/* Undoes attach.  0 when it is already undone.  Optional: NULL means there is nothing to
	 * undo (the device stays on the node). */
	int (*detach)(const struct volume_spec *spec, const struct device_attachment *att,
		      struct error_info *err);

	/* Whether att, as a journal recorded it for volume_name, is what attach would have made
	 * for that volume: its own dirs and files, devices of the kind its method makes.  A
	 * journal is never trusted further than that (detach would act on what it names).
	 * Never blocks.  Returns 0, or -EBADMSG naming the field that differs (the entry is
	 * refused: nothing it names is touched), or -ESTALE when it is of the right shape but
	 * what it names is not what attach made any more (a device unmapped, or its name reused
	 * for another image or file while the agent was down): the core then forgets the
	 * attachment, keeps the volume's entry, and attaches afresh.  Optional: NULL means
	 * there is nothing to check. */
	int (*check_attachment)(const char *volume_name, const struct device_attachment *att,
				struct error_info *err);
};

/* Raw block volumes (kubelet's BlockVolumePlugin, a spec with volumeMode Block): the
 * attached device is handed to the pod as a device node bind-mounted onto a file, never
 * formatted nor mounted.  For such a spec the core calls, instead of mount_device and
 * set_up_at/tear_down_at:
 *   [attach] -> map_device (node-wide: the attached device onto the held file
 *   <root>/plugins/kubernetes.io/<plugin>/volumeDevices/<name>/dev, or a file in a CSI staging
 *   dir) -> map_device (per pod: the held file onto the pod's file) ... unmap_device (per pod)
 *   -> unmap_device (node-wide) -> [detach]
 * check_set_up is still asked to adopt a pod's file after a restart (it sees spec->block).
 * Optional table: NULL means the plugin refuses volumeMode Block. */
struct block_ops {
	/* Binds device_path (the attached device node, or the held file for a pod) onto the
	 * file target (target->parent_fd is its directory; the file is created when missing),
	 * read-only when read_only.  Idempotent: 1 when the bind was already there (nothing
	 * done), 0 when it was made.  May block. */
	int (*map_device)(const struct volume_spec *spec, const char *device_path, bool read_only,
			  const struct mount_target *target, struct error_info *err);
	/* Undoes map_device at target: unmounts the bind and removes the file.  0 when neither
	 * is there. */
	int (*unmap_device)(const char *target, struct error_info *err);
};

/* Online growth of a staged volume's filesystem after its device grew (kubelet's
 * NodeExpandableVolumePlugin).  May block (resize2fs, xfs_growfs: run with a deadline). */
struct expand_ops {
	/* Grows the filesystem mounted at mount_path (on device_path, NULL when the plugin has
	 * no attach) to fill its device.  spec may be NULL: a CSI NodeExpandVolume knows only
	 * the device and the path.  new_size: the size asked for in bytes, 0 for "all of
	 * the device"; a device smaller than new_size is -ERANGE.  Stores the device's size in
	 * *ret_capacity.  Idempotent: growing a filesystem that already fills its device is 0. */
	int (*expand)(const struct volume_spec *spec, const char *device_path,
		      const char *mount_path, unsigned long long new_size,
		      unsigned long long *ret_capacity, struct error_info *err);
};

struct plugin_option;

/* What a plugin declares about its volumes (struct volume_plugin's flags).  The core asks
 * them through the plugin_is_*() wrappers; it never asks which plugin it is. */
enum plugin_flags {
	/* The volume exists on this node only: a path of this host, named by the spec's "path"
	 * key (a directory, or a block device when uses_device says so), that no other node can
	 * reach.  CSI then lets MULTI_NODE_* access modes mean several targets on this node (no
	 * other node can write the filesystem), answers NOT_FOUND at stage for a directory that
	 * does not exist, and reports no capacity for a directory (it has none of its own). */
	PLUGIN_NODE_LOCAL = 1u << 0,
};

struct volume_plugin {
	/* "local", "nfs", "rbd": the key in pod spec files, the CSI volume_context "type", and
	 * the directory kubernetes.io~<name> under a pod's volumes. */
	const char *name;
	unsigned flags; /* enum plugin_flags; 0: none */

	const struct volume_ops *ops;	       /* required */
	const struct device_mount_ops *device; /* NULL: pods mount the volume directly */
	const struct attach_ops *attach;       /* NULL: nothing to attach */
	const struct block_ops *block;	       /* NULL: no raw block volumes */
	const struct expand_ops *expand;       /* NULL: cannot be expanded on the node */

	/* The plugin's settings (flags and config keys of `volagent run`), terminated by an
	 * entry with a NULL name; NULL when it has none.  See plugin-option.h. */
	const struct plugin_option *options;
};

/* The registry: a static table of the built-in plugins.  plugin_registry_set() replaces it
 * (tests register a fake plugin this way); NULL restores the built-in table.  Not thread-safe:
 * call it before the agent starts. */
void plugin_registry_set(const struct volume_plugin *const *table, size_t n);
/* The registry's plugins one by one (for walking their option tables): NULL past the end. */
const struct volume_plugin *plugin_registry_get(size_t i);
const struct volume_plugin *plugin_find_by_name(const char *name);
/* The one plugin whose can_support accepts spec.  None, or more than one, is -EINVAL with a
 * message naming the type. */
int plugin_find_for_spec(const struct volume_spec *spec, const struct volume_plugin **ret,
			 struct error_info *err);
/* "local, nfs, rbd": for messages. */
const char *plugin_names(void);
/* The wrappers: the only callers of the ops (see above).  Each times the call, counts it in
 * volagent_operations_*{plugin,operation} (can_support, validate and get_volume_name, which
 * never block, are not counted) and logs it at debug with the plugin's name.  An absent
 * optional op behaves as documented at the op (validate: 0; construct_spec, check_health,
 * expand, map_device: -EOPNOTSUPP; detach: 0). */
int plugin_validate(const struct volume_plugin *p, const struct volume_spec *spec,
		    struct error_info *err);
char *plugin_get_volume_name(const struct volume_plugin *p, const struct volume_spec *spec);
int plugin_set_up_at(const struct volume_mounter *m, const struct mount_target *target,
		     struct error_info *err);
/* volume_ops.remove_orphans; 0 (none removed) for a plugin without it. */
int plugin_remove_orphans(const struct volume_plugin *p, const char *const *targets, size_t n,
			  unsigned *ret_removed, struct error_info *err);
/* volume_ops.release_target; 0 for a plugin without it. */
int plugin_release_target(const struct volume_plugin *p, const char *target,
			  struct error_info *err);
int plugin_tear_down_at(const struct volume_plugin *p, const char *volume_name, const char *pod_uid,
			const char *target, struct error_info *err);
int plugin_check_set_up(const struct volume_mounter *m, const char *target, struct mount_seen *seen,
			struct error_info *err);
int plugin_construct_spec(const struct volume_plugin *p, const char *volume_name,
			  const char *mount_path, struct volume_spec **ret_spec,
			  struct error_info *err);
int plugin_check_health(const struct volume_plugin *p, const struct volume_spec *spec,
			const char *path, struct error_info *err);
int plugin_attach(const struct volume_plugin *p, const struct volume_spec *spec, bool read_only,
		  struct device_attachment *ret, struct error_info *err);
int plugin_detach(const struct volume_plugin *p, const struct volume_spec *spec,
		  const struct device_attachment *att, struct error_info *err);
int plugin_check_attachment(const struct volume_plugin *p, const char *volume_name,
			    const struct device_attachment *att, struct error_info *err);
int plugin_mount_device(const struct volume_plugin *p, const struct volume_spec *spec,
			const char *device_path, bool read_only, const struct mount_target *target,
			struct error_info *err);
int plugin_unmount_device(const struct volume_plugin *p, const char *path, struct error_info *err);
int plugin_map_device(const struct volume_plugin *p, const struct volume_spec *spec,
		      const char *device_path, bool read_only, const struct mount_target *target,
		      struct error_info *err);
int plugin_unmap_device(const struct volume_plugin *p, const char *target, struct error_info *err);
int plugin_expand(const struct volume_plugin *p, const struct volume_spec *spec,
		  const char *device_path, const char *mount_path, unsigned long long new_size,
		  unsigned long long *ret_capacity, struct error_info *err);

/* Capabilities: whether the plugin has the op (or table) at all. */
bool plugin_uses_device(const struct volume_plugin *p, const struct volume_spec *spec);
bool plugin_has_attach(const struct volume_plugin *p);
bool plugin_has_detach(const struct volume_plugin *p);
bool plugin_has_construct_spec(const struct volume_plugin *p);
bool plugin_has_check_health(const struct volume_plugin *p);
bool plugin_has_expand(const struct volume_plugin *p);
bool plugin_has_block(const struct volume_plugin *p);
/* Declared capabilities (enum plugin_flags); false for NULL. */
bool plugin_is_node_local(const struct volume_plugin *p);

struct volume_mounter *plugin_new_mounter(const struct volume_plugin *p, struct volume_spec *spec,
					  const char *pod_uid, bool read_only,
					  const char *device_mount_path);
struct volume_mounter *plugin_free_mounter(struct volume_mounter *m);

void device_attachment_clear(struct device_attachment *att);
int device_attachment_set_meta(struct device_attachment *att, const char *key, const char *value);
const char *device_attachment_get_meta(const struct device_attachment *att, const char *key);
