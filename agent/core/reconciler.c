/* reconciler.c - see reconciler.h. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "actual-state.h"
#include "backoff.h"
#include "desired-state.h"
#include "executor.h"
#include "journal.h"
#include "log.h"
#include "metrics.h"
#include "macro.h"
#include "mount-table.h"
#include "mount-util.h"
#include "path-util.h"
#include "reconciler.h"
#include "reconciler-internal.h"
#include "spec-source.h"
#include "volume-ops.h"

/* --- in-flight bookkeeping --- */

struct vol_busy *busy_get(struct reconciler *r, const char *volume, bool create)
{
	struct vol_busy *b;

	if (!volume)
		return NULL;
	b = hashmap_get(r->busy, volume);
	if (b || !create)
		return b;
	b = calloc(1, sizeof(*b));
	if (!b || !(b->name = strdup(volume)) || hashmap_put(r->busy, b->name, b) < 0) {
		if (b)
			free(b->name);
		free(b);
		return NULL;
	}
	return b;
}

static void busy_put(struct reconciler *r, struct vol_busy *b)
{
	if (b && !b->pod_ops && !b->device_op) {
		hashmap_remove(r->busy, b->name);
		free(b->name);
		free(b);
	}
}

bool device_op_running(struct reconciler *r, const char *volume)
{
	struct vol_busy *b = busy_get(r, volume, false);

	return b && b->device_op;
}

static bool pod_op_allowed(struct reconciler *r, const char *target, const char *volume)
{
	return !hashmap_get(r->inflight_pod, target) && !device_op_running(r, volume);
}

static bool device_op_allowed(struct reconciler *r, const char *volume)
{
	struct vol_busy *b = busy_get(r, volume, false);

	return !b || (!b->device_op && !b->pod_ops);
}

/* --- building operations --- */

static struct volume_op *new_op(struct reconciler *r, enum volume_op_kind kind, const char *key,
				const char *target, const char *volume_name,
				const struct volume_plugin *plugin, struct volume_spec *spec)
{
	struct volume_op *op = volume_op_new(kind, key);

	if (!op)
		return NULL;
	op->target = strdup(target);
	/* CSI targets and staging paths are walked down from the kubelet root. */
	op->target_root = strdup(r->kubelet_root && path_is_under(target, r->kubelet_root)
					 ? r->kubelet_root
					 : r->root_dir);
	op->volume_name = volume_name ? strdup(volume_name) : NULL;
	op->plugin = plugin;
	op->spec = volume_spec_ref(spec);
	if (!op->target || !op->target_root || (volume_name && !op->volume_name))
		return volume_op_free(op);
	return op;
}

/* Marks op as in flight and queues it on list (submitted after the journal is saved). */
static void start_op(struct reconciler *r, struct volume_op *op, struct volume_op ***tail)
{
	bool device = op->kind == VOLUME_OP_MOUNT_DEVICE || op->kind == VOLUME_OP_UNMOUNT_DEVICE ||
		      (op->kind == VOLUME_OP_CHECK_HEALTH && op->device);
	struct vol_busy *b = busy_get(r, op->volume_name, true);

	op->queued_ms = now_ms();
	if (device) {
		if (b)
			b->device_op = true;
		hashmap_put(r->inflight_dev, op->volume_name, op);
	} else {
		hashmap_put(r->inflight_pod, op->target, op);
		if (b) {
			b->pod_ops++;
			if (op->kind == VOLUME_OP_TEAR_DOWN)
				b->releasing++;
		}
	}
	**tail = op;
	*tail = (struct volume_op **)&op->job.next;
	r->ops_started++;
	log_debug("reconcile", "operation started", "op", volume_op_kind_name(op->kind), "volume",
		  op->volume_name, "target", op->target);
}

static void finish_op(struct reconciler *r, struct volume_op *op)
{
	struct vol_busy *b = busy_get(r, op->volume_name, false);

	if (op->kind == VOLUME_OP_MOUNT_DEVICE || op->kind == VOLUME_OP_UNMOUNT_DEVICE ||
	    (op->kind == VOLUME_OP_CHECK_HEALTH && op->device)) {
		if (b)
			b->device_op = false;
		if (hashmap_get(r->inflight_dev, op->volume_name) == op)
			hashmap_remove(r->inflight_dev, op->volume_name);
	} else {
		hashmap_remove(r->inflight_pod, op->target);
		if (b) {
			b->pod_ops--;
			if (op->kind == VOLUME_OP_TEAR_DOWN)
				b->releasing--;
		}
	}
	busy_put(r, b);
}

/* Up to where empty dirs are removed after an unmount: below <root>/pods the whole pod dir
 * may go; a CSI publish target is removed itself (kubelet made its parent); a CSI staging dir
 * is kubelet's and stays; the agent's own device dirs go one at a time. */
static char *cleanup_stop_for(struct reconciler *r, const char *target, bool device)
{
	char *stop;

	if (path_is_under(target, r->pods_root))
		return strdup(r->pods_root);
	if (device && r->kubelet_root && path_is_under(target, r->kubelet_root))
		return strdup(target);
	stop = strdup(target);
	if (stop && strrchr(stop, '/') && strrchr(stop, '/') != stop)
		*strrchr(stop, '/') = '\0';
	return stop;
}

