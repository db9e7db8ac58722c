/* reconciler-requests.c - CSI Node calls as desired-state changes.
 *
 * A CSI call hands a request to the reconciler thread (reconciler_submit) and is answered from its
 * completion on that thread, with no thread waiting for it (reconciler_request waits, for callers
 * that need the answer in hand: INFO lookups, `volagent status`).  The reconciler checks it against
 * the desired state (a compatible repeat joins the one in progress; a conflicting one is refused),
 * changes the desired state, and answers once the actual state matches: the staging mount is there,
 * the publish target is mounted, the target or the staging mount is gone.  If an operation for it
 * fails first, the request fails with that error and its change is withdrawn, so kubelet's retry
 * starts afresh.  CSI entries are kept in the journal, so a restarted agent adopts what kubelet
 * asked for.
 *
 * The access-mode checks of a publish are made here, against the desired state, so that two
 * publishes cannot both pass them: a volume keeps one access mode on the node, and a
 * single-writer mode allows one target (access_mode_refused). */
#include <errno.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kubelet-record.h"
#include "log.h"
#include "macro.h"
#include "mount-options.h"
#include "mount-util.h"
#include "path-util.h"
#include "quota.h"
#include "reconciler-internal.h"

/* What a sensitive option is journaled as (volume-spec.h). */
#define MASKED_OPTION VOLUME_SPEC_MASKED_OPTION

struct pending_request {
	struct pending_request *next;
	struct volume_request *req;
	char *name; /* "csi:<volume_id>" */
	struct volume_request_result result;
	bool done;
	bool sync;	  /* reconciler_request: a caller waits on cond */
	atomic_uint refs; /* a waiting caller and the reconciler; dropped outside req_lock */
	/* The caller waits on its own condition (with req_lock): an answer wakes that one
	 * caller, not every CSI worker waiting (16 in flight woke 16 threads per answer). */
	pthread_cond_t cond;
	/* reconciler_submit: told the outcome on the reconciler thread, or -ETIMEDOUT at
	 * until_ms (CLOCK_MONOTONIC ms, now_ms()); NULL once told.  A request that timed out
	 * stays on the waiting list, so that a failure still withdraws its change. */
	reconciler_done_fn on_done;
	void *userdata;
	uint64_t until_ms;
};

struct volume_request *volume_request_new(enum volume_request_kind kind)
{
	struct volume_request *req = calloc(1, sizeof(*req));

	if (req)
		req->kind = kind;
	return req;
}

struct volume_request *volume_request_free(struct volume_request *req)
{
	if (!req)
		return NULL;
	free(req->volume_id);
	free(req->path);
	free(req->staging_path);
	free(req->fingerprint);
	pod_info_clear(&req->pod);
	volume_spec_unref(req->spec); /* wipes any secrets with the last reference */
	free(req);
	return NULL;
}

/* Drops a reference, not under req_lock: the last one frees p (its cond: the reconciler
 * drops its own only after its signal returned). */
static void pending_unref(struct pending_request *p)
{
	if (atomic_fetch_sub(&p->refs, 1) > 1)
		return;
	volume_request_free(p->req);
	if (p->sync)
		pthread_cond_destroy(&p->cond);
	free(p->result.status_json); /* not taken by a caller that gave up waiting */
	free(p->name);
	free(p);
}

/* A pending request for req (consumed), with refs references.  NULL: no memory (req freed). */
static struct pending_request *pending_new(struct volume_request *req, unsigned refs)
{
	struct pending_request *p = calloc(1, sizeof(*p));

	if (!p || !(p->name = strdup_printf("csi:%s", req->volume_id ? req->volume_id : ""))) {
		free(p);
		volume_request_free(req);
		return NULL;
	}
	p->req = req;
	p->refs = refs;
	return p;
}

/* Puts p on the incoming list.  Returns whether it is the first one there (the others were
 * handed over with a wake-up of the loop already). */
static bool pending_push(struct reconciler *r, struct pending_request *p)
{
	bool first;

	pthread_mutex_lock(&r->csi.lock);
	p->next = r->csi.incoming;
	r->csi.incoming = p;
	first = !p->next;
	pthread_mutex_unlock(&r->csi.lock);
	return first;
}

/* Hands p to the reconciler thread. */
static void pending_enqueue(struct reconciler *r, struct pending_request *p)
{
	uint64_t one = 1;

	/* Not the first: the write for the first one not taken yet wakes it for all. */
	if (pending_push(r, p))
		(void)!write(r->loop.wake_fd, &one, sizeof(one));
}

/* Whether a submitted request was told its outcome (under state_lock). */
static bool told(void *arg)
{
	const struct pending_request *p = arg;

	return !p->on_done;
}

int reconciler_submit(struct reconciler *r, struct volume_request *req, long long timeout_ms,
		      reconciler_done_fn done, void *userdata)
{
	struct pending_request *p = pending_new(req, 2); /* the reconciler's and this call's */

	if (!p)
		return -ENOMEM;
	p->on_done = done;
	p->userdata = userdata;
	p->until_ms = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
	if (!rec_caller_begin(r)) {
		pending_unref(p); /* this call's: the reconciler's keeps it */
		pending_enqueue(r, p);
		return 0;
	}
	/* The loop sleeps: this thread decides, runs the call's operation and answers, as the
	 * loop would (reconciler-caller.c).  Requests handed over before it go first. */
	(void)pending_push(r, p);
	rec_requests_take_incoming(r);
	rec_caller_run(r, p->req->path, p->name, told, p);
	rec_caller_end(r);
	pending_unref(p);
	return 0;
}

int reconciler_request(struct reconciler *r, struct volume_request *req, long long timeout_ms,
		       struct volume_request_result *ret)
{
	struct pending_request *p = pending_new(req, 2);
	pthread_condattr_t ca;
	struct timespec until;
	bool done;

