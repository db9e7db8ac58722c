/* reconciler-pass.c - one reconcile pass: compares the desired state with the actual state
 * and queues the operations that converge them (see the order in reconciler.h), then
 * publishes the pass's counters.
 *
 * Two kinds of pass apply the same rules.  A full pass visits every pod mount, pod volume,
 * staged volume and device.  An incremental pass visits only what was touched since the last
 * pass (rec_touch_target, rec_touch_volume, rec_touch_device), expanded so the rules still
 * see everything they depend on: a target brings the device of the volume wanted or held
 * there; a volume brings its device, every pod volume that wants it and every pod mount that
 * holds it.  Whether a volume is still held or being released elsewhere is read from the actual
 * state's index of pod mounts by volume (asw_pod_mounts_of), not from what the pass happened
 * to visit. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "macro.h"
#include "malloc-util.h"
#include "metrics.h"
#include "reconciler-internal.h"

/* What one pass found. */
struct pass_ctx {
	bool full;
	size_t keys;	    /* keys visited */
	size_t unverified;  /* full pass: pod mounts not verified yet */
	int any_unverified; /* incremental pass: -1 not known yet, else 0 or 1 */
	struct volume_op **tail;
};

/* --- sets of owned strings --- */

/* Adds a copy of s, whose hash is hash (hashmap_hash(s): long targets are hashed once). */
static bool set_add_hashed(struct hashmap *h, const char *s, uint32_t hash)
{
	char *dup;

	if (hashmap_get_hashed(h, s, hash))
		return true;
	dup = strdup(s);
	if (!dup || hashmap_put_hashed(h, dup, hash, dup) < 0) {
		free(dup);
		return false;
	}
	return true;
}

static bool set_add(struct hashmap *h, const char *s)
{
	return set_add_hashed(h, s, hashmap_hash(s));
}

static void set_clear(struct hashmap *h)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	void *v;

	while (hashmap_iterate(h, &it, &v, NULL))
		free(v);
	hashmap_clear(h);
}

static void swap_maps(struct hashmap **a, struct hashmap **b)
{
	struct hashmap *t = *a;

	*a = *b;
	*b = t;
}

/* --- touches --- */

/* Whether the next pass is a full one anyway: it drops what was touched, so nothing need be
 * recorded (and nothing is, until it has run: the touch only makes sure it runs). */
static bool full_pass_next(struct reconciler *r)
{
	return r->pass.full_pass_due || r->pass.always_full ||
	       (!r->status.ready && !r->ops.startup_verifies);
}

static void touch(struct reconciler *r, struct hashmap *set, const char *key)
{
	if (!key)
		return;
	if (full_pass_next(r)) {
		r->pass.full_pass_due = true;
		return;
	}
	if (hashmap_size(set) >= REC_TOUCHED_MAX || !set_add(set, key)) {
		/* Too many, or out of memory: nothing is missed. */
		r->pass.full_pass_due = true;
		set_clear(r->pass.touched_targets);
		set_clear(r->pass.touched_volumes);
		set_clear(r->pass.touched_devices);
	}
}

void rec_touch_target(struct reconciler *r, const char *target)
{
	touch(r, r->pass.touched_targets, target);
}

void rec_touch_volume(struct reconciler *r, const char *volume_name)
{
	touch(r, r->pass.touched_volumes, volume_name);
}

void rec_touch_device(struct reconciler *r, const char *volume_name)
{
	touch(r, r->pass.touched_devices, volume_name);
}

void rec_want_full_pass(struct reconciler *r)
{
	r->pass.full_pass_due = true;
	set_clear(r->pass.touched_targets);
	set_clear(r->pass.touched_volumes);
	set_clear(r->pass.touched_devices);
}

bool rec_volume_has_waiters(struct reconciler *r, const char *volume_name)
{
	return hashmap_get(r->pass.waiting_volumes, volume_name) != NULL;
}

