/* volume-ops.c - what each operation does on a worker.  See volume-ops.h.
 *
 * A raw block volume (spec->block) runs the same operations through the plugin's block ops:
 * its targets are files, not directories (map_device creates them, unmap_device removes
 * them), and a tear-down tells one from the other by what is at the target, since it has no
 * spec (a restarted agent may know only the path). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blkdev.h"
#include "holders.h"
#include "macro.h"
#include "mount-util.h"
#include "path-util.h"
#include "time-util.h"
#include "quota.h"
#include "volume-ops.h"

/* How long a failed unmount looks for who holds the mount (holders.h). */
#define HOLDERS_TIMEOUT_MS 1000

#define DIR_MODE 0750

static const char *const kind_names[] = {
	[VOLUME_OP_SET_UP] = "set_up",
	[VOLUME_OP_TEAR_DOWN] = "tear_down",
	[VOLUME_OP_VERIFY] = "verify",
	[VOLUME_OP_MOUNT_DEVICE] = "mount_device",
	[VOLUME_OP_UNMOUNT_DEVICE] = "unmount_device",
	[VOLUME_OP_CHECK_HEALTH] = "check_health",
};

const char *volume_op_kind_name(enum volume_op_kind kind)
{
	return kind_names[kind];
}

/* The open parent directory and last component of op->target, below op->target_root. */
struct opened_target {
	int parent_fd;
	char *rel_parent; /* owns the buffer name points into */
	const char *name;
};

static void opened_target_done(struct opened_target *t)
{
	if (t->parent_fd >= 0)
		close(t->parent_fd);
	free(t->rel_parent);
}

static bool op_is_block(const struct volume_op *op)
{
	return op->spec && op->spec->block;
}

/* Whether the target is a raw block volume's file (or a bind onto one), not a directory. */
static bool target_is_file(const char *target)
{
	struct stat st;

	return lstat(target, &st) == 0 && !S_ISDIR(st.st_mode);
}

/* The plugin's view of an opened op->target; fresh: made by this op just now. */
static struct mount_target opened_target_mount(const struct volume_op *op,
					       const struct opened_target *t, bool fresh)
{
	return (struct mount_target){
		.path = op->target, .parent_fd = t->parent_fd, .name = t->name, .fresh = fresh
	};
}

/* Walks to the target's parent without following symlinks (creating it when asked, unless
 * op->parent_given) and, when create is set, makes the target directory itself (not a raw
 * block volume's file: map_device makes that).  *ret_created says whether the target
 * directory was made now (so a failed op can remove it again).  With op->parent_given a
 * missing parent is -ENOENT and nothing is made: the walk opens each component with
 * O_NOFOLLOW and creates none, and the target is made with mkdirat() in the parent's open
 * descriptor, so a parent removed meanwhile cannot be made again by this op. */
static int open_target_once(const struct volume_op *op, bool create, struct opened_target *ret,
			    bool *ret_created, struct error_info *err)
{
	size_t n = strlen(op->target_root);
	bool make_parents = create && !op->parent_given;
	char *slash;
	int r;

	ret->parent_fd = -1;
	if (!path_is_under(op->target, op->target_root) || op->target[n] != '/')
		return err_set(err, -EINVAL, "%s is not below %s", op->target, op->target_root);
	ret->rel_parent = strdup(op->target + n + 1);
	if (!ret->rel_parent)
		return -ENOMEM;
	slash = strrchr(ret->rel_parent, '/');
	if (slash) {
		*slash = '\0';
		ret->name = slash + 1;
		r = path_open_dir_below(op->target_root, ret->rel_parent, make_parents, DIR_MODE,
					&ret->parent_fd, err);
		if ((r == -ENOENT || r == -ENOTDIR) && create && op->parent_given) {
			*err = (struct error_info){ 0 };
			return err_set(
				err, -ENOENT,
				"target_path %s: its parent directory %s/%s is missing (%s); "
				"the CO makes it before NodePublishVolume and removes it once "
				"the pod is gone, so nothing was created",
				op->target, op->target_root, ret->rel_parent,
				r == -ENOENT ? "does not exist" : "a component is no directory");
		}
	} else {
		ret->name = ret->rel_parent;
		r = path_open_dir_below(op->target_root, "", false, 0, &ret->parent_fd, err);
	}
	if (r < 0)
		return r;
	if (ret_created)
		*ret_created = false;
	if (create && !op_is_block(op)) {
		if (mkdirat(ret->parent_fd, ret->name, DIR_MODE) == 0) {
			if (ret_created)
				*ret_created = true;
		} else if (errno != EEXIST) {
			return err_set(err, -errno, "mkdir %s: %s", op->target, strerror(errno));
		}
	}
	return 0;
}