	if (!p)
		return -ENOMEM;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* until is CLOCK_MONOTONIC */
	pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
	p->sync = true;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (timeout_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pending_enqueue(r, p);

	pthread_mutex_lock(&r->csi.lock);
	while (!p->done && pthread_cond_timedwait(&p->cond, &r->csi.lock, &until) == 0)
		;
	done = p->done;
	if (done) {
		*ret = p->result;
		p->result.status_json = NULL; /* handed to the caller */
	}
	pthread_mutex_unlock(&r->csi.lock);
	pending_unref(p);
	return done ? 0 : -ETIMEDOUT;
}

/* Answers p and drops the reconciler's reference.  p must no longer be on the waiting list.
 * The result is written before the lock (the caller reads it only once done is set, under
 * the lock) and the caller is signalled after it, so that it does not wake up only to
 * block on req_lock.  A submitted request is told on this thread, unless it timed out. */
static void complete(struct reconciler *r, struct pending_request *p, int error, const char *fmt,
		     ...)
{
	va_list ap;

	p->result.error = error;
	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(p->result.message, sizeof(p->result.message), fmt, ap);
		va_end(ap);
	}
	if (p->on_done) {
		reconciler_done_fn done = p->on_done;

		p->on_done = NULL;
		done(0, &p->result, p->userdata);
	} else if (p->sync) {
		pthread_mutex_lock(&r->csi.lock);
		p->done = true;
		pthread_mutex_unlock(&r->csi.lock);
		pthread_cond_signal(&p->cond);
	}
	pending_unref(p);
}

/* A submitted request's time is up: tells its caller -ETIMEDOUT; p stays where it is. */
static void expire(struct pending_request *p)
{
	struct volume_request_result res = { .error = -ETIMEDOUT, .access_mode = -1 };
	reconciler_done_fn done = p->on_done;

	p->on_done = NULL;
	done(-ETIMEDOUT, &res, p->userdata);
	free(res.status_json);
}

uint64_t rec_requests_next_deadline(struct reconciler *r)
{
	uint64_t next = UINT64_MAX;

	for (const struct pending_request *p = r->csi.waiting; p; p = p->next)
		if (p->on_done && p->until_ms < next)
			next = p->until_ms;
	return next;
}

static void wait_for(struct reconciler *r, struct pending_request *p)
{
	p->next = r->csi.waiting;
	r->csi.waiting = p;
	/* The request's path (target or staging path), and the volume's device.  A publish or an
	 * unpublish changes one target: the volume's other targets are not visited (k of them
	 * would make each call O(k)); a stage or unstage, everything of the volume. */
	rec_touch_target(r, p->req->path);
	if (p->req->kind == VOLUME_REQUEST_PUBLISH || p->req->kind == VOLUME_REQUEST_UNPUBLISH)
		rec_touch_device(r, p->name);
	else
		rec_touch_volume(r, p->name);
}

/* "<kubelet>/pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount" -> uid and pv; "csi" and the
 * target's parent dir name otherwise. */
static void target_owner(const char *target, char *uid, char *name, size_t size)
{
	const char *p = strstr(target, "/pods/"), *v;

	snprintf(uid, size, "csi");
	snprintf(name, size, "%s", target);
	if (p && (v = strstr(p, "/volumes/kubernetes.io~csi/"))) {
		const char *pv = v + strlen("/volumes/kubernetes.io~csi/"), *end = strchr(pv, '/');
		snprintf(uid, size, "%.*s", (int)(v - p - strlen("/pods/")), p + strlen("/pods/"));
		snprintf(name, size, "%.*s", (int)(end ? (size_t)(end - pv) : strlen(pv)), pv);
	}
}

/* Whether p, which would add a CSI entry, is refused because the journal cannot be written
 * (its saves fail): work whose record would be lost is not started; the caller gets a
 * retryable error (EAGAIN: ABORTED, which kubelet calls again) naming the state dir.  Once a
 * save works again, the call is taken. */
static bool journal_refused(struct reconciler *r, struct pending_request *p)
{
	if (!r->journal_health.error[0])
		return false;
	complete(r, p, -EAGAIN,
		 "not started: the journal in state dir %s cannot be written (%s); call again",
		 r->state_dir, r->journal_health.error);
	return true;
}

static void apply_stage(struct reconciler *r, struct pending_request *p)
{
	struct volume_request *req = p->req;
	struct dsw_volume *v = dsw_get_volume(r->dsw, p->name);

	if (v && v->staged) {
		if (!streq_ptr(v->fingerprint, req->fingerprint) ||
		    (v->device_mount_path && !streq(v->device_mount_path, req->path)))
			return complete(r, p, -EEXIST,
					"volume %s is already staged at %s with other settings",
					req->volume_id,
					v->device_mount_path ? v->device_mount_path
							     : "(no device)");
	} else if (v) {
		return complete(r, p, -EEXIST,
				"volume %s is already published without a stage; unpublish it first",
				req->volume_id);
	} else if (journal_refused(r, p)) {
		return;
	} else {
		_cleanup_free_ char *key = rec_key_for("dev", p->name);
		v = dsw_csi_stage(r->dsw, p->name, req->volume_id, req->spec, req->plugin,
				  req->path, req->fingerprint);
		if (!v)
			return complete(r, p, -ENOMEM, "out of memory");
		if (key)
			backoff_forget(r->backoff, key); /* kubelet's call, kubelet's backoff */
		rec_csi_journal_changed(r);
	}
	if (!v->uses_device)
		return complete(r, p, 0, NULL); /* nothing to mount until publish */
	wait_for(r, p);
}

/* The CSI access mode a fingerprint holds ("mode=<n>;", see struct volume_request), or -1. */
static int fingerprint_mode(const char *fp)
{
	const char *m = fp ? strstr(fp, ";mode=") : NULL;

	return m ? atoi(m + strlen(";mode=")) : -1;
}

/* VolumeCapability.AccessMode.Mode by number, for messages. */
static const char *mode_name(int mode)
{
	static const char *const names[] = {
		"UNKNOWN",
		"SINGLE_NODE_WRITER",
		"SINGLE_NODE_READER_ONLY",
		"MULTI_NODE_READER_ONLY",
		"MULTI_NODE_SINGLE_WRITER",
		"MULTI_NODE_MULTI_WRITER",
		"SINGLE_NODE_SINGLE_WRITER",
		"SINGLE_NODE_MULTI_WRITER",
	};

	return mode >= 0 && (size_t)mode < ARRAY_SIZE(names) ? names[mode] : "UNKNOWN";
}

/* A target of v other than path, or NULL (the first two of v's list at most). */
static const struct dsw_pod_volume *other_target(const struct dsw_volume *v, const char *path)
{
	for (const struct dsw_pod_volume *pv = v->pod_volumes; pv; pv = pv->next_of_volume)
		if (!streq(pv->target, path))
			return pv;
	return NULL;
}

/* The access-mode checks of a publish at a new target of v (CSI spec, NodePublishVolume, the
 * table for SINGLE_NODE_MULTI_WRITER plugins): it must ask the mode v was staged with and the
 * mode of its other targets (a second publish with another capability is FAILED_PRECONDITION),
 * and a mode that allows one target per node (req->single_writer) refuses a second one.
 * Returns true when p was refused (answered). */