/* A pod volume of vol waits for something of the whole volume; a set that cannot grow makes
 * every tear-down of it visit all of it, as before there was a set. */
static void note_waiter(struct reconciler *r, const struct dsw_volume *vol)
{
	if (!set_add(r->pass.waiting_volumes, vol->name))
		r->pass.full_pass_due = true;
}

/* Its pod volumes are visited now, and say again whether they wait. */
static void forget_waiter(struct reconciler *r, const char *volume_name)
{
	char *key = hashmap_remove(r->pass.waiting_volumes, volume_name);

	free(key);
}

void rec_touch_key(struct reconciler *r, const char *key)
{
	if (startswith(key, "pod:"))
		rec_touch_target(r, key + strlen("pod:"));
	else if (startswith(key, "dev:"))
		rec_touch_volume(r, key + strlen("dev:"));
	else
		rec_want_full_pass(r);
}

void rec_dsw_changed(void *userdata, const char *target, const char *volume_name)
{
	struct reconciler *r = userdata;

	rec_touch_target(r, target);
	rec_touch_device(r, volume_name);
}

/* Set-ups were deferred and half of the operations in flight are done. */
static bool deferred_due(struct reconciler *r)
{
	return r->ops.setups_deferred &&
	       hashmap_size(r->ops.inflight_pod) <= r->ops.max_pod_ops / 2;
}

bool rec_pass_pending(struct reconciler *r)
{
	return r->pass.full_pass_due || r->loop.health_due ||
	       hashmap_size(r->pass.touched_targets) || hashmap_size(r->pass.touched_volumes) ||
	       hashmap_size(r->pass.touched_devices) || deferred_due(r);
}

int rec_pass_init(struct reconciler *r)
{
	struct hashmap **maps[] = { &r->pass.touched_targets, &r->pass.touched_volumes,
				    &r->pass.touched_devices, &r->pass.visit_targets,
				    &r->pass.visit_volumes,   &r->pass.visit_devices,
				    &r->pass.waiting_volumes };

	for (size_t i = 0; i < ARRAY_SIZE(maps); i++)
		if (!(*maps[i] = hashmap_new()))
			return -ENOMEM;
	return 0;
}

void rec_pass_fini(struct reconciler *r)
{
	struct hashmap **sets[] = { &r->pass.touched_targets, &r->pass.touched_volumes,
				    &r->pass.touched_devices, &r->pass.visit_targets,
				    &r->pass.visit_volumes,   &r->pass.visit_devices,
				    &r->pass.waiting_volumes };

	for (size_t i = 0; i < ARRAY_SIZE(sets); i++) {
		if (*sets[i])
			set_clear(*sets[i]);
		*sets[i] = hashmap_free(*sets[i]);
	}
}

/* --- queueing operations --- */

/* The backoff key of an operation ("<kind>:<name>", as rec_key_for) in buf, without allocating;
 * false when it does not fit. */
static bool format_key(char *buf, size_t size, const char *kind, const char *name)
{
	int n = snprintf(buf, size, "%s:%s", kind, name);

	return n >= 0 && (size_t)n < size;
}

static bool ready_to_try(struct reconciler *r, const char *key, uint64_t now)
{
	return backoff_ready(r->backoff, key, now);
}

static void queue_tear_down(struct reconciler *r, const struct asw_pod_mount *pm,
			    struct volume_op ***tail)
{
	char key[PATH_MAX + 16];
	struct volume_op *op;

	if (!format_key(key, sizeof(key), "pod", pm->target) || !ready_to_try(r, key, now_ms()))
		return;
	op = rec_op_new(r, VOLUME_OP_TEAR_DOWN, key, pm->target, pm->volume_name,
			plugin_find_by_name(pm->plugin_name), NULL);
	if (!op)
		return;
	op->pod_uid = strdup(pm->pod_uid);
	op->cleanup_stop = rec_cleanup_stop_for(r, pm->target, false);
	rec_op_start(r, op, tail);
}

