/* reconciler-pass.c - one reconcile pass: compares the desired state with the actual state
 * and queues the operations that converge them (see the order in reconciler.h), then
 * publishes the pass's counters. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <systemd/sd-daemon.h>

#include "log.h"
#include "macro.h"
#include "metrics.h"
#include "reconciler-internal.h"

static bool ready_to_try(struct reconciler *r, const char *key, uint64_t now)
{
	return backoff_ready(r->backoff, key, now);
}
static void queue_tear_down(struct reconciler *r, const struct asw_pod_mount *pm,
			    struct volume_op ***tail)
{
	_cleanup_free_ char *key = key_for("pod", pm->target);
	struct volume_op *op;

	if (!key || !ready_to_try(r, key, now_ms()))
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
	_cleanup_free_ char *key = key_for("pod", pm->target);
	struct dsw_volume *v = pv->volume;
	struct volume_op *op;

	if (!key || !ready_to_try(r, key, now_ms()) || rec_device_op_running(r, v->name))
		return;
	op = rec_op_new(r, VOLUME_OP_VERIFY, key, pm->target, v->name, v->plugin, v->spec);
	if (!op)
		return;
	op->pod_uid = strdup(pv->pod_uid);
	op->read_only = pv->read_only;
	op->device_mount_path = v->device_mount_path ? strdup(v->device_mount_path) : NULL;
	op->startup = !r->ready;
	rec_op_start(r, op, tail);
}

static void queue_set_up(struct reconciler *r, const struct dsw_pod_volume *pv,
			 struct volume_op ***tail)
{
	_cleanup_free_ char *key = key_for("pod", pv->target);
	struct dsw_volume *v = pv->volume;
	struct volume_op *op;

	if (!key || !ready_to_try(r, key, now_ms()))
		return;
	op = rec_op_new(r, VOLUME_OP_SET_UP, key, pv->target, v->name, v->plugin, v->spec);
	if (!op)
		return;
	op->pod_uid = strdup(pv->pod_uid);
	op->read_only = pv->read_only;
	op->cleanup_stop = rec_cleanup_stop_for(r, pv->target, false);
	op->device_mount_path = v->device_mount_path ? strdup(v->device_mount_path) : NULL;
	rec_op_start(r, op, tail);
}

static void queue_mount_device(struct reconciler *r, struct dsw_volume *v, struct volume_op ***tail)
{
	_cleanup_free_ char *key = key_for("dev", v->name);
	struct asw_device *d;
	struct volume_op *op;

	if (!key || !ready_to_try(r, key, now_ms()))
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
	if (d->att.device_path)
		op->att.device_path = strdup(d->att.device_path); /* attached before a restart */
	for (size_t i = 0; i < d->att.n_meta; i++)
		device_attachment_set_meta(&op->att, d->att.meta[i].key, d->att.meta[i].value);
	rec_op_start(r, op, tail);
}

static void queue_unmount_device(struct reconciler *r, const struct asw_device *d,
				 struct volume_op ***tail)
{
	_cleanup_free_ char *key = key_for("dev", d->volume_name);
	struct volume_op *op;

	if (!key || !ready_to_try(r, key, now_ms()))
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

/* Queues a health check of every mounted volume whose plugin has one: the node-wide mount of
 * device volumes, the pod mounts of the others. */
static void queue_health_checks(struct reconciler *r, struct volume_op ***tail)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	void *v;

	while (hashmap_iterate(asw_devices(r->asw), &it, &v, NULL)) {
		struct asw_device *d = v;
		const struct volume_plugin *p = plugin_find_by_name(d->plugin_name);
		_cleanup_free_ char *key = key_for("health", d->mount_path);
		struct volume_op *op;

		if (!plugin_has_check_health(p) || !d->spec || !d->mounted || d->broken || !key ||
		    !rec_device_op_allowed(r, d->volume_name))
			continue;
		op = rec_op_new(r, VOLUME_OP_CHECK_HEALTH, key, d->mount_path, d->volume_name, p,
				d->spec);
		if (!op)
			continue;
		op->device = true;
		rec_op_start(r, op, tail);
	}
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(asw_pod_mounts(r->asw), &it, &v, NULL)) {
		struct asw_pod_mount *pm = v;
		struct dsw_pod_volume *pv = dsw_get_pod_volume(r->dsw, pm->target);
		_cleanup_free_ char *key = key_for("health", pm->target);
		struct volume_op *op;

		if (!pv || pv->volume->uses_device ||
		    !plugin_has_check_health(pv->volume->plugin) ||
		    !pod_mount_is_wanted(r, pm, pv) || !key ||
		    !rec_pod_op_allowed(r, pm->target, pm->volume_name))
			continue;
		op = rec_op_new(r, VOLUME_OP_CHECK_HEALTH, key, pm->target, pm->volume_name,
				pv->volume->plugin, pv->volume->spec);
		if (!op)
			continue;
		op->pod_uid = strdup(pm->pod_uid);
		rec_op_start(r, op, tail);
	}
}

/* Until the pass is incremental, every touch asks for a full pass. */
void rec_touch_target(struct reconciler *r, const char *target)
{
	r->pass_needed = true;
}

void rec_touch_volume(struct reconciler *r, const char *volume_name)
{
	r->pass_needed = true;
}

void rec_want_full_pass(struct reconciler *r)
{
	r->pass_needed = true;
}