static bool access_mode_refused(struct reconciler *r, struct pending_request *p,
				const struct dsw_volume *v)
{
	const struct volume_request *req = p->req;
	int want = fingerprint_mode(req->fingerprint), have;
	const struct dsw_pod_volume *other;

	if (v->staged && (have = fingerprint_mode(v->fingerprint)) >= 0 && have != want) {
		complete(r, p, -EOPNOTSUPP,
			 "volume %s is staged with access mode %s, not %s: unpublish and unstage it "
			 "to change the mode",
			 req->volume_id, mode_name(have), mode_name(want));
		return true;
	}
	other = other_target(v, req->path);
	if (!other)
		return false;
	have = fingerprint_mode(other->fingerprint);
	if (have >= 0 && have != want) {
		complete(r, p, -EOPNOTSUPP,
			 "volume %s is published at %s with access mode %s, not %s", req->volume_id,
			 other->target, mode_name(have), mode_name(want));
		return true;
	}
	if (req->single_writer) {
		complete(r, p, -EOPNOTSUPP,
			 "volume %s is %s and already published on this node at %s: one target at "
			 "a time",
			 req->volume_id, mode_name(want), other->target);
		return true;
	}
	return false;
}

/* The SELinux label a publish asks for (context=, fscontext=, defcontext=, rootcontext= in its
 * mount options) must be the one v's filesystem was mounted with, or that v's other targets
 * asked for: the label is set when the filesystem is mounted, and a bind of that mount cannot
 * change it.  Another label is a final error naming both.  Returns true when p was refused
 * (answered). */
static bool selinux_label_refused(struct reconciler *r, struct pending_request *p,
				  const struct dsw_volume *v)
{
	_cleanup_free_ char *have = mount_options_selinux(v->spec->mount_options);
	_cleanup_free_ char *want = mount_options_selinux(p->req->spec->mount_options);

	if (!have || !want) {
		complete(r, p, -ENOMEM, "out of memory");
		return true;
	}
	if (streq(have, want))
		return false;
	complete(r, p, -EOPNOTSUPP,
		 "volume %s is %s with SELinux label %s, not %s: a bind cannot relabel it; "
		 "unpublish and unstage it to change the label",
		 p->req->volume_id, v->staged ? "staged" : "published", *have ? have : "(none)",
		 *want ? want : "(none)");
	return true;
}

static void apply_publish(struct reconciler *r, struct pending_request *p)
{
	struct volume_request *req = p->req;
	struct dsw_volume *v = dsw_get_volume(r->dsw, p->name);
	struct dsw_pod_volume *pv = dsw_get_pod_volume(r->dsw, req->path);
	char uid[256], name[256];

	if (pv) {
		if (!pv->csi || pv->volume != v || !streq_ptr(pv->fingerprint, req->fingerprint))
			return complete(r, p, -EEXIST,
					"%s is already published with another volume, capability or "
					"readonly",
					req->path);
		return wait_for(r, p); /* a repeat: answered with the first */
	}
	if (journal_refused(r, p))
		return;
	if (v && v->spec->block != req->spec->block)
		return complete(r, p, -EOPNOTSUPP,
				"volume %s is %s as a %s volume; it cannot be published as a %s "
				"volume",
				req->volume_id, v->staged ? "staged" : "published",
				v->spec->block ? "raw block" : "mount",
				req->spec->block ? "raw block" : "mount");
	if (v && v->uses_device &&
	    (!v->staged || !req->staging_path || !streq(req->staging_path, v->device_mount_path)))
		return complete(r, p, -EOPNOTSUPP, "volume %s is not staged at %s", req->volume_id,
				req->staging_path ? req->staging_path : "(none given)");
	if (!v) {
		if (plugin_uses_device(req->plugin, req->spec))
			return complete(r, p, -EOPNOTSUPP,
					"volume %s is not staged: call NodeStageVolume first",
					req->volume_id);
		v = dsw_csi_volume(r->dsw, p->name, req->volume_id, req->spec, req->plugin);
		if (!v)
			return complete(r, p, -ENOMEM, "out of memory");
	}
	if (access_mode_refused(r, p, v) || selinux_label_refused(r, p, v))
		return;
	target_owner(req->path, uid, name, sizeof(name));
	pv = dsw_csi_publish(r->dsw, v, req->path, uid, name, req->read_only, req->fingerprint,
			     &req->pod);
	if (!pv || asw_track_target(r->asw, req->path, uid, name, v->plugin->name) < 0) {
		if (pv)
			dsw_csi_unpublish(r->dsw, req->path);
		return complete(r, p, -ENOMEM, "out of memory");
	}
	{
		_cleanup_free_ char *key = rec_key_for("pod", req->path);
		if (key)
			backoff_forget(r->backoff, key);
	}
	rec_csi_journal_changed(r);
	wait_for(r, p);
}

bool rec_requests_journal_record(struct reconciler *r, const char *volume_id, const char *path)
{
	_cleanup_free_ char *key = NULL;

	if (!r->csi.recorded || !(key = strdup_printf("%s\x1f%s", volume_id, path)))
		return false;
	return hashmap_get(r->csi.recorded, key) != NULL;
}

/* Whether a mount at path that nothing in the desired state explains is the agent's own
 * (the journal was lost, the agent crashed before recording it, or the journal's entries are
 * of an earlier boot and wait for kubelet): only when the agent's own record (the journal of
 * an earlier boot) or kubelet's record of the path (vol_data.json: this driver) names
 * volume_id there.  Anything else (a secret tmpfs, another driver's volume) is someone
 * else's, is logged and left alone: for this volume the call is answered as for one not
 * published (or staged) there. */
static bool unknown_mount_is_own(struct reconciler *r, const char *path, const char *volume_id)
{
	if (mnt_util_is_mount_root(path) != 1)
		return false;
	if (rec_requests_journal_record(r, volume_id, path) ||
	    kubelet_record_owns(r->csi.kubelet_root, path, r->csi.driver_name, volume_id))
		return true;
	log_info("not this driver's mount by kubelet's record, leaving it alone", "volume_id",
		 volume_id, "path", path);
	return false;
}

/* A mount that is the agent's own by kubelet's record: made known as unverified, so the next
 * pass unmounts it. */