static void queue_verify(struct reconciler *r, const struct asw_pod_mount *pm,
			 const struct dsw_pod_volume *pv, struct volume_op ***tail)
{
	struct dsw_volume *v = pv->volume;
	char key[PATH_MAX + 16];
	struct volume_op *op;

	if (!format_key(key, sizeof(key), "pod", pm->target) || !ready_to_try(r, key, now_ms()) ||
	    rec_device_op_running(r, v->name))
		return;
	op = rec_op_new(r, VOLUME_OP_VERIFY, key, pm->target, v->name, v->plugin, v->spec);
	if (!op)
		return;
	op->pod_uid = strdup(pv->pod_uid);
	op->pod_ref = rec_pod_ref(pv);
	op->read_only = pv->read_only;
	op->device_mount_path = v->device_mount_path ? strdup(v->device_mount_path) : NULL;
	op->startup = !r->status.ready;
	if (op->startup)
		r->ops.startup_verifies++;
	rec_op_start(r, op, tail);
}

static void queue_set_up(struct reconciler *r, const struct dsw_pod_volume *pv,
			 struct volume_op ***tail)
{
	struct dsw_volume *v = pv->volume;
	char key[PATH_MAX + 16];
	struct volume_op *op;

	if (!format_key(key, sizeof(key), "pod", pv->target) || !ready_to_try(r, key, now_ms()))
		return;
	op = rec_op_new(r, VOLUME_OP_SET_UP, key, pv->target, v->name, v->plugin, v->spec);
	if (!op)
		return;
	op->pod_uid = strdup(pv->pod_uid);
	op->pod_ref = rec_pod_ref(pv);
	op->read_only = pv->read_only;
	op->cleanup_stop = rec_cleanup_stop_for(r, pv->target, false);
	op->parent_given = pv->csi; /* kubelet's pod dir: never made again by the agent */
	op->device_mount_path = v->device_mount_path ? strdup(v->device_mount_path) : NULL;
	rec_op_start(r, op, tail);
}

static void queue_mount_device(struct reconciler *r, struct dsw_volume *v, struct volume_op ***tail)
{
	char key[PATH_MAX + 16];
	struct asw_device *d;
	struct volume_op *op;

	if (!format_key(key, sizeof(key), "dev", v->name) || !ready_to_try(r, key, now_ms()))
		return;
	d = asw_add_device(r->asw, v->name, v->plugin->name, v->spec, v->device_mount_path);
	if (!d)
		return;
	/* The record exists before the work starts, so a crash leaves it in the journal. */
	journal_mark_dirty(r->journal);
	op = rec_op_new(r, VOLUME_OP_MOUNT_DEVICE, key, v->device_mount_path, v->name, v->plugin,
			v->spec);
	if (!op)
		return;
	op->read_only = v->n_read_write == 0 && !(v->csi && v->staged && !v->spec->read_only);
	op->cleanup_stop = rec_cleanup_stop_for(r, op->target, true);
	if (d->fs_uuid)
		snprintf(op->recorded_fs_uuid, sizeof(op->recorded_fs_uuid), "%s", d->fs_uuid);
	if (d->att.device_path)
		op->att.device_path = strdup(d->att.device_path); /* attached before a restart */
	for (size_t i = 0; i < d->att.n_meta; i++)
		device_attachment_set_meta(&op->att, d->att.meta[i].key, d->att.meta[i].value);
	rec_op_start(r, op, tail);
}

static void queue_unmount_device(struct reconciler *r, const struct asw_device *d,
				 struct volume_op ***tail)
{
	char key[PATH_MAX + 16];
	struct volume_op *op;