/* open_target_once(), walked again when the parent it opened was removed before the target
 * could be made in it: another op's clean-up removes empty parents (a pod's plugin dir) and
 * may do so between this walk and the mkdir.  The root is opened by its path on every walk,
 * never kept: a mount put on it (or on a parent) since, or a root removed and made again, is
 * what the next walk finds, as kubelet and the pods see it. */
static int open_target(const struct volume_op *op, bool create, struct opened_target *ret,
		       bool *ret_created, struct error_info *err)
{
	int r;

	for (int attempt = 0;; attempt++) {
		r = open_target_once(op, create, ret, ret_created, err);
		if (r != -ENOENT || !create || op->parent_given || attempt == 2)
			return r;
		opened_target_done(ret);
		*ret = (struct opened_target){ .parent_fd = -1 };
		*err = (struct error_info){ 0 };
	}
}

/* Removes the target dir if it is an empty directory that is not mounted, and its empty
 * parents up to cleanup_stop.  rmdir only: never a recursive delete through a mount.  For a
 * raw block volume (file set) the file is already gone (unmap_device removed it): its empty
 * parents go, and a held device's own dir (volumeDevices/<name>, which is cleanup_stop).
 * not_mounted: the caller has just seen that the target is no mount root (no second statx;
 * rmdir refuses a mount point anyway). */
static void remove_target_dir_checked(const struct volume_op *op, bool file, bool not_mounted)
{
	const char *stop = op->cleanup_stop ? op->cleanup_stop : op->target_root;
	_cleanup_free_ char *parent = NULL;
	char *slash;

	if (!not_mounted && mnt_util_is_mount_root(op->target) == 1)
		return;
	if (!file) {
		(void)path_rmdir_up_to(op->target, stop);
		return;
	}
	parent = strdup(op->target);
	if (!parent || !(slash = strrchr(parent, '/')) || slash == parent)
		return;
	*slash = '\0';
	if (streq(parent, stop) &&
	    (op->kind == VOLUME_OP_MOUNT_DEVICE || op->kind == VOLUME_OP_UNMOUNT_DEVICE))
		(void)rmdir(parent);
	else
		(void)path_rmdir_up_to(parent, stop);
}

static void remove_target_dir(const struct volume_op *op, bool file)
{
	remove_target_dir_checked(op, file, false);
}

/* The mount ID now at op->target; t (NULL: none) is its opened parent, for a short lookup. */
static int record_mount_id(struct volume_op *op, const struct opened_target *t)
{
	int r = t && t->parent_fd >= 0 ? mnt_util_mount_id_at(t->parent_fd, t->name, &op->mount_id)
				       : mnt_util_mount_id(op->target, &op->mount_id);

	if (r < 0)
		return err_set(&op->err, r, "%s: cannot read its mount id: %s", op->target,
			       strerror(-r));
	return 0;
}

/* A mount made just now whose mount id cannot be read is undone, so that the failure, which
 * the CSI caller may take as final, leaves nothing at the target (kubelet's rule: after a
 * final error it forgets the attempt).  Best effort; the op's error stays the first one. */
static void undo_new_mount(struct volume_op *op, bool device)
{
	struct error_info ignored = { 0 };

	if (op_is_block(op))
		(void)plugin_unmap_device(op->plugin, op->target, &ignored);
	else if (device)
		(void)plugin_unmount_device(op->plugin, op->target, &ignored);
	else
		(void)plugin_tear_down_at(op->plugin, op->volume_name, op->pod_uid, op->target,
					  &ignored);
}

/* op->project_id of a directory volume with a size (node-local, no device) set up or adopted
 * at op->target: one open and FS_IOC_FSGETXATTR (and Q_XGETQUOTA) of a local directory. */
static void note_project_id(struct volume_op *op)
{
	struct quota_usage q;

	if (op->spec && volume_spec_get(op->spec, "size") && plugin_is_node_local(op->plugin) &&
	    !plugin_uses_device(op->plugin, op->spec) &&
	    quota_prj_dir_usage_at(op->target, &q) == 1)
		op->project_id = q.project_id;
}

static int run_set_up(struct volume_op *op)
{
	struct opened_target t = { .parent_fd = -1 };
	struct mount_target mt;
	struct volume_mounter *m = NULL;
	bool created = false;
	int r;

	r = open_target(op, true, &t, &created, &op->err);
	if (r < 0)
		goto out;
	m = plugin_new_mounter(op->plugin, op->spec, op->pod_uid, op->read_only,
			       op->device_mount_path);
	if (!m) {
		r = -ENOMEM;
		goto out;
	}
	mt = opened_target_mount(op, &t, created);
	if (op_is_block(op))
		r = plugin_map_device(op->plugin, op->spec, op->device_mount_path, op->read_only,
				      &mt, &op->err);
	else
		r = plugin_set_up_at(m, &mt, &op->err);
	if (r > 0) {
		op->found_in_place = true; /* e.g. a journal that lost the call: adopted */
		r = 0;
	}
	if (r == 0) {
		r = record_mount_id(op, &t);
		if (r < 0 && !op->found_in_place)
			undo_new_mount(op, false);
		else if (r == 0)
			note_project_id(op);
	}
out:
	if (r < 0 && (created || op_is_block(op)))
		remove_target_dir(op, op_is_block(op)); /* a failed map removed its own file */
	plugin_free_mounter(m);
	opened_target_done(&t);
	return r;
}