char *key_for(const char *kind, const char *name)
{
	return strdup_printf("%s:%s", kind, name);
}

static bool ready_to_try(struct reconciler *r, const char *key, uint64_t now)
{
	return backoff_ready(r->backoff, key, now);
}

void csi_journal_changed(struct reconciler *r)
{
	if (!r->csi_save_due_ms)
		r->csi_save_due_ms = now_ms() + CSI_JOURNAL_DELAY_MS;
}

/* Saves the journal if a device record changed, or CSI entries changed and their save is due
 * (or force).  One save carries everything. */
static void save_journal(struct reconciler *r, bool force)
{
	struct error_info err = { 0 };
	bool csi_due = r->csi_save_due_ms && (force || now_ms() >= r->csi_save_due_ms);
	json_t *csi;

	if (!journal_is_dirty(r->journal) && !csi_due)
		return;
	journal_mark_dirty(r->journal);
	csi = requests_export_csi(r);
	if (journal_flush(r->journal, r->asw, csi, &err) < 0) {
		log_error("cannot save the journal, continuing", "path", journal_path(r->journal),
			  "error", err_msg(&err));
		snprintf(r->journal_error, sizeof(r->journal_error), "save failed: %s",
			 err_msg(&err));
	} else {
		r->journal_error[0] = '\0';
		r->csi_save_due_ms = 0;
	}
	json_decref(csi);
}

/* --- one pass --- */

static void queue_tear_down(struct reconciler *r, const struct asw_pod_mount *pm,
			    struct volume_op ***tail)
{
	_cleanup_free_ char *key = key_for("pod", pm->target);
	struct volume_op *op;

	if (!key || !ready_to_try(r, key, now_ms()))
		return;
	op = new_op(r, VOLUME_OP_TEAR_DOWN, key, pm->target, pm->volume_name,
		    plugin_find_by_name(pm->plugin_name), NULL);
	if (!op)
		return;
	op->pod_uid = strdup(pm->pod_uid);
	op->cleanup_stop = cleanup_stop_for(r, pm->target, false);
	start_op(r, op, tail);
}

static void queue_verify(struct reconciler *r, const struct asw_pod_mount *pm,
			 const struct dsw_pod_volume *pv, struct volume_op ***tail)
{
	_cleanup_free_ char *key = key_for("pod", pm->target);
	struct dsw_volume *v = pv->volume;
	struct volume_op *op;

	if (!key || !ready_to_try(r, key, now_ms()) || device_op_running(r, v->name))
		return;
	op = new_op(r, VOLUME_OP_VERIFY, key, pm->target, v->name, v->plugin, v->spec);
	if (!op)
		return;
	op->pod_uid = strdup(pv->pod_uid);
	op->read_only = pv->read_only;
	op->device_mount_path = v->device_mount_path ? strdup(v->device_mount_path) : NULL;
	op->startup = !r->ready;
	start_op(r, op, tail);
}

static void queue_set_up(struct reconciler *r, const struct dsw_pod_volume *pv,
			 struct volume_op ***tail)
{
	_cleanup_free_ char *key = key_for("pod", pv->target);
	struct dsw_volume *v = pv->volume;
	struct volume_op *op;

	if (!key || !ready_to_try(r, key, now_ms()))
		return;
	op = new_op(r, VOLUME_OP_SET_UP, key, pv->target, v->name, v->plugin, v->spec);
	if (!op)
		return;
	op->pod_uid = strdup(pv->pod_uid);
	op->read_only = pv->read_only;
	op->cleanup_stop = cleanup_stop_for(r, pv->target, false);
	op->device_mount_path = v->device_mount_path ? strdup(v->device_mount_path) : NULL;
	start_op(r, op, tail);
}

static void queue_mount_device(struct reconciler *r, struct dsw_volume *v,
			       struct volume_op ***tail)
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
	op = new_op(r, VOLUME_OP_MOUNT_DEVICE, key, v->device_mount_path, v->name, v->plugin,
		    v->spec);
	if (!op)
		return;
	op->read_only = v->n_read_write == 0 && !(v->csi && v->staged && !v->spec->read_only);
	op->cleanup_stop = cleanup_stop_for(r, op->target, true);
	if (d->att.device_path)
		op->att.device_path = strdup(d->att.device_path); /* attached before a restart */
	for (size_t i = 0; i < d->att.n_meta; i++)
		device_attachment_set_meta(&op->att, d->att.meta[i].key, d->att.meta[i].value);
	start_op(r, op, tail);
}

static void queue_unmount_device(struct reconciler *r, const struct asw_device *d,
				 struct volume_op ***tail)
{
	_cleanup_free_ char *key = key_for("dev", d->volume_name);
	struct volume_op *op;