	if (!format_key(key, sizeof(key), "dev", d->volume_name) || !ready_to_try(r, key, now_ms()))
		return;
	op = rec_op_new(r, VOLUME_OP_UNMOUNT_DEVICE, key, d->mount_path, d->volume_name,
			plugin_find_by_name(d->plugin_name), d->spec);
	if (!op)
		return;
	op->cleanup_stop = rec_cleanup_stop_for(r, op->target, true);
	if (d->attached && d->att.device_path)
		op->att.device_path = strdup(d->att.device_path);
	for (size_t i = 0; i < d->att.n_meta; i++)
		device_attachment_set_meta(&op->att, d->att.meta[i].key, d->att.meta[i].value);
	rec_op_start(r, op, tail);
}

static bool pod_mount_is_wanted(struct reconciler *r, const struct asw_pod_mount *pm,
				const struct dsw_pod_volume *pv)
{
	const struct asw_device *d;

	if (!pv || pm->foreign || pm->broken || !pm->volume_name ||
	    !streq(pm->volume_name, pv->volume->name) || pm->read_only != pv->read_only)
		return false;
	/* A pod bind of a broken device goes first, so the device can be released. */
	d = pv->volume->uses_device ? asw_get_device(r->asw, pv->volume->name) : NULL;
	return !d || !d->broken;
}

/* A health check of the mount at path, keyed "health:<path>"; NULL when out of memory. */
static struct volume_op *health_op(struct reconciler *r, const char *path, const char *volume,
				   const struct volume_plugin *plugin, struct volume_spec *spec)
{
	_cleanup_free_ char *key = rec_key_for("health", path);

	return key ? rec_op_new(r, VOLUME_OP_CHECK_HEALTH, key, path, volume, plugin, spec) : NULL;
}

/* Queues a health check of every mounted volume whose plugin has one: the node-wide mount of
 * device volumes, the pod mounts of the others. */
static void queue_health_checks(struct reconciler *r, struct volume_op ***tail)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	void *v;

	while (hashmap_iterate(asw_devices(r->asw), &it, &v, NULL)) {
		struct asw_device *d = v;
		const struct volume_plugin *p = plugin_find_by_name(d->plugin_name);
		struct volume_op *op;

		if (!plugin_has_check_health(p) || !d->spec || !d->mounted || d->broken ||
		    !rec_device_op_allowed(r, d->volume_name))
			continue;
		op = health_op(r, d->mount_path, d->volume_name, p, d->spec);
		if (!op)
			continue;
		op->device = true;
		rec_op_start(r, op, tail);
	}
	/* The pod mounts: by volume, so that a node of volumes whose plugin has no check (local
	 * directories) costs a look at each volume, not a lookup of each pod mount. */
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(dsw_volumes(r->dsw), &it, &v, NULL)) {
		const struct dsw_volume *vol = v;

		if (vol->uses_device || !plugin_has_check_health(vol->plugin))
			continue;
		for (struct dsw_pod_volume *pv = vol->pod_volumes; pv; pv = pv->next_of_volume) {
			struct asw_pod_mount *pm =
				asw_get_pod_mount_hashed(r->asw, pv->target, pv->target_hash);
			struct volume_op *op;

			if (!pm || !pod_mount_is_wanted(r, pm, pv) ||
			    !rec_pod_op_allowed(r, pm->target, pm->volume_name))
				continue;
			op = health_op(r, pm->target, pm->volume_name, vol->plugin, vol->spec);
			if (!op)
				continue;
			op->pod_uid = strdup(pm->pod_uid);
			rec_op_start(r, op, tail);
		}
	}
}

/* Whether some pod mount holds volume_name; *ret_releasing: one of them is not wanted (so a
 * pod waiting for the volume waits until it is torn down).  Step 1 of this pass or an earlier
 * one marked each unwanted (every change that makes a pod mount unwanted touches its target
 * or its volume), so the state's count says it; only when the count is not known are the
 * volume's pod mounts walked. */
