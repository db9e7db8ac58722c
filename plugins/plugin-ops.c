/* plugin-ops.c - the wrappers through which the core calls every plugin op: each absent
 * optional op behaves the same way everywhere, and each call that may block is timed,
 * counted in the metrics and logged at debug with the plugin's name (redis connWrite-style
 * thin wrappers, so no `p->ops->x` is scattered through the core). */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "block-map.h"
#include "log.h"
#include "macro.h"
#include "metrics.h"
#include "mount-util.h"
#include "plugin.h"

static double seconds_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct op_call {
	const char *plugin;
	const char *operation;
	const char *what; /* the path or volume it is about, for the debug line */
	double start;
};

static struct op_call op_begin(const struct volume_plugin *p, const char *operation,
			       const char *what)
{
	struct op_call c = { p ? p->name : "unknown", operation, what, seconds_now() };

	metrics_op_started(c.plugin, operation);
	log_debug("plugin", "op started", "plugin", c.plugin, "op", operation, "on", what);
	return c;
}

static int op_end(const struct op_call *c, int r, const struct error_info *err)
{
	double took = seconds_now() - c->start;

	metrics_op_finished(c->plugin, c->operation, r >= 0, took);
	log_debug("plugin", "op finished", "plugin", c->plugin, "op", c->operation, "on", c->what,
		  "result", LOG_INT(r), "ms", LOG_INT((long long)(took * 1000)), "error",
		  r < 0 && err && err->code ? err->msg : NULL);
	return r;
}

/* Runs call as one counted operation of plugin p on what. */
#define OP_CALL(p, operation, what, err, call)                          \
	({                                                              \
		struct op_call _c = op_begin((p), (operation), (what)); \
		op_end(&_c, (call), (err));                             \
	})

int plugin_validate(const struct volume_plugin *p, const struct volume_spec *spec,
		    struct error_info *err)
{
	return p->ops->validate ? p->ops->validate(spec, err) : 0;
}

char *plugin_get_volume_name(const struct volume_plugin *p, const struct volume_spec *spec)
{
	return p->ops->get_volume_name(spec);
}

int plugin_set_up_at(const struct volume_mounter *m, const struct mount_target *target,
		     struct error_info *err)
{
	return OP_CALL(m->plugin, "set_up", target->path, err,
		       m->plugin->ops->set_up_at(m, target, err));
}

int plugin_tear_down_at(const struct volume_plugin *p, const char *volume_name, const char *pod_uid,
			const char *target, struct error_info *err)
{
	/* No plugin (a mount of one this agent no longer knows): a plain unmount. */
	return OP_CALL(p, "tear_down", target, err,
		       p ? p->ops->tear_down_at(volume_name, pod_uid, target, err)
			 : mnt_util_umount(target, 0, err));
}

int plugin_release_target(const struct volume_plugin *p, const char *target, struct error_info *err)
{
	if (!p || !p->ops->release_target)
		return 0;
	return OP_CALL(p, "release_target", target, err, p->ops->release_target(target, err));
}

int plugin_remove_orphans(const struct volume_plugin *p, const char *const *targets, size_t n,
			  unsigned *ret_removed, struct error_info *err)
{
	*ret_removed = 0;
	if (!p || !p->ops->remove_orphans)
		return 0;
	return OP_CALL(p, "remove_orphans", p->name, err,
		       p->ops->remove_orphans(targets, n, ret_removed, err));
}

int plugin_check_set_up(const struct volume_mounter *m, const char *target, struct mount_seen *seen,
			struct error_info *err)
{
	seen->confirmed = false;
	return OP_CALL(m->plugin, "check_set_up", target, err,
		       m->plugin->ops->check_set_up(m, target, seen, err));
}

bool plugin_has_construct_spec(const struct volume_plugin *p)
{
	return p && p->ops->construct_spec;
}

int plugin_construct_spec(const struct volume_plugin *p, const char *volume_name,
			  const char *mount_path, struct volume_spec **ret_spec,
			  struct error_info *err)
{
	if (!plugin_has_construct_spec(p))
		return -EOPNOTSUPP;
	return OP_CALL(p, "construct_spec", volume_name, err,
		       p->ops->construct_spec(volume_name, mount_path, ret_spec, err));
}

bool plugin_has_check_health(const struct volume_plugin *p)
{
	return p && p->ops->check_health;
}