/* After an unmount: removes the target dir and its empty parents up to cleanup_stop, with
 * the rmdir first, since it refuses a mount point (EBUSY) and so needs no look before.
 * Returns 0 when the dir is gone or stays for a reason that is no mount on it (not empty),
 * -EBUSY when rmdir said it is busy (for the caller to tell whether something is still
 * mounted there), 1 when the target is not below the stop (the caller decides). */
static int remove_unmounted_dir(const struct volume_op *op)
{
	const char *stop = op->cleanup_stop ? op->cleanup_stop : op->target_root;
	_cleanup_free_ char *parent = NULL;
	char *slash;

	if (!path_is_under(op->target, stop) || streq(op->target, stop))
		return 1;
	if (rmdir(op->target) < 0)
		return errno == EBUSY ? -EBUSY : 0;
	parent = strdup(op->target);
	if (parent && (slash = strrchr(parent, '/')) && slash != parent) {
		*slash = '\0';
		(void)path_rmdir_up_to(parent, stop);
	}
	return 0;
}

static int run_tear_down(struct volume_op *op)
{
	bool file = target_is_file(op->target);
	int r;

	if (file)
		r = plugin_unmap_device(op->plugin, op->target, &op->err);
	else
		r = plugin_tear_down_at(op->plugin, op->volume_name, op->pod_uid, op->target,
					&op->err);
	if (r == -EINVAL || r == -ENOENT)
		r = 0; /* not mounted (any more) */
	if (r == -EBUSY)
		return holders_explain(op->target, NULL, HOLDERS_TIMEOUT_MS, &op->err);
	if (r < 0)
		return r;
	if (!file && remove_unmounted_dir(op) == 0)
		return 0;
	if (mnt_util_is_mount_root(op->target) == 1) {
		err_set(&op->err, -EBUSY,
			"%s is still a mount point after unmounting (stacked mounts); "
			"will unmount again",
			op->target);
		return holders_explain(op->target, NULL, HOLDERS_TIMEOUT_MS, &op->err);
	}
	remove_target_dir_checked(op, file, true); /* checked just now */
	return 0;
}

static int run_verify(struct volume_op *op)
{
	struct volume_mounter *m = plugin_new_mounter(op->plugin, op->spec, op->pod_uid,
						      op->read_only, op->device_mount_path);
	int r;

	if (!m)
		return -ENOMEM;
	r = plugin_check_set_up(m, op->target, &op->seen, &op->err);
	plugin_free_mounter(m);
	if (r < 0)
		return r;
	op->verified = r == 1;
	if (op->verified)
		note_project_id(op);
	if (op->verified && op->seen.confirmed)
		op->mount_id = op->seen.mount_id; /* the plugin saw it is this mount */
	else if (op->verified)
		(void)record_mount_id(op, NULL);
	return 0;
}

/* A device with a filesystem may be handed out raw (the CSI spec allows it); what it carries
 * is noted for the log.  A probe that fails notes nothing. */
static void note_block_content(struct volume_op *op)
{
	struct blkdev_probe pr;
	struct error_info ignored = { 0 };

	if (blkdev_probe(op->target, &pr, &ignored) < 0 || pr.blank)
		return;
	snprintf(op->content, sizeof(op->content), "%s", pr.type[0] ? pr.type : pr.pttype);
}