static void adopt_unknown_mount(struct reconciler *r, const char *path)
{
	char uid[256], name[256];
	int id;

	if (mnt_util_mount_id(path, &id) < 0)
		return;
	target_owner(path, uid, name, sizeof(name));
	asw_track_target(r->asw, path, uid, name, "csi");
	asw_set_pod_mount(r->asw, path, uid, name, "csi", NULL, false, id, 0);
}

/* What plugins keep for an unpublished target that is not mounted (an ephemeral volume's
 * directory) goes with the unpublish, also when the agent lost its record of the publish in a
 * crash: not only at the next start's orphan sweep. */
static void release_target(struct reconciler *r, const char *target)
{
	const struct volume_plugin *pl;

	for (size_t i = 0; (pl = plugin_registry_get(i)); i++) {
		struct error_info err = { 0 };

		if (plugin_release_target(pl, target, &err) < 0)
			log_warning("could not remove what an unpublished target left, ignoring",
				    "plugin", pl->name, "target", target, "error", err_msg(&err));
	}
}

static void apply_unpublish(struct reconciler *r, struct pending_request *p)
{
	const char *target = p->req->path;
	struct dsw_pod_volume *pv = dsw_get_pod_volume(r->dsw, target);

	if (pv && !pv->csi)
		return complete(r, p, -EEXIST, "%s belongs to a pod spec file, not to CSI", target);
	if (pv && pv->volume->volume_id && !streq(pv->volume->volume_id, p->req->volume_id))
		return complete(r, p, -ENOENT,
				"volume %s is not published at %s (another volume is)",
				p->req->volume_id, target);
	if (pv) {
		dsw_csi_unpublish(r->dsw, target);
		rec_csi_journal_changed(r);
	} else if (!asw_get_pod_mount(r->asw, target)) {
		if (unknown_mount_is_own(r, target, p->req->volume_id))
			adopt_unknown_mount(r, target);
		else if (mnt_util_is_mount_root(target) == 1)
			return complete(r, p, 0, NULL); /* someone else's: not published here */
	}
	if (!asw_get_pod_mount(r->asw, target) && !hashmap_get(r->ops.inflight_pod, target)) {
		/* Not mounted: remove the target if it is an empty dir we may have made (only
		 * where kubelet puts CSI targets: an empty dir of another volume stays). */
		char record[4096];
		if (kubelet_csi_record_path(r->csi.kubelet_root, target, record, sizeof(record))) {
			release_target(r, target);
			(void)rmdir(target);
		}
		return complete(r, p, 0, NULL);
	}
	wait_for(r, p);
}

/* Whether a CSI volume's device is staged (mounted) at path. */
static bool staged_at(struct reconciler *r, const char *path)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	void *value;

	while (hashmap_iterate(dsw_volumes(r->dsw), &it, &value, NULL)) {
		const struct dsw_volume *v = value;
		if (v->csi && v->staged && v->device_mount_path &&
		    streq(v->device_mount_path, path))
			return true;
	}
	return false;
}

static void apply_unstage(struct reconciler *r, struct pending_request *p)
{
	struct dsw_volume *v = dsw_get_volume(r->dsw, p->name);
	const char *path;

	if (p->req->staging_path && v && v->staged && v->device_mount_path &&
	    streq(v->device_mount_path, p->req->staging_path)) {
		/* A raw block volume, staged at the file that holds its device. */
		char *held = p->req->staging_path;

		p->req->staging_path = p->req->path;
		p->req->path = held;
	}
	path = p->req->path;

	if (v && v->n_pod_volumes > 0)
		return complete(r, p, -EOPNOTSUPP,
				"volume %s is still published; unpublish it first",
				p->req->volume_id);
	if ((!v || !v->staged) && staged_at(r, path))
		return complete(r, p, -ENOENT, "volume %s is not staged at %s (another volume is)",
				p->req->volume_id, path);
	if (v && v->staged) {
		if (v->device_mount_path && !streq(v->device_mount_path, path))
			return complete(r, p, -EEXIST, "volume %s is staged at %s, not at %s",
					p->req->volume_id, v->device_mount_path, path);
		dsw_csi_unstage(r->dsw, v);
		rec_csi_journal_changed(r);
	}
	{
		/* Kubelet is done with the volume on this node: its filesystem's record goes. */
		struct asw_device *d = asw_get_device(r->asw, p->name);
		if (d && asw_device_is_record_only(d) && !rec_device_op_running(r, p->name)) {
			asw_remove_device(r->asw, p->name);
			journal_mark_dirty(r->journal);
		}
	}
	if (!asw_get_device(r->asw, p->name) && unknown_mount_is_own(r, path, p->req->volume_id)) {
		/* Staged by an agent that lost its journal: release it all the same. */
		struct asw_device *d = asw_add_device(r->asw, p->name, "csi", NULL, path);
		int id = -1;
		if (d) {
			d->mounted = true;
			d->attached = true;
			(void)mnt_util_mount_id(path, &id);
			d->mount_id = id;
			journal_mark_dirty(r->journal);
		}
	}
	if (!asw_get_device(r->asw, p->name) && !rec_device_op_running(r, p->name))
		return complete(r, p, 0, NULL);
	wait_for(r, p);
}

static void apply_info(struct reconciler *r, struct pending_request *p)
{
	const struct dsw_volume *v = dsw_get_volume(r->dsw, p->name);
	const struct asw_device *d = asw_get_device(r->asw, p->name);

	p->result.access_mode = -1;
	if (v) {
		const struct dsw_pod_volume *pv =
			p->req->path ? dsw_get_pod_volume(r->dsw, p->req->path) : NULL;

		p->result.known = true;
		p->result.uses_device = v->uses_device;
		p->result.block = v->spec->block;
		p->result.at_path = p->req->path && ((v->device_mount_path &&
						      streq(v->device_mount_path, p->req->path)) ||
						     (pv && pv->volume == v));
		snprintf(p->result.plugin, sizeof(p->result.plugin), "%s", v->plugin->name);
		p->result.access_mode = fingerprint_mode(v->staged		 ? v->fingerprint
							 : pv && pv->volume == v ? pv->fingerprint
										 : NULL);
	}
	if (v && d && d->mounted && !d->broken && d->att.device_path) {
		p->result.device_mounted = true;
		snprintf(p->result.device_path, sizeof(p->result.device_path), "%s",
			 d->att.device_path);
	}
	complete(r, p, 0, NULL);
}

static void apply_status(struct reconciler *r, struct pending_request *p)
{
	p->result.status_json = reconciler_status_json(r);
	complete(r, p, p->result.status_json ? 0 : -ENOMEM, NULL);
}

