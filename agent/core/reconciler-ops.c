/* reconciler-ops.c - the reconciler's operations in flight: which volumes and targets are
 * busy (at most one operation per volume and target, one device operation per volume),
 * building and starting operations, and applying their results to the actual state when the
 * executor hands them back. */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "path-util.h"
#include "reconciler-internal.h"

struct vol_busy *rec_busy_get(struct reconciler *r, const char *volume, bool create)
{
	struct vol_busy *b;

	if (!volume)
		return NULL;
	b = hashmap_get(r->ops.busy, volume);
	if (b || !create)
		return b;
	b = calloc(1, sizeof(*b));
	if (!b || !(b->name = strdup(volume)) || hashmap_put(r->ops.busy, b->name, b) < 0) {
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
		hashmap_remove(r->ops.busy, b->name);
		free(b->name);
		free(b);
	}
}

bool rec_device_op_running(struct reconciler *r, const char *volume)
{
	struct vol_busy *b = rec_busy_get(r, volume, false);

	return b && b->device_op;
}

bool rec_pod_op_allowed(struct reconciler *r, const char *target, const char *volume)
{
	return !hashmap_get(r->ops.inflight_pod, target) && !rec_device_op_running(r, volume);
}

bool rec_device_op_allowed(struct reconciler *r, const char *volume)
{
	struct vol_busy *b = rec_busy_get(r, volume, false);

	return !b || (!b->device_op && !b->pod_ops);
}

/* --- building operations --- */

struct volume_op *rec_op_new(struct reconciler *r, enum volume_op_kind kind, const char *key,
			     const char *target, const char *volume_name,
			     const struct volume_plugin *plugin, struct volume_spec *spec)
{
	struct volume_op *op = volume_op_new(kind, key);

	if (!op)
		return NULL;
	op->target = strdup(target);
	/* CSI targets and staging paths are walked down from the kubelet root. */
	op->target_root = strdup(r->csi.kubelet_root && path_is_under(target, r->csi.kubelet_root)
					 ? r->csi.kubelet_root
					 : r->root_dir);
	op->volume_name = volume_name ? strdup(volume_name) : NULL;
	op->plugin = plugin;
	op->spec = volume_spec_ref(spec);
	if (!op->target || !op->target_root || (volume_name && !op->volume_name))
		return volume_op_free(op);
	return op;
}

/* What the table shows at target, for a VERIFY: its plugin need not look again. */
static struct mount_seen seen_in_table(struct reconciler *r, const char *target)
{
	const struct mount_info *mi = mount_table_get(r->table, target);

	if (!mi)
		return (struct mount_seen){ 0 };
	return (struct mount_seen){ .mount_id = mi->id,
				    .sb_dev = mi->devno,
				    .read_only = mi->read_only,
				    .stacked = mi->stacked > 1 };
}

/* Marks op as in flight and queues it on list (submitted after the journal is saved). */
void rec_op_start(struct reconciler *r, struct volume_op *op, struct volume_op ***tail)
{
	bool device = op->kind == VOLUME_OP_MOUNT_DEVICE || op->kind == VOLUME_OP_UNMOUNT_DEVICE ||
		      (op->kind == VOLUME_OP_CHECK_HEALTH && op->device);
	struct vol_busy *b = rec_busy_get(r, op->volume_name, true);

	op->queued_ms = now_ms();
	op->inflight_older = r->ops.inflight_newest;
	op->inflight_newer = NULL;
	if (r->ops.inflight_newest)
		r->ops.inflight_newest->inflight_newer = op;
	else
		r->ops.inflight_oldest = op;
	r->ops.inflight_newest = op;
	if (op->kind == VOLUME_OP_VERIFY)
		op->seen = seen_in_table(r, op->target);
	if (device) {
		if (b)
			b->device_op = true;
		hashmap_put(r->ops.inflight_dev, op->volume_name, op);
	} else {
		hashmap_put(r->ops.inflight_pod, op->target, op);
		if (b) {
			b->pod_ops++;
			if (op->kind == VOLUME_OP_TEAR_DOWN)
				b->releasing++;
		}
	}
	**tail = op;
	*tail = (struct volume_op **)&op->job.next;
	r->ops.ops_started++;
	log_debug("reconcile", "operation started", "op", volume_op_kind_name(op->kind), "volume",
		  op->volume_name, "target", op->target);
}