static bool volume_held(struct reconciler *r, const char *volume_name, bool *ret_releasing)
{
	const struct asw_pod_mount *first = asw_pod_mounts_of(r->asw, volume_name);
	int unwanted = ret_releasing ? asw_count_unwanted_of(r->asw, volume_name) : 0;
	bool releasing = unwanted > 0;

	for (const struct asw_pod_mount *pm = first; unwanted < 0 && pm && !releasing;
	     pm = pm->next_of_volume)
		releasing = !pod_mount_is_wanted(r, pm,
						 dsw_get_pod_volume_hashed(r->dsw, pm->target,
									   pm->target_hash));
	if (ret_releasing)
		*ret_releasing = releasing;
	return first != NULL;
}

/* Whether a pod mount is still unverified: no device is released meanwhile, as it may hold
 * one.  A full pass has counted them; an incremental one looks once, when it needs to. */
static bool any_unverified(struct reconciler *r, struct pass_ctx *c)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	void *v;

	if (c->full)
		return c->unverified > 0;
	if (c->any_unverified < 0) {
		c->any_unverified = 0;
		while (!c->any_unverified &&
		       hashmap_iterate(asw_pod_mounts(r->asw), &it, &v, NULL)) {
			const struct asw_pod_mount *pm = v;
			c->any_unverified = !pm->volume_name && !pm->foreign;
		}
	}
	return c->any_unverified;
}

/* 1. Unmounts a pod mount no longer wanted (and checks one a restart found). */
static void visit_pod_mount(struct reconciler *r, struct asw_pod_mount *pm, struct pass_ctx *c)
{
	struct dsw_pod_volume *pv = dsw_get_pod_volume_hashed(r->dsw, pm->target, pm->target_hash);
	bool wanted;

	c->keys++;
	if (!pm->volume_name && !pm->foreign) {
		c->unverified++;
		if (pv)
			dsw_pod_volume_set_mounted(r->dsw, pv, false);
		if (hashmap_get_hashed(r->ops.inflight_pod, pm->target, pm->target_hash))
			return;
		if (pv)
			queue_verify(r, pm, pv, &c->tail);
		else
			queue_tear_down(r, pm, &c->tail);
		return;
	}
	wanted = pod_mount_is_wanted(r, pm, pv);
	asw_pod_mount_set_unwanted(r->asw, pm, !wanted);
	if (pv)
		dsw_pod_volume_set_mounted(r->dsw, pv, wanted);
	if (!wanted && rec_pod_op_allowed(r, pm->target, pm->volume_name))
		queue_tear_down(r, pm, &c->tail);
}

/* 2. Mounts a desired pod volume that has no pod mount; a volume still being released waits. */
static void visit_pod_volume(struct reconciler *r, struct dsw_pod_volume *pv, struct pass_ctx *c)
{
	struct dsw_volume *vol = pv->volume;
	struct vol_busy *b;
	bool releasing;

	c->keys++;
	dsw_pod_volume_set_mounted(r->dsw, pv, false);
	if (hashmap_get_hashed(r->ops.inflight_pod, pv->target, pv->target_hash))
		return;
	b = rec_busy_get(r, vol->name, false);
	if ((b && (b->releasing || b->device_op)) ||
	    (volume_held(r, vol->name, &releasing) && releasing))
		return note_waiter(r, vol);
	if (hashmap_size(r->ops.inflight_pod) >= r->ops.max_pod_ops) {
		r->ops.setups_deferred = true; /* a full pass once there is room */
		return;
	}
	if (vol->uses_device) {
		struct asw_device *d = asw_get_device(r->asw, vol->name);
		if (d && d->broken)
			return note_waiter(r, vol); /* released first, then staged again */
		if (!d || !d->mounted) {
			if (rec_device_op_allowed(r, vol->name))
				queue_mount_device(r, vol, &c->tail);
			return note_waiter(r, vol);
		}
	}
	queue_set_up(r, pv, &c->tail);
}