/* How each kind of request is applied to the desired state (or answered at once). */
static void (*const apply_kind[])(struct reconciler *r, struct pending_request *p) = {
	[VOLUME_REQUEST_STAGE] = apply_stage,	  [VOLUME_REQUEST_UNSTAGE] = apply_unstage,
	[VOLUME_REQUEST_PUBLISH] = apply_publish, [VOLUME_REQUEST_UNPUBLISH] = apply_unpublish,
	[VOLUME_REQUEST_INFO] = apply_info,	  [VOLUME_REQUEST_STATUS] = apply_status,
};

void rec_requests_take_incoming(struct reconciler *r)
{
	struct pending_request *list = NULL, *p, *next;

	pthread_mutex_lock(&r->csi.lock);
	p = r->csi.incoming;
	r->csi.incoming = NULL;
	pthread_mutex_unlock(&r->csi.lock);
	for (; p; p = next) { /* newest first: reverse into arrival order */
		next = p->next;
		p->next = list;
		list = p;
	}
	for (p = list; p; p = next) {
		next = p->next;
		p->next = NULL;
		if ((size_t)p->req->kind < ARRAY_SIZE(apply_kind))
			apply_kind[p->req->kind](r, p);
	}
}

/* Whether p's outcome is reached. */
static bool reached(struct reconciler *r, const struct pending_request *p)
{
	const struct volume_request *req = p->req;
	const struct asw_device *d;
	const struct asw_pod_mount *pm;

	switch (req->kind) {
	case VOLUME_REQUEST_STAGE:
		d = asw_get_device(r->asw, p->name);
		return d && d->mounted && !d->broken && streq(d->mount_path, req->path);
	case VOLUME_REQUEST_PUBLISH:
		pm = asw_get_pod_mount(r->asw, req->path);
		return pm && !pm->broken && !pm->foreign && streq_ptr(pm->volume_name, p->name);
	case VOLUME_REQUEST_UNPUBLISH:
		return !asw_get_pod_mount(r->asw, req->path) &&
		       !hashmap_get(r->ops.inflight_pod, req->path);
	case VOLUME_REQUEST_UNSTAGE:
		return !asw_get_device(r->asw, p->name) && !rec_device_op_running(r, p->name);
	case VOLUME_REQUEST_INFO:
	case VOLUME_REQUEST_STATUS:
		return true;
	}
	return false;
}

void rec_requests_check_waiting(struct reconciler *r)
{
	struct pending_request **pp = &r->csi.waiting;
	uint64_t now = r->csi.waiting ? now_ms() : 0;

	while (*pp) {
		struct pending_request *p = *pp;
		if (!reached(r, p)) {
			if (p->on_done && now >= p->until_ms)
				expire(p);
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		complete(r, p, 0, NULL);
	}
}

/* Whether a failure of op decides p. */
static bool decided_by(const struct pending_request *p, const struct volume_op *op)
{
	const struct volume_request *req = p->req;

	switch (op->kind) {
	case VOLUME_OP_MOUNT_DEVICE:
		return (req->kind == VOLUME_REQUEST_STAGE || req->kind == VOLUME_REQUEST_PUBLISH) &&
		       streq_ptr(op->volume_name, p->name);
	case VOLUME_OP_SET_UP:
		return req->kind == VOLUME_REQUEST_PUBLISH && streq(op->target, req->path);
	case VOLUME_OP_TEAR_DOWN:
		return req->kind == VOLUME_REQUEST_UNPUBLISH && streq(op->target, req->path);
	case VOLUME_OP_UNMOUNT_DEVICE:
		return req->kind == VOLUME_REQUEST_UNSTAGE && streq_ptr(op->volume_name, p->name);
	default:
		return false;
	}
}

/* Withdraws what a failed stage or publish asked for, so that nothing retries it in the
 * background and kubelet's next call starts afresh. */
static void withdraw(struct reconciler *r, const struct pending_request *p)
{
	struct dsw_volume *v = dsw_get_volume(r->dsw, p->name);

	if (p->req->kind == VOLUME_REQUEST_PUBLISH && dsw_csi_unpublish(r->dsw, p->req->path) == 0)
		rec_csi_journal_changed(r);
	else if (p->req->kind == VOLUME_REQUEST_STAGE && v && v->staged && v->n_pod_volumes == 0) {
		dsw_csi_unstage(r->dsw, v);
		rec_csi_journal_changed(r);
	}
}

void rec_requests_op_failed(struct reconciler *r, const struct volume_op *op)
{
	struct pending_request **pp = &r->csi.waiting;

	while (*pp) {
		struct pending_request *p = *pp;
		if (!decided_by(p, op)) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		withdraw(r, p);
		complete(r, p, op->result, "%s failed: %s", volume_op_kind_name(op->kind),
			 err_msg(&op->err));
	}
}

void rec_requests_abort_all(struct reconciler *r)
{
	struct pending_request *p, *next;

	rec_requests_take_incoming(r);
	for (p = r->csi.waiting, r->csi.waiting = NULL; p; p = next) {
		next = p->next;
		complete(r, p, -ESHUTDOWN, "the agent is shutting down; retry");
	}
}

/* --- the journal's "csi" section --- */

/* A fingerprint as the journal keeps it: with the values of the spec's sensitive options
 * masked (such an entry is not restored, so its fingerprint is never compared). */
static json_t *fingerprint_json(const struct volume_spec *s, const char *fp)
{
	size_t size = strlen(fp) * 4 + 1; /* room for a one-byte value to become "****" */
	_cleanup_free_ char *m = malloc(size);

	if (!m)
		return NULL;
	snprintf(m, size, "%s", fp);
	volume_spec_mask_text(s, m, size);
	return json_string(m);
}

/* The journal entry of one CSI volume, kept between saves (r->csi.export, by volume name):
 * rebuilt only when what it is built from changed, so a save with thousands of CSI volumes
 * builds (and the journal serialises, journal.c) only the entries that changed since the
 * last one.  The entry is never modified once built; the journal may hold it too. */
struct csi_export {
	char *name; /* the volume's name; the key */
	json_t *entry;
	struct volume_spec *spec; /* a reference: same pointer, same spec */
	char *key;		  /* every other field the entry is built from; NULL: none yet */
	unsigned gen;		  /* the export that last found the volume */
	/* Parts of the entry that a rebuild reuses while spec is the same: its JSON, and the
	 * last fingerprint masked for it (a publish adds a target, and targets of a volume
	 * mostly share their fingerprint). */
	json_t *spec_json;
	char *fp;
	json_t *fp_json;
};

static void csi_export_free(void *p)
{
	struct csi_export *x = p;

	json_decref(x->entry);
	volume_spec_unref(x->spec);
	json_decref(x->spec_json);
	json_decref(x->fp_json);
	free(x->fp);
	free(x->key);
	free(x->name);
	free(x);
}

static char *mfree_str(char *p)
{
	free(p);
	return NULL;
}

/* fingerprint_json() of fp with x's spec, reusing the last one.  NULL: no memory. */
static json_t *export_fingerprint(struct csi_export *x, const char *fp)
{
	json_t *m;
	char *copy;

	if (x->fp_json && streq(x->fp, fp))
		return json_incref(x->fp_json);
	m = fingerprint_json(x->spec, fp);
	copy = strdup(fp);
	if (m && copy) {
		free(x->fp);
		json_decref(x->fp_json);
		x->fp = copy;
		x->fp_json = json_incref(m);
	} else {
		free(copy);
	}
	return m;
}

void rec_requests_export_fini(struct reconciler *r)
{
	r->csi.export = hashmap_free_values(r->csi.export, csi_export_free);
}

/* Appends n strings, each followed by sep, to the key being built in *buf (*len used, *size
 * allocated).  Returns false without memory (*buf is freed then). */
static bool key_add(char **buf, size_t *len, size_t *size, char sep, size_t n,
		    const char *const *parts)
{
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(parts[i]);

		if (*len + l + 2 > *size) {
			size_t want = (*len + l + 2) * 2;
			char *b = realloc(*buf, want);

			if (!b) {
				free(*buf);
				*buf = NULL;
				return false;
			}
			*buf = b;
			*size = want;
		}
		memcpy(*buf + *len, parts[i], l);
		*len += l;
		(*buf)[(*len)++] = sep;
		(*buf)[*len] = '\0';
	}
	return true;
}