static int run_mount_device(struct volume_op *op)
{
	struct opened_target t = { .parent_fd = -1 };
	struct mount_target mt;
	bool attached_now = false, created = false, existed;
	int r;

	/* A plugin without attach gets no device: it knows its source from the spec. */
	if (plugin_has_attach(op->plugin) && !op->att.device_path) {
		r = plugin_attach(op->plugin, op->spec, op->read_only, &op->att, &op->err);
		if (r < 0)
			goto out;
		attached_now = true;
	}
	r = open_target(op, true, &t, &created, &op->err);
	if (r < 0)
		goto out_detach;
	mt = opened_target_mount(op, &t, created);
	/* The filesystem this volume was recorded with: never formatted over, never another. */
	mt.fs_uuid = op->recorded_fs_uuid[0] ? op->recorded_fs_uuid : NULL;
	mt.ret_fs_uuid = op->fs_uuid;
	if (op_is_block(op))
		r = plugin_map_device(op->plugin, op->spec, op->att.device_path, op->read_only, &mt,
				      &op->err);
	else
		r = plugin_mount_device(op->plugin, op->spec, op->att.device_path, op->read_only,
					&mt, &op->err);
	existed = r > 0; /* the held device was bound already */
	if (r > 0)
		r = 0;
	if (r == 0) {
		r = record_mount_id(op, &t);
		if (r < 0 && !existed)
			undo_new_mount(op, true);
	}
	if (r == 0 && op_is_block(op))
		note_block_content(op);
	if (r == 0)
		goto out;
	if (created || op_is_block(op))
		remove_target_dir(op, op_is_block(op));
out_detach:
	/* No half-attached device is left behind by a failed stage; and an attachment made
	 * before a restart that no longer mounts (its helper died with the node's state) is
	 * released, so the next attempt attaches afresh instead of failing on it forever. */
	if (plugin_has_detach(op->plugin) && op->att.device_path) {
		struct error_info ignored = { 0 };
		if (plugin_detach(op->plugin, op->spec, &op->att, &ignored) == 0) {
			device_attachment_clear(&op->att);
			op->detached = !attached_now;
		}
	}
out:
	opened_target_done(&t);
	return r;
}

static int run_unmount_device(struct volume_op *op)
{
	bool file = target_is_file(op->target);
	int r;

	if (file)
		r = plugin_unmap_device(op->plugin, op->target, &op->err);
	else
		r = plugin_unmount_device(op->plugin, op->target, &op->err);
	if (r == -EINVAL || r == -ENOENT)
		r = 0;
	if (r == -EBUSY)
		return holders_explain(op->target, op->att.device_path, HOLDERS_TIMEOUT_MS,
				       &op->err);
	if (r < 0)
		return r;
	if (mnt_util_is_mount_root(op->target) == 1) {
		err_set(&op->err, -EBUSY, "%s is still mounted after unmounting", op->target);
		return holders_explain(op->target, op->att.device_path, HOLDERS_TIMEOUT_MS,
				       &op->err);
	}
	remove_target_dir_checked(op, file || op_is_block(op), true);
	if (plugin_has_detach(op->plugin) && op->att.device_path) {
		r = plugin_detach(op->plugin, op->spec, &op->att, &op->err);
		if (r == -EBUSY)
			return holders_explain(NULL, op->att.device_path, HOLDERS_TIMEOUT_MS,
					       &op->err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* A failed check is not a failed operation: op->result stays 0 unless the check itself could
 * not run, and op->broken says whether the mount needs healing. */
static int run_check_health(struct volume_op *op)
{
	int r = plugin_check_health(op->plugin, op->spec, op->target, &op->err);

	op->broken = r == -ENOTCONN || r == -ESTALE || r == -EIO || r == -ETIMEDOUT;
	return op->broken ? 0 : r;
}

/* What each kind of operation runs. */
static int (*const run_kind[])(struct volume_op *op) = {
	[VOLUME_OP_SET_UP] = run_set_up,
	[VOLUME_OP_TEAR_DOWN] = run_tear_down,
	[VOLUME_OP_VERIFY] = run_verify,
	[VOLUME_OP_MOUNT_DEVICE] = run_mount_device,
	[VOLUME_OP_UNMOUNT_DEVICE] = run_unmount_device,
	[VOLUME_OP_CHECK_HEALTH] = run_check_health,
};

static void volume_op_run(struct executor_job *job)
{
	struct volume_op *op = volume_op_from_job(job);
	uint64_t start = now_ms();

	if (op->refused)
		op->result = op->refused;
	else if ((size_t)op->kind < ARRAY_SIZE(run_kind))
		op->result = run_kind[op->kind](op);
	if (op->result < 0 && !op->err.code)
		err_set(&op->err, op->result, "%s", strerror(-op->result));
	op->duration_ms = now_ms() - start;
}

struct volume_op *volume_op_new(enum volume_op_kind kind, const char *key)
{
	struct volume_op *op = calloc(1, sizeof(*op));

	if (!op)
		return NULL;
	op->job.run = volume_op_run;
	op->kind = kind;
	op->mount_id = -1;
	op->key = strdup(key);
	if (!op->key) {
		free(op);
		return NULL;
	}
	return op;
}

struct volume_op *volume_op_free(struct volume_op *op)
{
	if (!op)
		return NULL;
	free(op->key);
	free(op->volume_name);
	volume_spec_unref(op->spec);
	free(op->target);
	free(op->target_root);
	free(op->cleanup_stop);
	free(op->pod_uid);
	free(op->pod_ref);
	free(op->device_mount_path);
	device_attachment_clear(&op->att);
	free(op);
	return NULL;
}