	if (!key || !ready_to_try(r, key, now_ms()))
		return;
	op = new_op(r, VOLUME_OP_UNMOUNT_DEVICE, key, d->mount_path, d->volume_name,
		    plugin_find_by_name(d->plugin_name), d->spec);
	if (!op)
		return;
	op->cleanup_stop = cleanup_stop_for(r, op->target, true);
	if (d->attached && d->att.device_path)
		op->att.device_path = strdup(d->att.device_path);
	for (size_t i = 0; i < d->att.n_meta; i++)
		device_attachment_set_meta(&op->att, d->att.meta[i].key, d->att.meta[i].value);
	start_op(r, op, tail);
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
		    !device_op_allowed(r, d->volume_name))
			continue;
		op = new_op(r, VOLUME_OP_CHECK_HEALTH, key, d->mount_path, d->volume_name, p,
			    d->spec);
		if (!op)
			continue;
		op->device = true;
		start_op(r, op, tail);
	}
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(asw_pod_mounts(r->asw), &it, &v, NULL)) {
		struct asw_pod_mount *pm = v;
		struct dsw_pod_volume *pv = dsw_get_pod_volume(r->dsw, pm->target);
		_cleanup_free_ char *key = key_for("health", pm->target);
		struct volume_op *op;

		if (!pv || pv->volume->uses_device || !plugin_has_check_health(pv->volume->plugin) ||
		    !pod_mount_is_wanted(r, pm, pv) || !key ||
		    !pod_op_allowed(r, pm->target, pm->volume_name))
			continue;
		op = new_op(r, VOLUME_OP_CHECK_HEALTH, key, pm->target, pm->volume_name,
			    pv->volume->plugin, pv->volume->spec);
		if (!op)
			continue;
		op->pod_uid = strdup(pm->pod_uid);
		start_op(r, op, tail);
	}
}

/* Age in seconds of the oldest operation in flight, 0 when none. */
static double oldest_pending_age(struct reconciler *r, uint64_t now)
{
	const struct hashmap *maps[] = { r->inflight_pod, r->inflight_dev };
	uint64_t oldest = now;

	for (size_t i = 0; i < ARRAY_SIZE(maps); i++) {
		struct hashmap_iter it = HASHMAP_ITER_INIT;
		void *v;
		while (hashmap_iterate(maps[i], &it, &v, NULL))
			if (((struct volume_op *)v)->queued_ms < oldest)
				oldest = ((struct volume_op *)v)->queued_ms;
	}
	return (double)(now - oldest) / 1000.0;
}

static void reconcile_pass(struct reconciler *r)
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
		if (pod_op_allowed(r, pm->target, pm->volume_name))
			queue_tear_down(r, pm, &tail);
	}
	/* 2. Mount what is wanted and missing; a volume still being released waits. */
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(dsw_pod_volumes(r->dsw), &it, &v, NULL)) {
		struct dsw_pod_volume *pv = v;
		struct dsw_volume *vol = pv->volume;
		struct vol_busy *b;

		if (asw_get_pod_mount(r->asw, pv->target) || hashmap_get(r->inflight_pod, pv->target))
			continue;
		b = busy_get(r, vol->name, false);
		if (hashmap_get(releasing, vol->name) || (b && (b->releasing || b->device_op)))
			continue;
		if (vol->uses_device) {
			struct asw_device *d = asw_get_device(r->asw, vol->name);
			if (d && d->broken)
				continue; /* released first, then staged again */
			if (!d || !d->mounted) {
				if (device_op_allowed(r, vol->name))
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
		b = busy_get(r, vol->name, false);
		if ((d && (d->mounted || d->broken)) || (b && (b->releasing || b->device_op)) ||
		    !device_op_allowed(r, vol->name))
			continue;
		queue_mount_device(r, vol, &tail);
	}
	/* 3. Release devices that no pod uses any more. */
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(asw_devices(r->asw), &it, &v, NULL)) {
		struct asw_device *d = v;

		if ((dsw_get_volume(r->dsw, d->volume_name) && !d->broken) || unverified > 0 ||
		    hashmap_get(held, d->volume_name) || !device_op_allowed(r, d->volume_name))
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
	save_journal(r, false);
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
				  oldest_pending_age(r, now_ms()));
}

/* --- results --- */

static void report_result(struct reconciler *r, struct volume_op *op)
{
	const char *kind = volume_op_kind_name(op->kind);

	if (op->result < 0) {
		const struct backoff_entry *e;
		bool changed = backoff_failed(r->backoff, op->key, now_ms(), err_msg(&op->err));

		r->ops_failed++;
		e = backoff_get(r->backoff, op->key);
		if (changed)
			log_error("operation failed", "op", kind, "plugin",
				  op->plugin ? op->plugin->name : NULL, "volume", op->volume_name,
				  "pod", op->pod_uid, "target", op->target, "error", err_msg(&op->err),
				  "retry_in_ms", e ? LOG_INT(e->delay_ms) : "0");
		else
			log_debug("reconcile", "operation failed again", "op", kind, "volume",
				  op->volume_name, "target", op->target, "failures",
				  e ? LOG_INT(e->failures) : "0");
		return;
	}
	if (backoff_succeeded(r->backoff, op->key))
		log_info("operation succeeded after failing", "op", kind, "volume", op->volume_name,
			 "target", op->target);
}