void rec_pass(struct reconciler *r)
{
	struct hashmap *releasing = r->pass_releasing, *held = r->pass_held;
	struct volume_op *list = NULL, **tail = &list;
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	struct timespec start, end;
	size_t unverified = 0, mounted = 0;
	double seconds;
	void *v;

	clock_gettime(CLOCK_MONOTONIC, &start);
	hashmap_clear(releasing);
	hashmap_clear(held);
	/* 1. Unmount what is no longer wanted (and check what a restart found). */
	while (hashmap_iterate(asw_pod_mounts(r->asw), &it, &v, NULL)) {
		struct asw_pod_mount *pm = v;
		struct dsw_pod_volume *pv = dsw_get_pod_volume(r->dsw, pm->target);

		if (pm->volume_name)
			hashmap_put(held, pm->volume_name, pm);
		if (!pm->volume_name && !pm->foreign) {
			unverified++;
			if (hashmap_get(r->inflight_pod, pm->target))
				continue;
			if (pv)
				queue_verify(r, pm, pv, &tail);
			else
				queue_tear_down(r, pm, &tail);
			continue;
		}
		if (pod_mount_is_wanted(r, pm, pv)) {
			mounted++;
			continue;
		}
		if (pm->volume_name)
			hashmap_put(releasing, pm->volume_name, pm);
		if (rec_pod_op_allowed(r, pm->target, pm->volume_name))
			queue_tear_down(r, pm, &tail);
	}
	/* 2. Mount what is wanted and missing; a volume still being released waits. */
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(dsw_pod_volumes(r->dsw), &it, &v, NULL)) {
		struct dsw_pod_volume *pv = v;
		struct dsw_volume *vol = pv->volume;
		struct vol_busy *b;

		if (asw_get_pod_mount(r->asw, pv->target) ||
		    hashmap_get(r->inflight_pod, pv->target))
			continue;
		b = rec_busy_get(r, vol->name, false);
		if (hashmap_get(releasing, vol->name) || (b && (b->releasing || b->device_op)))
			continue;
		if (vol->uses_device) {
			struct asw_device *d = asw_get_device(r->asw, vol->name);
			if (d && d->broken)
				continue; /* released first, then staged again */
			if (!d || !d->mounted) {
				if (rec_device_op_allowed(r, vol->name))
					queue_mount_device(r, vol, &tail);
				continue;
			}
		}
		queue_set_up(r, pv, &tail);
	}
	/* 2b. CSI volumes staged before any pod is published need their device too. */
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(dsw_volumes(r->dsw), &it, &v, NULL)) {
		struct dsw_volume *vol = v;
		struct asw_device *d;
		struct vol_busy *b;

		if (!vol->staged || !vol->uses_device || vol->n_pod_volumes > 0)
			continue;
		d = asw_get_device(r->asw, vol->name);
		b = rec_busy_get(r, vol->name, false);
		if ((d && (d->mounted || d->broken)) || (b && (b->releasing || b->device_op)) ||
		    !rec_device_op_allowed(r, vol->name))
			continue;
		queue_mount_device(r, vol, &tail);
	}
	/* 3. Release devices that no pod uses any more. */
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(asw_devices(r->asw), &it, &v, NULL)) {
		struct asw_device *d = v;

		if ((dsw_get_volume(r->dsw, d->volume_name) && !d->broken) || unverified > 0 ||
		    hashmap_get(held, d->volume_name) || !rec_device_op_allowed(r, d->volume_name))
			continue;
		queue_unmount_device(r, d, &tail);
	}
	/* The keys point into pod mounts an operation's result may free: empty them now. */
	hashmap_clear(releasing);
	hashmap_clear(held);
	if (r->health_due) {
		r->health_due = false;
		queue_health_checks(r, &tail);
	}

	/* Device records first, then the work they describe: one fsync for the whole pass. */
	rec_save_journal(r, false);
	for (struct volume_op *op = list, *next; op; op = next) {
		next = volume_op_from_job(op->job.next);
		executor_submit(r->ex, &op->job);
	}

	clock_gettime(CLOCK_MONOTONIC, &end);
	seconds = (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9;
	pthread_mutex_lock(&r->stats_lock);
	if (!r->ready && unverified == 0) {
		r->ready = true;
		log_info("startup reconstruction complete", "pod_mounts",
			 LOG_INT(hashmap_size(asw_pod_mounts(r->asw))), "devices",
			 LOG_INT(hashmap_size(asw_devices(r->asw))));
		sd_notify(0, "READY=1");
		if (r->cfg.on_ready)
			r->cfg.on_ready(r->cfg.on_ready_userdata);
	}
	r->stats.passes++;
	r->stats.ops_started = r->ops_started;
	r->stats.ops_failed = r->ops_failed;
	r->stats.last_pass_us = (uint64_t)(seconds * 1e6);
	r->stats.desired_pod_volumes = hashmap_size(dsw_pod_volumes(r->dsw));
	r->stats.mounted_pod_volumes = mounted;
	r->stats.devices = hashmap_size(asw_devices(r->asw));
	r->stats.failing = backoff_count(r->backoff);
	r->stats.journal_saves = journal_save_count(r->journal);
	pthread_mutex_unlock(&r->stats_lock);
	metrics_reconcile_pass(seconds);
	metrics_set_volume_gauges(hashmap_size(dsw_pod_volumes(r->dsw)), mounted,
				  backoff_count(r->backoff), hashmap_size(asw_devices(r->asw)),
				  rec_oldest_pending_age(r, now_ms()));
}