static void finish_op(struct reconciler *r, struct volume_op *op)
{
	struct vol_busy *b = rec_busy_get(r, op->volume_name, false);

	if (op->inflight_older)
		op->inflight_older->inflight_newer = op->inflight_newer;
	else
		r->ops.inflight_oldest = op->inflight_newer;
	if (op->inflight_newer)
		op->inflight_newer->inflight_older = op->inflight_older;
	else
		r->ops.inflight_newest = op->inflight_older;
	op->inflight_older = op->inflight_newer = NULL;
	if (op->kind == VOLUME_OP_MOUNT_DEVICE || op->kind == VOLUME_OP_UNMOUNT_DEVICE ||
	    (op->kind == VOLUME_OP_CHECK_HEALTH && op->device)) {
		if (b)
			b->device_op = false;
		if (hashmap_get(r->ops.inflight_dev, op->volume_name) == op)
			hashmap_remove(r->ops.inflight_dev, op->volume_name);
	} else {
		if (op->kind == VOLUME_OP_VERIFY && op->startup && r->ops.startup_verifies)
			r->ops.startup_verifies--;
		hashmap_remove(r->ops.inflight_pod, op->target);
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
char *rec_pod_ref(const struct dsw_pod_volume *pv)
{
	char buf[520];
	const char *ref = pod_info_ref(&pv->pod, buf, sizeof(buf));

	return ref ? strdup(ref) : NULL;
}

char *rec_cleanup_stop_for(struct reconciler *r, const char *target, bool device)
{
	char *stop;

	if (path_is_under(target, r->pods_root))
		return strdup(r->pods_root);
	if (device && r->csi.kubelet_root && path_is_under(target, r->csi.kubelet_root))
		return strdup(target);
	stop = strdup(target);
	if (stop && strrchr(stop, '/') && strrchr(stop, '/') != stop)
		*strrchr(stop, '/') = '\0';
	return stop;
}

char *rec_key_for(const char *kind, const char *name)
{
	return strdup_printf("%s:%s", kind, name);
}

/* Age in seconds of the oldest operation in flight, 0 when none. */
double rec_oldest_pending_age(struct reconciler *r, uint64_t now)
{
	const struct volume_op *op = r->ops.inflight_oldest;

	return op && op->queued_ms < now ? (double)(now - op->queued_ms) / 1000.0 : 0;
}

/* --- results --- */

static void report_result(struct reconciler *r, struct volume_op *op)
{
	const char *kind = volume_op_kind_name(op->kind);

	if (op->result < 0) {
		const struct backoff_entry *e;
		bool changed = backoff_failed(r->backoff, op->key, now_ms(), err_msg(&op->err));

		r->ops.ops_failed++;
		e = backoff_get(r->backoff, op->key);
		if (changed)
			log_error("operation failed", "op", kind, "plugin",
				  op->plugin ? op->plugin->name : NULL, "volume", op->volume_name,
				  "pod", op->pod_uid, "pod_name", op->pod_ref, "target", op->target,
				  "error", err_msg(&op->err), "retry_in_ms",
				  e ? LOG_INT(e->delay_ms) : "0");
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
	/* Every pod bind of a broken device goes first: the whole volume is visited. */
	rec_touch_target(r, op->target);
	rec_touch_volume(r, op->volume_name);
}

/* Whether pod volumes of volume_name may be waiting for its device to be staged, which waits
 * for the pod operations on the volume to end. */
static bool device_wanted_unmounted(struct reconciler *r, const char *volume_name)
{
	const struct dsw_volume *v = dsw_get_volume(r->dsw, volume_name);
	const struct asw_device *d;

	if (!v || !v->uses_device)
		return false;
	d = asw_get_device(r->asw, volume_name);
	return !d || !d->mounted || d->broken;
}

/* What may have waited on op, for the next pass to visit: its target always.  Everything of
 * its volume after a device operation (its pods may bind it, or stage it again), a tear-down
 * of a volume a pod waits for elsewhere (it may mount it now), and the last pod operation on
 * a volume whose device waits to be staged; otherwise only its device (the last tear-down
 * lets it go), so the k set-ups or tear-downs of a volume k pods share do not visit all k
 * pods each.  A
 * mount that was not verified held up every device release: its verification or removal
 * asks for a full pass. */
static void touch_after(struct reconciler *r, const struct volume_op *op)
{
	bool device = op->kind == VOLUME_OP_MOUNT_DEVICE || op->kind == VOLUME_OP_UNMOUNT_DEVICE;

	/* A start-up mount verified as ours (its result is in the state already), with more
	 * verifies in flight: nothing to do until the last is done, then a full pass. */
	if (op->kind == VOLUME_OP_VERIFY && op->startup && op->verified && op->result >= 0 &&
	    r->ops.startup_verifies && !r->status.ready)
		return;
	rec_touch_target(r, op->target);
	/* A mount nobody verified may have been another pod's, seen at a path it held only for
	 * a moment (its pod dir renamed and back: no mount event says so); the state learned
	 * that pod's mount by its own path, so only a full read of the table shows it gone. */
	if (!op->volume_name && op->kind == VOLUME_OP_TEAR_DOWN)
		r->loop.table_dirty = true;
	if (!op->volume_name || op->kind == VOLUME_OP_VERIFY)
		rec_want_full_pass(r);
	else if (device ||
		 (op->kind == VOLUME_OP_TEAR_DOWN && rec_volume_has_waiters(r, op->volume_name)) ||
		 (!rec_busy_get(r, op->volume_name, false) &&
		  device_wanted_unmounted(r, op->volume_name)))
		rec_touch_volume(r, op->volume_name);
	else
		rec_touch_device(r, op->volume_name);
}

void rec_log_adopted_at_start(struct reconciler *r)
{
	if (r->ops.adopted_at_start)
		log_info("adopted existing mounts", "count", LOG_INT(r->ops.adopted_at_start));
}

/* A mount found in place and kept.  At start-up there is one per volume: a summary line says
 * how many (rec_log_adopted_at_start), each is at debug. */
static void log_adopted(struct reconciler *r, const struct volume_op *op)
{
	if (!r->status.ready) {
		r->ops.adopted_at_start++;
		log_debug("reconcile", "adopted existing mount", "volume", op->volume_name, "pod",
			  op->pod_uid, "target", op->target);
	} else {
		log_info("adopted existing mount", "volume", op->volume_name, "pod", op->pod_uid,
			 "pod_name", op->pod_ref, "target", op->target);
	}
}

/* The outcome of each kind of operation, on the reconciler thread: what it changes in the
 * actual state (and the journal), and its one log line.  gen is the mount table's generation
 * the change is learned at. */
/* Keeps the project ID op read on the target's CSI pod volume (journaled), and says so when
 * it is not the one the journal had: the directory is the record (set-up and adoption set the
 * size on it again), the journal's copy is checked against it. */
static void note_project_id(struct reconciler *r, const struct volume_op *op)
{
	struct dsw_pod_volume *pv;
	char was[16], is[16];

	if (!op->project_id || !(pv = dsw_get_pod_volume(r->dsw, op->target)) || !pv->csi ||
	    pv->project_id == op->project_id)
		return;
	if (pv->project_id) {
		snprintf(was, sizeof(was), "%u", pv->project_id);
		snprintf(is, sizeof(is), "%u", op->project_id);
		log_warning("the directory's project ID is not the journal's; keeping the "
			    "directory's",
			    "volume", op->volume_name, "target", op->target, "journal", was,
			    "directory", is);
	}
	pv->project_id = op->project_id;
	rec_csi_journal_changed(r);
}

static void applied_set_up(struct reconciler *r, struct volume_op *op, uint64_t gen)
{
	const char *name;

	if (op->result < 0)
		return;
	name = strrchr(op->target, '/') + 1;
	asw_set_pod_mount(r->asw, op->target, op->pod_uid, name, op->plugin->name, op->volume_name,
			  op->read_only || op->spec->read_only, op->mount_id, gen);
	note_project_id(r, op);
	if (op->found_in_place) { /* the bind was there already: nothing was mounted */
		log_adopted(r, op);
		return;
	}
	log_info("volume mounted", "plugin", op->plugin->name, "volume", op->volume_name, "pod",
		 op->pod_uid, "pod_name", op->pod_ref, "target", op->target, "read_only",
		 op->read_only ? "true" : "false", "ms", LOG_INT(op->duration_ms));
}

static void applied_tear_down(struct reconciler *r, struct volume_op *op, uint64_t gen)
{
	if (op->result < 0)
		return;
	asw_remove_pod_mount(r->asw, op->target, gen);
	if (!dsw_get_pod_volume(r->dsw, op->target))
		asw_untrack_target(r->asw, op->target);
	log_info("volume unmounted", "plugin", op->plugin ? op->plugin->name : NULL, "volume",
		 op->volume_name ? op->volume_name : "unknown", "pod", op->pod_uid, "target",
		 op->target);
}

static void applied_verify(struct reconciler *r, struct volume_op *op)
{
	struct asw_pod_mount *pm = asw_get_pod_mount(r->asw, op->target);

	if (op->result < 0 || !pm)
		return;
	if (op->verified) {
		asw_pod_mount_set_volume(r->asw, pm, op->volume_name);
		pm->read_only = op->read_only || op->spec->read_only;
		pm->mount_id = op->mount_id;
		asw_pod_mount_changed(r->asw, pm);
		note_project_id(r, op);
		log_adopted(r, op);
	} else {
		pm->foreign = true;
		log_info("mount holds something else, replacing it", "volume", op->volume_name,
			 "pod", op->pod_uid, "target", op->target);
	}
}

static void applied_mount_device(struct reconciler *r, struct volume_op *op, uint64_t gen)
{
	struct asw_device *d = asw_get_device(r->asw, op->volume_name);

	if (!d)
		return;
	/* Keep whatever attach made, even on failure: detach needs it. */
	if (op->detached)
		device_attachment_clear(&d->att); /* the old one is gone */
	if (op->att.device_path && !streq_ptr(d->att.device_path, op->att.device_path)) {
		device_attachment_clear(&d->att);
		d->att = op->att;
		memset(&op->att, 0, sizeof(op->att));
	}
	d->attached = d->att.device_path != NULL;
	if (op->result == 0 && op->fs_uuid[0] && !streq_ptr(d->fs_uuid, op->fs_uuid)) {
		free(d->fs_uuid);
		d->fs_uuid = strdup(op->fs_uuid); /* NULL on no memory: not recorded, as before */
	}
	if (op->result == 0) {
		d->mounted = true;
		d->read_only = op->read_only;
		d->mount_id = op->mount_id;
		d->learned_gen = gen;
		log_info("device mounted", "plugin", op->plugin->name, "volume", op->volume_name,
			 "device", d->att.device_path, "target", op->target, "read_only",
			 op->read_only ? "true" : "false", "ms", LOG_INT(op->duration_ms));
		if (op->content[0])
			log_info("raw block volume handed out with data on it", "volume",
				 op->volume_name, "content", op->content);
	} else if (!d->mounted && (!plugin_has_detach(op->plugin) || !d->attached) && !d->fs_uuid) {
		/* A device with a recorded filesystem keeps its entry, not mounted, until the
		 * volume is released: the next attempt must not find it blank with no record. */
		asw_remove_device(r->asw, op->volume_name);
	}
	journal_mark_dirty(r->journal);
}

static void applied_unmount_device(struct reconciler *r, struct volume_op *op)
{
	struct asw_device *d;

	if (op->result < 0)
		return;
	d = asw_get_device(r->asw, op->volume_name);
	log_info("device unmounted", "plugin", op->plugin ? op->plugin->name : NULL, "volume",
		 op->volume_name, "target", op->target, "reason",
		 d && d->broken ? "broken, will be staged again" : NULL);
	asw_remove_device(r->asw, op->volume_name);
	journal_mark_dirty(r->journal);
}

/* A finished operation: its error masked, reported and told to the requests waiting on it,
 * then its outcome applied by its kind, and the keys it touched visited next. */
static void apply_result(struct reconciler *r, struct volume_op *op)
{
	uint64_t gen = mount_table_generation(r->table);

	finish_op(r, op);
	/* The error goes to the log, the status and a CSI answer: never with a secret in it. */
	volume_spec_mask_text(op->spec, op->err.msg, sizeof(op->err.msg));
	if (op->kind == VOLUME_OP_CHECK_HEALTH) {
		apply_health(r, op);
		touch_after(r, op);
		return;
	}
	report_result(r, op);
	if (op->result < 0)
		rec_requests_op_failed(r, op);
	switch (op->kind) {
	case VOLUME_OP_SET_UP:
		applied_set_up(r, op, gen);
		break;
	case VOLUME_OP_TEAR_DOWN:
		applied_tear_down(r, op, gen);
		break;
	case VOLUME_OP_VERIFY:
		applied_verify(r, op);
		break;
	case VOLUME_OP_MOUNT_DEVICE:
		applied_mount_device(r, op, gen);
		break;
	case VOLUME_OP_UNMOUNT_DEVICE:
		applied_unmount_device(r, op);
		break;
	case VOLUME_OP_CHECK_HEALTH:
		break; /* handled by apply_health */
	}
	touch_after(r, op);
}

void rec_op_done(struct reconciler *r, struct volume_op *op)
{
	apply_result(r, op);
	volume_op_free(op);
	r->ops.ops_since_trim++;
	r->ops.last_op_done_ms = now_ms();
}

void rec_drain_completed(struct reconciler *r)
{
	struct executor_job *job = executor_take_completed(r->ex);

	while (job) {
		struct executor_job *next = job->next;

		rec_op_done(r, volume_op_from_job(job));
		job = next;
	}
}

uint64_t rec_trim_deadline(struct reconciler *r)
{
	if (r->ops.ops_since_trim < TRIM_AFTER_OPS || !r->status.ready ||
	    hashmap_size(r->ops.inflight_pod) || hashmap_size(r->ops.inflight_dev))
		return UINT64_MAX;
	return r->ops.last_op_done_ms + TRIM_QUIET_MS;
}

void rec_trim_after_burst(struct reconciler *r)
{
	if (now_ms() < rec_trim_deadline(r))
		return;
	r->ops.ops_since_trim = 0;
	malloc_trim(0);
}