static void apply_health(struct reconciler *r, struct volume_op *op)
{
	struct asw_device *d = op->device ? asw_get_device(r->asw, op->volume_name) : NULL;
	struct asw_pod_mount *pm = op->device ? NULL : asw_get_pod_mount(r->asw, op->target);

	if (op->result < 0) {
		log_debug("reconcile", "health check could not run", "volume", op->volume_name,
			  "path", op->target, "error", err_msg(&op->err));
		return;
	}
	if (!op->broken || (!d && !pm))
		return;
	log_warning("volume is broken, healing it: unmounting and setting it up again", "volume",
		    op->volume_name, "path", op->target, "reason", err_msg(&op->err));
	if (d)
		d->broken = true;
	else
		pm->broken = true;
	r->pass_needed = true;
}

static void apply_result(struct reconciler *r, struct volume_op *op)
{
	uint64_t gen = mount_table_generation(r->table);
	struct asw_device *d;
	const char *name;

	finish_op(r, op);
	if (op->kind == VOLUME_OP_CHECK_HEALTH) {
		apply_health(r, op);
		return;
	}
	report_result(r, op);
	if (op->result < 0)
		requests_op_failed(r, op);
	switch (op->kind) {
	case VOLUME_OP_SET_UP:
		if (op->result < 0)
			break;
		name = strrchr(op->target, '/') + 1;
		asw_set_pod_mount(r->asw, op->target, op->pod_uid, name, op->plugin->name,
				  op->volume_name, op->read_only || op->spec->read_only,
				  op->mount_id, gen);
		log_info("volume mounted", "plugin", op->plugin->name, "volume", op->volume_name,
			 "pod", op->pod_uid, "target", op->target, "read_only", op->read_only ? "true" : "false", "ms",
			 LOG_INT(op->duration_ms));
		break;
	case VOLUME_OP_TEAR_DOWN:
		if (op->result < 0)
			break;
		asw_remove_pod_mount(r->asw, op->target, gen);
		if (!dsw_get_pod_volume(r->dsw, op->target))
			asw_untrack_target(r->asw, op->target);
		log_info("volume unmounted", "plugin", op->plugin ? op->plugin->name : NULL,
			 "volume", op->volume_name ? op->volume_name : "unknown", "pod", op->pod_uid,
			 "target", op->target);
		break;
	case VOLUME_OP_VERIFY: {
		struct asw_pod_mount *pm = asw_get_pod_mount(r->asw, op->target);
		if (op->result < 0 || !pm)
			break;
		if (op->verified) {
			free(pm->volume_name);
			pm->volume_name = strdup(op->volume_name);
			pm->read_only = op->read_only || op->spec->read_only;
			pm->mount_id = op->mount_id;
			log_info("adopted existing mount", "volume", op->volume_name, "pod",
				 op->pod_uid, "target", op->target);
		} else {
			pm->foreign = true;
			log_info("mount holds something else, replacing it", "volume",
				 op->volume_name, "pod", op->pod_uid, "target", op->target);
		}
		break;
	}
	case VOLUME_OP_MOUNT_DEVICE:
		d = asw_get_device(r->asw, op->volume_name);
		if (!d)
			break;
		/* Keep whatever attach made, even on failure: detach needs it. */
		if (op->detached)
			device_attachment_clear(&d->att); /* the old one is gone */
		if (op->att.device_path && !streq_ptr(d->att.device_path, op->att.device_path)) {
			device_attachment_clear(&d->att);
			d->att = op->att;
			memset(&op->att, 0, sizeof(op->att));
		}
		d->attached = d->att.device_path != NULL;
		if (op->result == 0) {
			d->mounted = true;
			d->read_only = op->read_only;
			d->mount_id = op->mount_id;
			d->learned_gen = gen;
			log_info("device mounted", "plugin", op->plugin->name, "volume",
				 op->volume_name, "device",
				 d->att.device_path, "target", op->target, "read_only",
				 op->read_only ? "true" : "false", "ms", LOG_INT(op->duration_ms));
		} else if (!d->mounted && (!plugin_has_detach(op->plugin) || !d->attached)) {
			asw_remove_device(r->asw, op->volume_name);
		}
		journal_mark_dirty(r->journal);
		break;
	case VOLUME_OP_UNMOUNT_DEVICE:
		if (op->result < 0)
			break;
		d = asw_get_device(r->asw, op->volume_name);
		log_info("device unmounted", "plugin", op->plugin ? op->plugin->name : NULL,
			 "volume", op->volume_name, "target", op->target,
			 "reason", d && d->broken ? "broken, will be staged again" : NULL);
		asw_remove_device(r->asw, op->volume_name);
		journal_mark_dirty(r->journal);
		break;
	case VOLUME_OP_CHECK_HEALTH:
		break; /* handled by apply_health */
	}
	r->pass_needed = true;
}

static void drain_completed(struct reconciler *r)
{
	struct executor_job *job = executor_take_completed(r->ex);

	while (job) {
		struct executor_job *next = job->next;
		struct volume_op *op = volume_op_from_job(job);
		apply_result(r, op);
		volume_op_free(op);
		job = next;
	}
}