int plugin_check_health(const struct volume_plugin *p, const struct volume_spec *spec,
			const char *path, struct error_info *err)
{
	if (!plugin_has_check_health(p))
		return -EOPNOTSUPP;
	return OP_CALL(p, "check_health", path, err, p->ops->check_health(spec, path, err));
}

bool plugin_uses_device(const struct volume_plugin *p, const struct volume_spec *spec)
{
	return p->device && (!p->device->uses_device || p->device->uses_device(spec));
}

int plugin_mount_device(const struct volume_plugin *p, const struct volume_spec *spec,
			const char *device_path, bool read_only, const struct mount_target *target,
			struct error_info *err)
{
	if (!p->device)
		return err_set(err, -EOPNOTSUPP, "%s volumes are not mounted once per node",
			       p->name);
	return OP_CALL(p, "mount_device", target->path, err,
		       p->device->mount_device(spec, device_path, read_only, target, err));
}

int plugin_unmount_device(const struct volume_plugin *p, const char *path, struct error_info *err)
{
	/* No plugin, or none with device ops: a plain unmount of what is there. */
	return OP_CALL(p, "unmount_device", path, err,
		       p && p->device ? p->device->unmount_device(path, err)
				      : mnt_util_umount(path, 0, err));
}

bool plugin_has_attach(const struct volume_plugin *p)
{
	return p && p->attach;
}

bool plugin_has_detach(const struct volume_plugin *p)
{
	return p && p->attach && p->attach->detach;
}

int plugin_attach(const struct volume_plugin *p, const struct volume_spec *spec, bool read_only,
		  struct device_attachment *ret, struct error_info *err)
{
	if (!plugin_has_attach(p))
		return err_set(err, -EOPNOTSUPP, "%s volumes have nothing to attach", p->name);
	return OP_CALL(p, "attach", spec->type, err, p->attach->attach(spec, read_only, ret, err));
}

int plugin_detach(const struct volume_plugin *p, const struct volume_spec *spec,
		  const struct device_attachment *att, struct error_info *err)
{
	if (!plugin_has_detach(p))
		return 0; /* nothing to undo */
	return OP_CALL(p, "detach", att->device_path, err, p->attach->detach(spec, att, err));
}

int plugin_check_attachment(const struct volume_plugin *p, const char *volume_name,
			    const struct device_attachment *att, struct error_info *err)
{
	if (!p || !p->attach || !p->attach->check_attachment)
		return 0; /* never blocks: not timed */
	return p->attach->check_attachment(volume_name, att, err);
}

bool plugin_has_block(const struct volume_plugin *p)
{
	return p && p->block;
}

bool plugin_is_node_local(const struct volume_plugin *p)
{
	return p && (p->flags & PLUGIN_NODE_LOCAL);
}

int plugin_map_device(const struct volume_plugin *p, const struct volume_spec *spec,
		      const char *device_path, bool read_only, const struct mount_target *target,
		      struct error_info *err)
{
	if (!plugin_has_block(p))
		return err_set(err, -EOPNOTSUPP, "%s has no raw block volumes", p->name);
	return OP_CALL(p, "map_device", target->path, err,
		       p->block->map_device(spec, device_path, read_only, target, err));
}

int plugin_unmap_device(const struct volume_plugin *p, const char *target, struct error_info *err)
{
	/* No plugin (a file of one this agent no longer knows): the same unbind. */
	if (!plugin_has_block(p))
		return OP_CALL(p, "unmap_device", target, err, block_map_unbind(target, err));
	return OP_CALL(p, "unmap_device", target, err, p->block->unmap_device(target, err));
}

bool plugin_has_expand(const struct volume_plugin *p)
{
	return p && p->expand;
}

int plugin_expand(const struct volume_plugin *p, const struct volume_spec *spec,
		  const char *device_path, const char *mount_path, unsigned long long new_size,
		  unsigned long long *ret_capacity, struct error_info *err)
{
	if (!plugin_has_expand(p))
		return err_set(err, -EOPNOTSUPP, "%s volumes cannot be expanded on the node",
			       p ? p->name : "unknown");
	return OP_CALL(p, "expand", mount_path, err,
		       p->expand->expand(spec, device_path, mount_path, new_size, ret_capacity,
					 err));
}