/* 2b. A CSI volume staged before any pod is published needs its device too. */
static void visit_staged_volume(struct reconciler *r, struct dsw_volume *vol, struct pass_ctx *c)
{
	struct asw_device *d;
	struct vol_busy *b;

	if (!vol->staged || !vol->uses_device || vol->n_pod_volumes > 0)
		return;
	c->keys++;
	d = asw_get_device(r->asw, vol->name);
	b = rec_busy_get(r, vol->name, false);
	if ((d && (d->mounted || d->broken)) || (b && (b->releasing || b->device_op)) ||
	    !rec_device_op_allowed(r, vol->name))
		return;
	queue_mount_device(r, vol, &c->tail);
}

/* 3. Releases a device that no pod uses any more (a CSI volume's record alone has nothing to
 * release: it stays for the volume's next stage, until kubelet unstages it). */
static void visit_device(struct reconciler *r, struct asw_device *d, struct pass_ctx *c)
{
	c->keys++;
	if ((dsw_get_volume(r->dsw, d->volume_name) && !d->broken) ||
	    asw_device_is_record_only(d) || !rec_device_op_allowed(r, d->volume_name) ||
	    any_unverified(r, c) || volume_held(r, d->volume_name, NULL))
		return;
	queue_unmount_device(r, d, &c->tail);
}

static void full_pass(struct reconciler *r, struct pass_ctx *c)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	void *v;

	set_clear(r->pass.touched_targets);
	set_clear(r->pass.touched_volumes);
	set_clear(r->pass.touched_devices);
	set_clear(r->pass.waiting_volumes);
	/* Each pod volume's mounted flag is set again by the pod mount that serves it. */
	while (hashmap_iterate(dsw_pod_volumes(r->dsw), &it, &v, NULL))
		dsw_pod_volume_set_mounted(r->dsw, v, false);
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(asw_pod_mounts(r->asw), &it, &v, NULL))
		visit_pod_mount(r, v, c);
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(dsw_pod_volumes(r->dsw), &it, &v, NULL)) {
		struct dsw_pod_volume *pv = v;
		/* Mounted as wanted (step 1 just said so): nothing to look up. */
		if (pv->mounted || asw_get_pod_mount_hashed(r->asw, pv->target, pv->target_hash))
			continue;
		visit_pod_volume(r, pv, c);
	}
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(dsw_volumes(r->dsw), &it, &v, NULL))
		visit_staged_volume(r, v, c);
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(asw_devices(r->asw), &it, &v, NULL))
		visit_device(r, v, c);
	if (r->loop.health_due) {
		r->loop.health_due = false;
		queue_health_checks(r, &c->tail);
	}
}