/* --- reconstruction --- */

int refresh_table(struct reconciler *r)
{
	struct error_info err = { 0 };
	int k = mount_table_refresh(r->table, NULL, &err);

	if (k < 0) {
		log_error("cannot read the mount table", "error", err_msg(&err));
		return k;
	}
	r->last_refresh_ms = now_ms();
	r->table_dirty = false;
	asw_sync_with_table(r->asw, r->table);
	r->pass_needed = true;
	return 0;
}

/* Device mounts under <root>/plugins/kubernetes.io/<plugin>/mounts/ that the journal does not
 * describe (it was lost or corrupt): recorded from the table so they are not leaked. */
static void adopt_untracked_device_mounts(struct reconciler *r)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	void *v;

	while (hashmap_iterate(mount_table_entries(r->table), &it, &v, NULL)) {
		const struct mount_info *mi = v;
		const char *rest = mi->target + strlen(r->plugins_prefix), *slash;
		_cleanup_free_ char *plugin = NULL, *name = NULL;
		const struct volume_plugin *p;
		struct volume_spec *spec = NULL;
		struct error_info ignored = { 0 };
		struct asw_device *d;

		if (!startswith(mi->target, r->plugins_prefix) || !(slash = strchr(rest, '/')) ||
		    !startswith(slash, "/mounts/") || strchr(slash + strlen("/mounts/"), '/'))
			continue;
		plugin = strndup(rest, (size_t)(slash - rest));
		name = path_unescape_component(slash + strlen("/mounts/"));
		if (!plugin || !name || asw_get_device(r->asw, name))
			continue;
		p = plugin_find_by_name(plugin);
		(void)plugin_construct_spec(p, name, mi->target, &spec, &ignored);
		d = asw_add_device(r->asw, name, plugin, spec, mi->target);
		volume_spec_unref(spec);
		if (!d)
			continue;
		d->mounted = true;
		d->attached = true;
		d->mount_id = mi->id;
		d->att.device_path = strdup(mi->source);
		journal_mark_dirty(r->journal);
		log_warning("found a device mount the journal did not record, adopting it",
			    "volume", name, "device", mi->source, "target", mi->target);
	}
}

/* Removes empty pod volume dirs that nothing mounts and no spec wants (left by a crash
 * between mkdir and mount, or by pods deleted while the agent was down). */
static void remove_stale_pod_dirs(struct reconciler *r)
{
	DIR *pods = opendir(r->pods_root);
	struct dirent *p;

	if (!pods)
		return;
	while ((p = readdir(pods))) {
		char vols[PATH_MAX];
		DIR *plugins;
		struct dirent *pl;

		if (!path_is_safe_component(p->d_name))
			continue;
		if (snprintf(vols, sizeof(vols), "%s/%s/volumes", r->pods_root, p->d_name) >=
		    (int)sizeof(vols))
			continue;
		plugins = opendir(vols);
		if (!plugins)
			continue;
		while ((pl = readdir(plugins))) {
			char dir[PATH_MAX];
			DIR *names;
			struct dirent *n;

			if (!startswith(pl->d_name, "kubernetes.io~"))
				continue;
			if (snprintf(dir, sizeof(dir), "%s/%s", vols, pl->d_name) >= (int)sizeof(dir))
				continue;
			names = opendir(dir);
			if (!names)
				continue;
			while ((n = readdir(names))) {
				char target[PATH_MAX];

				if (!path_is_safe_component(n->d_name))
					continue;
				if (snprintf(target, sizeof(target), "%s/%s", dir, n->d_name) >=
				    (int)sizeof(target))
					continue;
				if (dsw_get_pod_volume(r->dsw, target) ||
				    mount_table_get(r->table, target) ||
				    mnt_util_is_mount_root(target) == 1)
					continue;
				if (path_rmdir_up_to(target, r->pods_root) == 0)
					log_debug("reconcile", "removed empty pod volume dir", "dir",
						  target);
			}
			closedir(names);
		}
		closedir(plugins);
	}
	closedir(pods);
}