/* Everything but the spec that the journal entry of vol holds, as one string: \x1f after
 * each field, \x1e after each target (neither is in a path or an id).  NULL: no memory. */
static char *export_key(const struct dsw_volume *vol)
{
	const char *head[] = { vol->volume_id, vol->staged ? "s" : "-",
			       vol->staged && vol->fingerprint ? vol->fingerprint : "",
			       vol->device_mount_path ? vol->device_mount_path : "" };
	size_t len = 0, size = 256;
	char *buf = malloc(size);

	if (!buf || !key_add(&buf, &len, &size, '\x1f', ARRAY_SIZE(head), head))
		return NULL; /* key_add freed it */
	for (const struct dsw_pod_volume *pv = vol->pod_volumes; pv; pv = pv->next_of_volume) {
		const struct pod_info *pod = &pv->pod;
		char prj[16];
		const char *t[] = { pv->target,
				    pv->pod_uid,
				    pv->outer_name,
				    pv->read_only ? "ro" : "rw",
				    pv->fingerprint ? pv->fingerprint : "",
				    pod->name ? pod->name : "\x1d",
				    pod->namespace ? pod->namespace : "\x1d",
				    pod->uid ? pod->uid : "\x1d",
				    pod->service_account ? pod->service_account : "\x1d",
				    prj };

		snprintf(prj, sizeof(prj), "%u", pv->project_id);

		if (pv->csi && (!key_add(&buf, &len, &size, '\x1f', ARRAY_SIZE(t), t) ||
				!key_add(&buf, &len, &size, '\x1e', 1, (const char *[]){ "" })))
			return NULL;
	}
	return buf;
}

/* Builds vol's entry (x->spec is vol->spec). */
static json_t *export_entry(struct csi_export *x, const struct dsw_volume *vol)
{
	json_t *o = json_object(), *targets = json_array();

	if (!x->spec_json)
		x->spec_json = volume_spec_to_json(vol->spec, VOLUME_SPEC_JSON_JOURNAL);
	if (!o || !targets || !x->spec_json) {
		json_decref(o);
		json_decref(targets);
		return NULL;
	}
	json_object_set_new(o, "volume_id", json_string(vol->volume_id));
	json_object_set(o, "spec", x->spec_json);
	json_object_set_new(o, "staged", json_boolean(vol->staged));
	if (vol->staged && vol->fingerprint)
		json_object_set_new(o, "fingerprint", export_fingerprint(x, vol->fingerprint));
	if (vol->device_mount_path)
		json_object_set_new(o, "staging_path", json_string(vol->device_mount_path));
	for (const struct dsw_pod_volume *pv = vol->pod_volumes; pv; pv = pv->next_of_volume) {
		json_t *t;

		if (!pv->csi)
			continue;
		t = json_object();
		json_object_set_new(t, "target", json_string(pv->target));
		json_object_set_new(t, "pod_uid", json_string(pv->pod_uid));
		json_object_set_new(t, "name", json_string(pv->outer_name));
		json_object_set_new(t, "read_only", json_boolean(pv->read_only));
		json_object_set_new(t, "fingerprint", export_fingerprint(x, pv->fingerprint));
		/* Additive: an older agent ignores it, an older journal has none. */
		if (!pod_info_empty(&pv->pod))
			json_object_set_new(t, "pod", pod_info_to_json(&pv->pod));
		if (pv->project_id) /* additive too */
			json_object_set_new(t, "project_id", json_integer(pv->project_id));
		json_array_append_new(targets, t);
	}
	json_object_set_new(o, "targets", targets);
	return o;
}

/* The cached entry of vol, rebuilt if it changed.  NULL: no memory. */
static json_t *export_volume(struct reconciler *r, const struct dsw_volume *vol, unsigned gen)
{
	struct csi_export *x = r->csi.export ? hashmap_get(r->csi.export, vol->name) : NULL;
	_cleanup_free_ char *key = export_key(vol);
	json_t *entry;

	if (!key)
		return NULL;
	if (x && x->spec == vol->spec && streq_ptr(x->key, key)) {
		x->gen = gen;
		return x->entry;
	}
	if (!x) {
		x = calloc(1, sizeof(*x));
		if (!x || !(x->name = strdup(vol->name)) ||
		    hashmap_put(r->csi.export, x->name, x) < 0) {
			if (x)
				free(x->name);
			free(x);
			return NULL;
		}
	}
	x->gen = gen;
	if (x->spec != vol->spec) {
		/* What was kept for the old spec goes with it. */
		volume_spec_unref(x->spec);
		x->spec = volume_spec_ref(vol->spec);
		json_decref(x->spec_json);
		json_decref(x->fp_json);
		x->spec_json = x->fp_json = NULL;
		x->fp = mfree_str(x->fp);
	}
	/* Until the new entry exists, the old one no longer matches anything. */
	x->key = mfree_str(x->key);
	entry = export_entry(x, vol);
	if (!entry)
		return NULL;
	json_decref(x->entry);
	x->entry = entry;
	x->key = TAKE_PTR(key);
	return entry;
}