static void incremental_pass(struct reconciler *r, struct pass_ctx *c)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	const char *key;

	swap_maps(&r->pass.touched_targets, &r->pass.visit_targets);
	swap_maps(&r->pass.touched_volumes, &r->pass.visit_volumes);
	swap_maps(&r->pass.touched_devices, &r->pass.visit_devices);
	/* A volume: its device, the pod volumes that want it and the pod mounts that hold it. */
	while (hashmap_iterate(r->pass.visit_volumes, &it, NULL, &key)) {
		struct dsw_volume *vol = dsw_get_volume(r->dsw, key);
		bool ok = set_add(r->pass.visit_devices, key);

		forget_waiter(r, key);
		for (struct dsw_pod_volume *pv = vol ? vol->pod_volumes : NULL; pv;
		     pv = pv->next_of_volume)
			ok = set_add_hashed(r->pass.visit_targets, pv->target, pv->target_hash) &&
			     ok;
		for (const struct asw_pod_mount *pm = asw_pod_mounts_of(r->asw, key); pm;
		     pm = pm->next_of_volume)
			ok = set_add_hashed(r->pass.visit_targets, pm->target, pm->target_hash) &&
			     ok;
		if (!ok)
			r->pass.full_pass_due = true;
	}
	/* A target: the device of what is wanted or held there. */
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(r->pass.visit_targets, &it, NULL, &key)) {
		const struct dsw_pod_volume *pv = dsw_get_pod_volume_hashed(r->dsw, key, it.hash);
		const struct asw_pod_mount *pm = asw_get_pod_mount_hashed(r->asw, key, it.hash);

		if ((pv && !set_add(r->pass.visit_devices, pv->volume->name)) ||
		    (pm && pm->volume_name && !set_add(r->pass.visit_devices, pm->volume_name)))
			r->pass.full_pass_due = true;
	}
	/* The steps in the order of a full pass. */
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(r->pass.visit_targets, &it, NULL, &key)) {
		struct asw_pod_mount *pm = asw_get_pod_mount_hashed(r->asw, key, it.hash);
		if (pm)
			visit_pod_mount(r, pm, c);
	}
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(r->pass.visit_targets, &it, NULL, &key)) {
		struct dsw_pod_volume *pv = dsw_get_pod_volume_hashed(r->dsw, key, it.hash);
		if (pv && !asw_get_pod_mount_hashed(r->asw, key, it.hash))
			visit_pod_volume(r, pv, c);
	}
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(r->pass.visit_devices, &it, NULL, &key)) {
		struct dsw_volume *vol = dsw_get_volume(r->dsw, key);
		if (vol)
			visit_staged_volume(r, vol, c);
	}
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(r->pass.visit_devices, &it, NULL, &key)) {
		struct asw_device *d = asw_get_device(r->asw, key);
		if (d)
			visit_device(r, d, c);
	}
	set_clear(r->pass.visit_targets);
	set_clear(r->pass.visit_volumes);
	set_clear(r->pass.visit_devices);
	/* The health tick needs no full pass: the checks read the state as it is, and a broken
	 * volume they find is touched. */
	if (r->loop.health_due) {
		r->loop.health_due = false;
		queue_health_checks(r, &c->tail);
	}
}

/* What this thread allocates per pod mount a restart found, until it is ready: the verify
 * operation, its strings and its result (about 890 bytes, measured at 10,000 volumes).  A
 * little less is reserved: its pages are faulted in, and what is left over would stay
 * resident for nothing, while what is missing costs only the page faults saved elsewhere. */
#define STARTUP_BYTES_PER_POD_MOUNT 832

/* Before the first pass of a start-up that found pod mounts: room in this thread's arena for
 * what the verifies will allocate, made in a few steps rather than a page (and a system call)
 * at a time (once per thread: the arena is the thread's), and in the maps of operations in
 * flight, which hold one verify per pod mount at once (not rebuilt again and again while
 * they fill). */
static void reserve_for_startup(struct reconciler *r)
{
	static __thread bool reserved;
	size_t n = hashmap_size(asw_pod_mounts(r->asw));

	(void)hashmap_reserve(r->ops.inflight_pod, n);
	(void)hashmap_reserve(r->ops.busy, n);
	if (reserved)
		return;
	reserved = true;
	malloc_reserve(n * STARTUP_BYTES_PER_POD_MOUNT);
}

/* The journal is still dirty after the pass's save: the save failed, or waits for its
 * backoff, so the device records made by this pass are not on disk.  An attach or format
 * they would record is not started (a crash would leave a device attached, or a mapping
 * open, that no record names): each MOUNT_DEVICE fails at once with EAGAIN (CSI ABORTED,
 * which kubelet calls again) naming the state dir, and is tried again at backoff.  Unmounts
 * and releases go on: they only remove records. */
static void hold_unrecorded_device_work(struct reconciler *r, struct volume_op *list)
{
	for (struct volume_op *op = list; op; op = volume_op_from_job(op->job.next)) {
		if (op->kind != VOLUME_OP_MOUNT_DEVICE)
			continue;
		op->refused = err_set(&op->err, -EAGAIN,
				      "not started: the journal in state dir %s cannot be written "
				      "(%s); tried again once a save works",
				      r->state_dir,
				      r->journal_health.error[0] ? r->journal_health.error
								 : "a save is pending");
	}
}