static int reconstruct(struct reconciler *r, struct error_info *err)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	bool same_boot = false;
	json_t *csi = NULL;
	int k;
	void *v;

	k = journal_load(r->journal, r->asw, &same_boot, &csi, err);
	if (k == -EBADMSG) {
		log_error("journal is corrupt; continuing from the mount table alone", "error",
			  err_msg(err));
		snprintf(r->journal_note, sizeof(r->journal_note),
			 "corrupt at startup, moved aside: %s", err_msg(err));
		err_clear(err);
		journal_mark_dirty(r->journal);
	} else if (k < 0) {
		return k;
	}
	/* CSI entries are kubelet's: after a reboot it calls again for what it still wants, so
	 * only entries of this boot are restored (a deleted pod is not resurrected). */
	if (csi && same_boot && r->kubelet_root) {
		k = requests_import_csi(r, csi, err);
		if (k < 0) {
			log_error("journal: CSI entries unreadable, waiting for kubelet to call again",
				  "error", err_msg(err));
			err_clear(err);
		}
	} else if (csi && !same_boot) {
		log_info("journal is from an earlier boot: CSI entries wait for kubelet");
	}
	json_decref(csi);
	/* Written once at start even if nothing changes: proves the state dir works, and
	 * records this boot's id. */
	journal_mark_dirty(r->journal);
	/* After a reboot nothing an attach made survives. */
	while (!same_boot && hashmap_iterate(asw_devices(r->asw), &it, &v, NULL)) {
		struct asw_device *d = v;
		d->attached = false;
		device_attachment_clear(&d->att);
		journal_mark_dirty(r->journal);
	}
	k = refresh_table(r);
	if (k < 0)
		return err_set(err, k, "cannot read the mount table");
	adopt_untracked_device_mounts(r);
	if (r->specs) {
		k = spec_source_scan(r->specs);
		if (k < 0)
			return err_set(err, k, "reading pods dir %s: %s", r->pods_dir, strerror(-k));
	}
	remove_stale_pod_dirs(r);
	log_info("reconstructed actual state", "pod_mounts",
		 LOG_INT(hashmap_size(asw_pod_mounts(r->asw))), "devices",
		 LOG_INT(hashmap_size(asw_devices(r->asw))), "desired_pod_volumes",
		 LOG_INT(hashmap_size(dsw_pod_volumes(r->dsw))), "journal_same_boot",
		 same_boot ? "true" : "false");
	return 0;
}

/* --- the loop --- */