json_t *rec_requests_export_csi(struct reconciler *r)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	json_t *volumes;
	void *v;

	if (!r->csi.kubelet_root)
		return NULL;
	if (!r->csi.export && !(r->csi.export = hashmap_new()))
		return NULL;
	volumes = json_array();
	if (!volumes)
		return NULL;
	r->csi.export_gen++;
	while (hashmap_iterate(dsw_volumes(r->dsw), &it, &v, NULL)) {
		const struct dsw_volume *vol = v;
		json_t *e;

		if (!vol->csi)
			continue;
		e = export_volume(r, vol, r->csi.export_gen);
		if (!e || json_array_append(volumes, e) < 0) {
			/* Never a list with entries missing (out of memory: the save then has no
			 * CSI section, as when a list could not be made at all before). */
			json_decref(volumes);
			return NULL;
		}
	}
	/* Forget the volumes that are gone (removing the entry just returned is allowed). */
	it = HASHMAP_ITER_INIT;
	while (hashmap_size(r->csi.export) > json_array_size(volumes) &&
	       hashmap_iterate(r->csi.export, &it, &v, NULL)) {
		struct csi_export *x = v;

		if (x->gen != r->csi.export_gen)
			csi_export_free(hashmap_remove(r->csi.export, x->name));
	}
	return volumes;
}