void rec_pass(struct reconciler *r)
{
	rec_pass_collect(r, NULL);
}

void rec_pass_collect(struct reconciler *r, struct volume_op **ret)
{
	struct volume_op *list = NULL;
	struct pass_ctx c = { .any_unverified = -1, .tail = &list };
	struct timespec start, end;
	size_t mounted;
	double seconds;
	bool became_ready = false;

	clock_gettime(CLOCK_MONOTONIC, &start);
	/* Until the startup reconstruction is complete, every pass is a full one, except while
	 * its verifies are in flight: then a pass looks only at what was touched (a verify that
	 * adopts a mount touches nothing), and the full pass that can make the agent ready
	 * follows the last of them. */
	c.full = r->pass.full_pass_due || r->pass.always_full ||
		 (!r->status.ready && !r->ops.startup_verifies) || deferred_due(r);
	r->pass.full_pass_due = false;
	if (c.full)
		r->ops.setups_deferred = false; /* each set-up still deferred says so again */
	if (c.full && !r->status.ready)
		reserve_for_startup(r);
	if (c.full)
		full_pass(r, &c);
	else
		incremental_pass(r, &c);

	/* Device records first, then the work they describe: one fsync for the whole pass. */
	rec_save_journal(r, false);
	if (list && journal_is_dirty(r->journal))
		hold_unrecorded_device_work(r, list);
	if (ret)
		*ret = list;
	else if (list)
		executor_submit_list(r->ex, &list->job);

	clock_gettime(CLOCK_MONOTONIC, &end);
	seconds = (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9;
	mounted = dsw_mounted_count(r->dsw);
	pthread_mutex_lock(&r->status.lock);
	if (!r->status.ready && c.full && c.unverified == 0) {
		became_ready = true;
		r->status.ready = true;
		rec_log_adopted_at_start(r);
		log_info("startup reconstruction complete", "pod_mounts",
			 LOG_INT(hashmap_size(asw_pod_mounts(r->asw))), "devices",
			 LOG_INT(hashmap_size(asw_devices(r->asw))));
		if (r->cfg.on_ready)
			r->cfg.on_ready(r->cfg.on_ready_userdata);
	}
	r->status.stats.passes++;
	if (c.full)
		r->status.stats.full_passes++;
	else
		r->status.stats.incremental_passes++;
	r->status.stats.last_pass_keys = c.keys;
	r->status.stats.keys_visited += c.keys;
	r->status.stats.ops_started = r->ops.ops_started;
	r->status.stats.ops_failed = r->ops.ops_failed;
	r->status.stats.last_pass_us = (uint64_t)(seconds * 1e6);
	r->status.stats.desired_pod_volumes = hashmap_size(dsw_pod_volumes(r->dsw));
	r->status.stats.mounted_pod_volumes = mounted;
	r->status.stats.devices = hashmap_size(asw_devices(r->asw));
	r->status.stats.failing = backoff_count(r->backoff);
	r->status.stats.journal_saves = journal_save_count(r->journal);
	pthread_mutex_unlock(&r->status.lock);
	metrics_reconcile_pass(seconds);
	metrics_set_volume_gauges(hashmap_size(dsw_pod_volumes(r->dsw)), mounted,
				  backoff_count(r->backoff), hashmap_size(asw_devices(r->asw)),
				  rec_oldest_pending_age(r, now_ms()));
	node_volumes_update(r->node_vols, r->asw, now_ms());
	if (became_ready) {
		clock_gettime(CLOCK_MONOTONIC, &start);
		rec_remove_stale_pod_dirs(r);
		rec_remove_orphans(r);
		clock_gettime(CLOCK_MONOTONIC, &end);
		log_debug("reconcile", "stale pod volume dirs and orphans looked at, after ready",
			  "us",
			  LOG_INT((end.tv_sec - start.tv_sec) * 1000000 +
				  (end.tv_nsec - start.tv_nsec) / 1000));
	}
}