static void arm_timer(struct reconciler *r)
{
	uint64_t now = now_ms(), next = r->last_resync_ms + r->cfg.resync_ms;
	uint64_t b = backoff_next_deadline(r->backoff);
	struct itimerspec its = { 0 };

	if (b < next)
		next = b;
	if (r->cfg.health_interval_ms && r->last_health_ms + r->cfg.health_interval_ms < next)
		next = r->last_health_ms + r->cfg.health_interval_ms;
	if (r->csi_save_due_ms && r->csi_save_due_ms < next)
		next = r->csi_save_due_ms;
	if (r->table_dirty) {
		uint64_t t = r->last_refresh_ms + r->cfg.refresh_min_interval_ms;
		if (t < next)
			next = t;
	}
	if (r->watchdog_interval_ms && r->last_watchdog_ms + r->watchdog_interval_ms < next)
		next = r->last_watchdog_ms + r->watchdog_interval_ms;
	if (next <= now)
		next = now + 1;
	its.it_value.tv_sec = (time_t)(next / 1000);
	its.it_value.tv_nsec = (long)(next % 1000) * 1000000;
	timerfd_settime(r->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void notify_systemd(struct reconciler *r)
{
	uint64_t now = now_ms();
	char status[128];

	if (r->watchdog_interval_ms && now - r->last_watchdog_ms >= r->watchdog_interval_ms) {
		sd_notify(0, "WATCHDOG=1");
		r->last_watchdog_ms = now;
	}
	snprintf(status, sizeof(status), "STATUS=desired=%zu mounted=%zu failing=%u",
		 r->stats.desired_pod_volumes, r->stats.mounted_pod_volumes, r->stats.failing);
	if (!streq(status, r->last_status)) {
		sd_notify(0, status);
		memcpy(r->last_status, status, sizeof(status));
	}
}

static bool should_stop(struct reconciler *r)
{
	bool stop;

	pthread_mutex_lock(&r->stats_lock);
	stop = r->stop;
	pthread_mutex_unlock(&r->stats_lock);
	return stop;
}

static bool take_resync_request(struct reconciler *r)
{
	bool requested;

	pthread_mutex_lock(&r->stats_lock);
	requested = r->resync_requested;
	r->resync_requested = false;
	pthread_mutex_unlock(&r->stats_lock);
	return requested;
}

/* A resync an operator asked for: the table is read and a pass run now, and both are timed. */
static void forced_resync(struct reconciler *r)
{
	struct timespec a, b, c;

	clock_gettime(CLOCK_MONOTONIC, &a);
	refresh_table(r);
	clock_gettime(CLOCK_MONOTONIC, &b);
	r->pass_needed = false;
	reconcile_pass(r);
	clock_gettime(CLOCK_MONOTONIC, &c);
	log_info("forced resync", "table_entries", LOG_INT(mount_table_size(r->table)),
		 "desired_pod_volumes", LOG_INT(hashmap_size(dsw_pod_volumes(r->dsw))),
		 "refresh_us",
		 LOG_INT((b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000),
		 "pass_us", LOG_INT((c.tv_sec - b.tv_sec) * 1000000 + (c.tv_nsec - b.tv_nsec) / 1000));
}

static void handle_event(struct reconciler *r, int fd)
{
	uint64_t n;

	if (r->specs && fd == spec_source_get_fd(r->specs)) {
		if (spec_source_dispatch(r->specs) != 0)
			r->pass_needed = true;
	} else if (fd == mount_monitor_get_fd(r->monitor)) {
		if (mount_monitor_drain(r->monitor) > 0)
			r->table_dirty = true;
	} else if (fd == executor_get_fd(r->ex)) {
		drain_completed(r);
	} else if (fd == r->timer_fd) {
		(void)!read(r->timer_fd, &n, sizeof(n));
		if (backoff_next_deadline(r->backoff) <= now_ms())
			r->pass_needed = true;
	} else if (fd == r->wake_fd) {
		(void)!read(r->wake_fd, &n, sizeof(n));
		requests_take_incoming(r);
	} else {
		for (size_t i = 0; i < r->cfg.n_sources; i++)
			if (fd == r->cfg.sources[i].fd)
				r->cfg.sources[i].dispatch(r->cfg.sources[i].userdata);
	}
}

static void *reconciler_main(void *arg)
{
	struct reconciler *r = arg;

	while (!should_stop(r)) {
		struct epoll_event evs[8];
		uint64_t now = now_ms();
		int n;

		if (now - r->last_resync_ms >= r->cfg.resync_ms) {
			r->last_resync_ms = now;
			r->table_dirty = true;
			r->last_refresh_ms = 0; /* a resync reads the table now */
		}
		if (r->cfg.health_interval_ms && now - r->last_health_ms >= r->cfg.health_interval_ms) {
			r->last_health_ms = now;
			r->health_due = true;
			r->pass_needed = true;
		}
		/* Our own operations report their mounts; the table is re-read for changes made by
		 * others, at most every refresh_min_interval_ms while a burst goes on. */
		if (take_resync_request(r))
			forced_resync(r);
		if (r->table_dirty && now - r->last_refresh_ms >= r->cfg.refresh_min_interval_ms)
			refresh_table(r);
		if (r->pass_needed) {
			r->pass_needed = false;
			reconcile_pass(r);
		}
		requests_check_waiting(r);
		save_journal(r, false);
		notify_systemd(r);

		arm_timer(r);
		n = epoll_wait(r->epoll_fd, evs, ARRAY_SIZE(evs), -1);
		if (n < 0 && errno != EINTR) {
			log_error("epoll_wait failed", "error", strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++)
			handle_event(r, evs[i].data.fd);
	}
	/* Let operations in flight finish so the journal records what they did. */
	while (executor_pending(r->ex) > 0 || hashmap_size(r->inflight_pod) > 0) {
		struct epoll_event ev;
		if (epoll_wait(r->epoll_fd, &ev, 1, 100) > 0 && ev.data.fd == executor_get_fd(r->ex))
			drain_completed(r);
		else
			drain_completed(r);
		if (executor_pending(r->ex) == 0 && hashmap_size(r->inflight_pod) == 0)
			break;
	}
	drain_completed(r);
	requests_abort_all(r);
	save_journal(r, true);
	return NULL;
}

static int watch_fd(struct reconciler *r, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(r->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

static int watch_sources(struct reconciler *r)
{
	for (size_t i = 0; i < r->cfg.n_sources; i++)
		if (watch_fd(r, r->cfg.sources[i].fd) < 0)
			return -errno;
	return 0;
}

int reconciler_new(const struct reconciler_config *cfg, struct reconciler **ret,
		   struct error_info *err)
{
	struct reconciler *r = calloc(1, sizeof(*r));
	int k;

	if (!r)
		return -ENOMEM;
	r->epoll_fd = r->timer_fd = r->wake_fd = -1;
	pthread_mutex_init(&r->stats_lock, NULL);
	pthread_mutex_init(&r->req_lock, NULL);
	{
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* waits use CLOCK_MONOTONIC */
		pthread_cond_init(&r->req_cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	r->kubelet_root = cfg->kubelet_root ? strdup(cfg->kubelet_root) : NULL;
	r->cfg = *cfg;
	r->root_dir = strdup(cfg->root_dir);
	r->state_dir = strdup(cfg->state_dir);
	r->pods_dir = cfg->pods_dir ? strdup(cfg->pods_dir) : NULL;
	r->pods_root = strdup_printf("%s/pods", cfg->root_dir);
	r->plugins_prefix = strdup_printf("%s/plugins/kubernetes.io/", cfg->root_dir);
	r->cfg.root_dir = r->root_dir;
	r->cfg.state_dir = r->state_dir;
	r->cfg.pods_dir = r->pods_dir;
	r->cfg.kubelet_root = r->kubelet_root;
	r->dsw = dsw_new(cfg->root_dir);
	r->asw = asw_new(cfg->root_dir);
	r->table = mount_table_new();
	r->backoff = backoff_new(cfg->backoff_initial_ms, cfg->backoff_max_ms);
	r->inflight_pod = hashmap_new();
	r->inflight_dev = hashmap_new();
	r->busy = hashmap_new();
	r->pass_releasing = hashmap_new();
	r->pass_held = hashmap_new();
	if (!r->root_dir || !r->state_dir || (cfg->pods_dir && !r->pods_dir) || !r->pods_root ||
	    !r->plugins_prefix || !r->dsw || !r->asw || !r->table || !r->backoff ||
	    !r->inflight_pod || !r->inflight_dev || !r->busy || !r->pass_releasing ||
	    !r->pass_held) {
		reconciler_free(r);
		return -ENOMEM;
	}
	k = path_mkdir_p(r->pods_root, 0750);
	if (k < 0) {
		reconciler_free(r);
		return err_set(err, k, "root dir %s: %s", cfg->root_dir, strerror(-k));
	}
	r->monitor = mount_monitor_new(err);
	if (!r->monitor) {
		reconciler_free(r);
		return err->code ? err->code : -ENOMEM;
	}
	k = journal_open(cfg->state_dir, &r->journal, err);
	if (k == 0)
		k = executor_new(cfg->workers, &r->ex, err);
	if (k == 0 && cfg->pods_dir)
		k = spec_source_new(cfg->pods_dir, r->dsw, &r->specs, err);
	if (k < 0) {
		reconciler_free(r);
		return k;
	}
	r->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	r->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	r->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->epoll_fd < 0 || r->timer_fd < 0 || r->wake_fd < 0 ||
	    watch_fd(r, r->timer_fd) < 0 || watch_fd(r, r->wake_fd) < 0 ||
	    watch_fd(r, executor_get_fd(r->ex)) < 0 ||
	    watch_fd(r, mount_monitor_get_fd(r->monitor)) < 0 ||
	    (r->specs && watch_fd(r, spec_source_get_fd(r->specs)) < 0) ||
	    watch_sources(r) < 0) {
		k = -errno;
		reconciler_free(r);
		return err_set(err, k, "reconciler: cannot set up its event loop: %s",
			       strerror(-k));
	}
	*ret = r;
	return 0;
}

int reconciler_start(struct reconciler *r, struct error_info *err)
{
	uint64_t usec = 0;
	sigset_t all, old;
	int k;

	k = reconstruct(r, err);
	if (k < 0)
		return k;
	if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0)
		r->watchdog_interval_ms = usec / 2000; /* ping twice per interval */
	r->last_resync_ms = r->last_health_ms = r->started_ms = now_ms();
	r->pass_needed = true;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	k = -pthread_create(&r->thread, NULL, reconciler_main, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (k < 0)
		return err_set(err, k, "cannot start the reconciler thread: %s", strerror(-k));
	r->thread_started = true;
	return 0;
}

void reconciler_set_on_ready(struct reconciler *r, void (*on_ready)(void *), void *userdata)
{
	r->cfg.on_ready = on_ready;
	r->cfg.on_ready_userdata = userdata;
}

void reconciler_request_resync(struct reconciler *r)
{
	uint64_t one = 1;

	pthread_mutex_lock(&r->stats_lock);
	r->resync_requested = true;
	pthread_mutex_unlock(&r->stats_lock);
	(void)!write(r->wake_fd, &one, sizeof(one));
}

void reconciler_stop(struct reconciler *r)
{
	uint64_t one = 1;

	if (!r || !r->thread_started)
		return;
	pthread_mutex_lock(&r->stats_lock);
	r->stop = true;
	pthread_mutex_unlock(&r->stats_lock);
	(void)!write(r->wake_fd, &one, sizeof(one));
	pthread_join(r->thread, NULL);
	r->thread_started = false;
}

static void drop_job(struct executor_job *job)
{
	volume_op_free(volume_op_from_job(job));
}

struct reconciler *reconciler_free(struct reconciler *r)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	void *v;

	if (!r)
		return NULL;
	reconciler_stop(r);
	executor_free(r->ex, drop_job);
	spec_source_free(r->specs);
	journal_free(r->journal);
	mount_monitor_free(r->monitor);
	mount_table_free(r->table);
	dsw_free(r->dsw);
	asw_free(r->asw);
	backoff_free(r->backoff);
	hashmap_free(r->inflight_pod);
	hashmap_free(r->inflight_dev);
	hashmap_free(r->pass_releasing);
	hashmap_free(r->pass_held);
	while (r->busy && hashmap_iterate(r->busy, &it, &v, NULL)) {
		free(((struct vol_busy *)v)->name);
		free(v);
	}
	hashmap_free(r->busy);
	if (r->epoll_fd >= 0)
		close(r->epoll_fd);
	if (r->timer_fd >= 0)
		close(r->timer_fd);
	if (r->wake_fd >= 0)
		close(r->wake_fd);
	pthread_mutex_destroy(&r->stats_lock);
	pthread_mutex_destroy(&r->req_lock);
	pthread_cond_destroy(&r->req_cond);
	free(r->kubelet_root);
	free(r->root_dir);
	free(r->state_dir);
	free(r->pods_dir);
	free(r->pods_root);
	free(r->plugins_prefix);
	free(r);
	return NULL;
}

bool reconciler_is_ready(struct reconciler *r)
{
	bool ready;

	pthread_mutex_lock(&r->stats_lock);
	ready = r->ready;
	pthread_mutex_unlock(&r->stats_lock);
	return ready;
}

void reconciler_get_stats(struct reconciler *r, struct reconciler_stats *ret)
{
	pthread_mutex_lock(&r->stats_lock);
	*ret = r->stats;
	pthread_mutex_unlock(&r->stats_lock);
}