static const char *jstr(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

static struct volume_spec *spec_from_json(json_t *o)
{
	json_t *attrs = json_object_get(o, "attrs"), *opts = json_object_get(o, "mount_options"),
	       *v;
	const char *type = jstr(o, "type"), *key;
	struct volume_spec *s;
	size_t i;

	if (!type || !json_is_object(attrs) || !json_is_array(opts) || !(s = volume_spec_new(type)))
		return NULL;
	json_object_foreach(attrs, key, v) if (!json_is_string(v) ||
					       volume_spec_set(s, key, json_string_value(v)) <
						       0) return volume_spec_unref(s);
	json_array_foreach(opts, i, v) if (!json_is_string(v) ||
					   streq(json_string_value(v), MASKED_OPTION) ||
					   volume_spec_add_mount_option(s, json_string_value(v)) <
						   0) return volume_spec_unref(s);
	s->read_only = json_is_true(json_object_get(o, "read_only"));
	s->block = json_is_true(json_object_get(o, "block"));
	return s;
}

static bool has_masked_option(json_t *o)
{
	json_t *opts = json_object_get(json_object_get(o, "spec"), "mount_options"), *v;
	size_t i;

	json_array_foreach(opts, i, v) if (json_is_string(v) &&
					   streq(json_string_value(v), MASKED_OPTION)) return true;
	return false;
}

/* A path from the journal is trusted no more than one from a request: absolute, normalized,
 * below the kubelet root (else a tampered journal could get a host mount torn down), in its
 * pods/ or plugins/ dir. */
static int check_journal_path(struct reconciler *r, const char *path, const char *field,
			      struct error_info *err)
{
	if (path_validate_absolute(path, field, err) < 0)
		return -EBADMSG;
	if (!path_is_under(path, r->csi.kubelet_root) || streq(path, r->csi.kubelet_root))
		return err_set(err, -EBADMSG, "%s: %s is not below the kubelet root %s", field,
			       path, r->csi.kubelet_root);
	if (!kubelet_path_in_csi_dirs(r->csi.kubelet_root, path))
		return err_set(err, -EBADMSG,
			       "%s: %s is not in the kubelet's pods/ or plugins/ dir", field, path);
	return 0;
}

/* A journaled target matches its record: the pod and name the entry holds are those its
 * path gives (target_owner), and a target in a pod's volume dirs is in the CSI plugin's dir,
 * never in another volume plugin's (a secret's tmpfs, an emptyDir). */
static int check_journal_target(struct reconciler *r, json_t *t, const char *field,
				struct error_info *err)
{
	const char *target = jstr(t, "target"), *rel, *v;
	char uid[256], name[256];

	if (check_journal_path(r, target, field, err) < 0)
		return -EBADMSG;
	rel = target + strlen(r->csi.kubelet_root);
	if (startswith(rel, "/pods/") && (v = strchr(rel + strlen("/pods/"), '/')) &&
	    (startswith(v, "/volumes/") || startswith(v, "/volumeDevices/"))) {
		const char *dir = strchr(v + 1, '/') + 1;

		if (!startswith(dir, "kubernetes.io~csi/"))
			return err_set(err, -EBADMSG,
				       "%s: %s is in another volume plugin's dir of the pod", field,
				       target);
	}
	target_owner(target, uid, name, sizeof(name));
	if (!streq(uid, jstr(t, "pod_uid")) || !streq(name, jstr(t, "name")))
		return err_set(err, -EBADMSG, "%s: %s does not match its pod_uid and name", field,
			       target);
	return 0;
}

/* A target's project_id: absent (an older journal), or an ID of volagent's range.  Returns the
 * ID, 0 when absent, -EBADMSG otherwise. */
static long long check_project_id(json_t *v)
{
	json_int_t id;

	if (!v)
		return 0;
	id = json_is_integer(v) ? json_integer_value(v) : -1;
	return id >= QUOTA_PRJ_ID_MIN && id <= QUOTA_PRJ_ID_MAX ? id : -EBADMSG;
}

/* Checks entry o without changing anything; the import is all or nothing. */
static int check_volume(struct reconciler *r, json_t *o, size_t i, struct error_info *err)
{
	const char *id = jstr(o, "volume_id"), *staging = jstr(o, "staging_path");
	json_t *targets = json_object_get(o, "targets"), *t;
	char field[64];
	size_t k;

	/* An entry with masked options is skipped at import; its paths are checked all the
	 * same (they are the agent's record of what it made, kubelet-record.h). */
	if (!id || !json_is_array(targets) ||
	    (!has_masked_option(o) && !json_is_object(json_object_get(o, "spec"))))
		return err_set(err, -EBADMSG, "csi[%zu]: volume_id, spec and targets are required",
			       i);
	if (staging) {
		snprintf(field, sizeof(field), "csi[%zu].staging_path", i);
		if (check_journal_path(r, staging, field, err) < 0)
			return -EBADMSG;
	}
	json_array_foreach(targets, k, t)
	{
		const char *target = jstr(t, "target");
		snprintf(field, sizeof(field), "csi[%zu].targets[%zu].target", i, k);
		if (!target || !jstr(t, "pod_uid") || !jstr(t, "name") || !jstr(t, "fingerprint"))
			return err_set(err, -EBADMSG, "csi[%zu].targets[%zu]: incomplete", i, k);
		if (check_journal_target(r, t, field, err) < 0)
			return -EBADMSG;
		if (check_project_id(json_object_get(t, "project_id")) < 0)
			return err_set(
				err, -EBADMSG,
				"csi[%zu].targets[%zu].project_id: not an ID of volagent's range",
				i, k);
		snprintf(field, sizeof(field), "csi[%zu].targets[%zu].pod", i, k);
		{
			struct pod_info pod = { 0 };
			int rr = pod_info_from_json(&pod, json_object_get(t, "pod"), field, err);

			pod_info_clear(&pod);
			if (rr < 0)
				return rr;
		}
	}
	return 0;
}

static int import_volume(struct reconciler *r, json_t *o, size_t i, struct error_info *err)
{
	const char *id = jstr(o, "volume_id"), *staging = jstr(o, "staging_path");
	_cleanup_volume_spec_ struct volume_spec *spec = spec_from_json(json_object_get(o, "spec"));
	_cleanup_free_ char *name = NULL;
	const struct volume_plugin *plugin;
	struct dsw_volume *v;
	json_t *targets = json_object_get(o, "targets"), *t;
	size_t k;

	if (id && !spec && json_is_array(targets) && has_masked_option(o)) {
		log_info("CSI volume has sensitive mount options that were not journaled; waiting "
			 "for kubelet to call again",
			 "volume_id", id);
		return 0;
	}
	if (!id || !spec || !json_is_array(targets))
		return err_set(err, -EBADMSG, "csi[%zu]: volume_id, spec and targets are required",
			       i);
	if (plugin_find_for_spec(spec, &plugin, err) < 0 || plugin_validate(plugin, spec, err) < 0)
		return err_prefix(err, "csi[%zu]", i);
	name = strdup_printf("csi:%s", id);
	if (!name)
		return -ENOMEM;
	if (json_is_true(json_object_get(o, "staged")))
		v = dsw_csi_stage(r->dsw, name, id, spec, plugin, staging ? staging : "",
				  jstr(o, "fingerprint") ? jstr(o, "fingerprint") : "");
	else
		v = dsw_csi_volume(r->dsw, name, id, spec, plugin);
	if (!v)
		return -ENOMEM;
	json_array_foreach(targets, k, t)
	{
		const char *target = jstr(t, "target"), *uid = jstr(t, "pod_uid");
		const char *pvname = jstr(t, "name"), *fp = jstr(t, "fingerprint");
		struct pod_info pod = { 0 };
		struct dsw_pod_volume *pv;
		bool ok;

		if (!target || !uid || !pvname || !fp)
			return err_set(err, -EBADMSG, "csi[%zu].targets[%zu]: incomplete", i, k);
		if (pod_info_from_json(&pod, json_object_get(t, "pod"), "pod", err) < 0) {
			pod_info_clear(&pod);
			return err_prefix(err, "csi[%zu].targets[%zu]", i, k);
		}
		pv = dsw_csi_publish(r->dsw, v, target, uid, pvname,
				     json_is_true(json_object_get(t, "read_only")), fp, &pod);
		ok = pv && asw_track_target(r->asw, target, uid, pvname, plugin->name) >= 0;
		if (pv && check_project_id(json_object_get(t, "project_id")) > 0)
			pv->project_id =
				(uint32_t)check_project_id(json_object_get(t, "project_id"));
		pod_info_clear(&pod);
		if (!ok)
			return -ENOMEM;
	}
	return 0;
}

static void note_path(struct reconciler *r, const char *id, const char *path)
{
	char *key = path ? strdup_printf("%s\x1f%s", id, path) : NULL;

	if (!key || hashmap_get(r->csi.recorded, key) || hashmap_put(r->csi.recorded, key, key) < 0)
		free(key);
}

/* Keeps the staging path and targets of the checked entry o in r->csi.recorded. */
static void note_recorded(struct reconciler *r, json_t *o)
{
	const char *id = jstr(o, "volume_id");
	json_t *t;
	size_t k;

	if (!id || (!r->csi.recorded && !(r->csi.recorded = hashmap_new())))
		return;
	note_path(r, id, jstr(o, "staging_path"));
	json_array_foreach(json_object_get(o, "targets"), k, t) note_path(r, id, jstr(t, "target"));
}

/* Whether the journal's CSI entry o (the i-th) passes its checks: kept as the agent's record
 * then; refused alone otherwise (logged), and what it names is left alone. */
static bool entry_accepted(struct reconciler *r, json_t *o, size_t i)
{
	struct error_info why = { 0 };

	if (check_volume(r, o, i, &why) < 0) {
		log_error("journal: CSI entry refused, leaving what it names alone", "volume_id",
			  jstr(o, "volume_id"), "error", err_msg(&why));
		return false;
	}
	note_recorded(r, o);
	return true;
}

void rec_requests_record_fini(struct reconciler *r)
{
	r->csi.recorded = hashmap_free_values(r->csi.recorded, free);
}

void rec_requests_note_earlier_boot(struct reconciler *r, json_t *csi)
{
	json_t *o;
	size_t i;

	if (!r->csi.kubelet_root || !json_is_array(csi))
		return;
	json_array_foreach(csi, i, o)
	{
		(void)entry_accepted(r, o, i); /* kept as the record, or refused */
	}
}

int rec_requests_import_csi(struct reconciler *r, json_t *csi, struct error_info *err)
{
	json_t *o;
	size_t i;
	int k;

	if (!csi)
		return 0;
	if (!json_is_array(csi))
		return err_set(err, -EBADMSG, "csi: must be a list");
	if (!r->csi.kubelet_root)
		return 0; /* CSI is off now: nothing of it is restored */
	json_array_foreach(csi, i, o)
	{
		if (!entry_accepted(r, o, i))
			continue; /* the others are restored */
		k = import_volume(r, o, i, err);
		if (k < 0)
			return k; /* only ENOMEM or a spec no plugin accepts now */
	}
	return 0;
}
