/* reconciler-status.c - the snapshot `volagent status` prints, built on the reconciler thread
 * (which owns the state): every desired volume with its plugin, source, pods and targets, the
 * actual state of each, the operation in flight, backoff and the last error with its time;
 * every device-level attachment; mounts being removed; the version, uptime and the journal's
 * health.  Secrets are never part of it. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "quota.h"
#include "server-health.h"
#include "reconciler-internal.h"

/* A CLOCK_MONOTONIC time in ms as an RFC 3339 wall-clock time. */
static json_t *wall_time(uint64_t mono_ms)
{
	struct timespec rt;
	uint64_t now = now_ms();
	time_t t;
	struct tm tm;
	char buf[32];

	clock_gettime(CLOCK_REALTIME, &rt);
	t = rt.tv_sec - (time_t)((now - mono_ms) / 1000);
	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return json_string(buf);
}

/* Backoff and last error of key, or null.  (The error was masked when its operation
 * finished: see apply_result.) */
static json_t *backoff_json(struct reconciler *r, const char *kind, const char *name)
{
	_cleanup_free_ char *key = rec_key_for(kind, name);
	const struct backoff_entry *e = key ? backoff_get(r->backoff, key) : NULL;
	uint64_t now = now_ms();
	json_t *o;

	if (!e)
		return json_null();
	o = json_object();
	json_object_set_new(o, "failures", json_integer(e->failures));
	json_object_set_new(o, "retry_in_ms",
			    json_integer(e->next_try_ms > now ? (json_int_t)(e->next_try_ms - now)
							      : 0));
	json_object_set_new(o, "last_error", json_string(e->last_error ? e->last_error : ""));
	json_object_set_new(o, "last_error_at", wall_time(e->last_error_ms));
	return o;
}

static json_t *op_json(const struct volume_op *op)
{
	json_t *o;

	if (!op)
		return json_null();
	o = json_object();
	json_object_set_new(o, "operation", json_string(volume_op_kind_name(op->kind)));
	json_object_set_new(o, "started_at", wall_time(op->queued_ms));
	return o;
}

static const char *pod_state(struct reconciler *r, const struct dsw_pod_volume *pv)
{
	const struct asw_pod_mount *pm = asw_get_pod_mount(r->asw, pv->target);

	if (!pm)
		return "not mounted";
	if (pm->broken)
		return "broken";
	if (!pm->volume_name && !pm->foreign)
		return "found, being checked";
	if (pm->foreign || !streq(pm->volume_name, pv->volume->name))
		return "holds something else";
	if (pm->read_only != pv->read_only)
		return "mounted with other read-only setting";
	return "mounted";
}

/* A mounted directory volume with a size (a project quota, lib/quota.h): its limit and the
 * project's usage, as NodeGetVolumeStats reports them; NULL for any other.  One open, one
 * FS_IOC_FSGETXATTR and one Q_XGETQUOTA on a local filesystem: only directory volumes of
 * node-local plugins are read (never a network mount, which could hang the status). */
static json_t *size_json(const struct dsw_pod_volume *pv, const char *state)
{
	const struct dsw_volume *v = pv->volume;
	struct quota_usage q;
	json_t *o;
	int r;

	if (!volume_spec_get(v->spec, "size") || !streq(state, "mounted") ||
	    !plugin_is_node_local(v->plugin) || plugin_uses_device(v->plugin, v->spec))
		return NULL;
	o = json_object();
	r = quota_prj_dir_usage_at(pv->target, &q);
	if (r < 0) {
		json_object_set_new(o, "error", json_string(strerror(-r)));
		return o;
	}
	if (r == 0) {
		json_object_set_new(o, "error", json_string("no project limit on the directory"));
		return o;
	}
	json_object_set_new(o, "project_id", json_integer(q.project_id));
	json_object_set_new(o, "limit_bytes", json_integer((json_int_t)q.bytes_limit));
	json_object_set_new(o, "used_bytes", json_integer((json_int_t)q.bytes_used));
	json_object_set_new(o, "used_inodes", json_integer((json_int_t)q.inodes_used));
	return o;
}

static json_t *device_json(struct reconciler *r, const struct asw_device *d)
{
	json_t *o = json_object(), *meta = json_object();

	json_object_set_new(o, "volume", json_string(d->volume_name));
	json_object_set_new(o, "plugin", json_string(d->plugin_name));
	json_object_set_new(o, "device",
			    d->att.device_path ? json_string(d->att.device_path) : json_null());
	json_object_set_new(o, "mount_path", json_string(d->mount_path));
	json_object_set_new(o, "mounted", json_boolean(d->mounted));
	json_object_set_new(o, "attached", json_boolean(d->attached));
	json_object_set_new(o, "read_only", json_boolean(d->read_only));
	json_object_set_new(o, "broken", json_boolean(d->broken));
	for (size_t i = 0; i < d->att.n_meta; i++)
		json_object_set_new(meta, d->att.meta[i].key, json_string(d->att.meta[i].value));
	json_object_set_new(o, "attachment", meta);
	json_object_set_new(o, "in_flight",
			    op_json(hashmap_get(r->ops.inflight_dev, d->volume_name)));
	json_object_set_new(o, "backoff", backoff_json(r, "dev", d->volume_name));
	return o;
}

/* Each storage server a plugin asked about (server-health.h): up or down, since when, why. */
static json_t *servers_json(void)
{
	static struct server_health_info info[SERVER_HEALTH_MAX];
	size_t n = server_health_list(info, SERVER_HEALTH_MAX);
	json_t *list = json_array();

	for (size_t i = 0; i < n; i++) {
		json_t *o = json_object();
		struct tm tm;
		time_t t = (time_t)info[i].down_since;
		char since[32];

		gmtime_r(&t, &tm);
		strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%SZ", &tm);
		json_object_set_new(o, "server", json_string(info[i].key));
		json_object_set_new(o, "state", json_string(info[i].down ? "down" : "up"));
		json_object_set_new(o, "down_since",
				    info[i].down ? json_string(since) : json_null());
		json_object_set_new(o, "reason",
				    info[i].down ? json_string(info[i].reason) : json_null());
		json_object_set_new(o, "in_flight", json_integer(info[i].in_flight));
		json_object_set_new(o, "refused", json_integer((json_int_t)info[i].refused));
		json_object_set_new(o, "times_down", json_integer((json_int_t)info[i].down_count));
		json_object_set_new(o, "next_probe_in_ms",
				    json_integer((json_int_t)info[i].next_probe_in_ms));
		json_array_append_new(list, o);
	}
	return list;
}

/* The pods dir, whether it is trusted, and each refused spec file with its reason. */
static json_t *spec_files_json(const struct spec_source *s)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	json_t *o = json_object(), *refused = json_array();
	const char *name, *reason, *dir_error = spec_source_dir_error(s);

	while (spec_source_next_rejected(s, &it, &name, &reason)) {
		json_t *f = json_object();

		json_object_set_new(f, "file", json_string(name));
		json_object_set_new(f, "reason", json_string(reason));
		json_array_append_new(refused, f);
	}
	json_object_set_new(o, "dir", json_string(spec_source_dir(s)));
	json_object_set_new(o, "dir_unsafe", dir_error ? json_string(dir_error) : json_null());
	json_object_set_new(o, "refused", refused);
	return o;
}

char *reconciler_status_json(struct reconciler *r)
{
	json_auto_t *root = json_object();
	json_t *volumes = json_object(), *list = json_array(), *devices = json_array();
	json_t *unwanted = json_array(), *journal = json_object(), *counts = json_object();
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	size_t mounted = 0, failing = 0;
	void *v;

	/* Volumes, then their pods (one pass over each index). */
	while (hashmap_iterate(dsw_volumes(r->dsw), &it, &v, NULL)) {
		const struct dsw_volume *vol = v;
		_cleanup_free_ char *summary = volume_spec_format(vol->spec);
		json_t *o = json_object();

		json_object_set_new(o, "name", json_string(vol->name));
		json_object_set_new(o, "plugin", json_string(vol->plugin->name));
		json_object_set_new(o, "source",
				    volume_spec_to_json(vol->spec, VOLUME_SPEC_JSON_STATUS));
		json_object_set_new(o, "summary", summary ? json_string(summary) : json_null());
		json_object_set_new(o, "from", json_string(vol->csi ? "csi" : "spec file"));
		if (vol->csi) {
			json_object_set_new(o, "volume_id", json_string(vol->volume_id));
			json_object_set_new(o, "staged", json_boolean(vol->staged));
		}
		if (vol->device_mount_path)
			json_object_set_new(o, "device_mount_path",
					    json_string(vol->device_mount_path));
		json_object_set_new(o, "pods", json_array());
		json_object_set(volumes, vol->name, o);
		json_array_append_new(list, o);
	}
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(dsw_pod_volumes(r->dsw), &it, &v, NULL)) {
		const struct dsw_pod_volume *pv = v;
		json_t *p = json_object(), *vo = json_object_get(volumes, pv->volume->name);
		const char *state = pod_state(r, pv);
		json_t *bo = backoff_json(r, "pod", pv->target);

		mounted += streq(state, "mounted");
		failing += !json_is_null(bo);
		json_object_set_new(p, "pod_uid", json_string(pv->pod_uid));
		json_object_set_new(p, "name", json_string(pv->outer_name));
		json_object_set_new(p, "target", json_string(pv->target));
		if (!pod_info_empty(&pv->pod)) /* CSI: kubelet's pod.* keys */
			json_object_set_new(p, "pod", pod_info_to_json(&pv->pod));
		json_object_set_new(p, "read_only", json_boolean(pv->read_only));
		json_object_set_new(p, "state", json_string(state));
		{
			json_t *size = size_json(pv, state);
			if (size)
				json_object_set_new(p, "size", size);
		}
		json_object_set_new(p, "in_flight",
				    op_json(hashmap_get(r->ops.inflight_pod, pv->target)));
		json_object_set_new(p, "backoff", bo);
		if (vo)
			json_array_append_new(json_object_get(vo, "pods"), p);
		else
			json_decref(p);
	}
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(asw_devices(r->asw), &it, &v, NULL))
		json_array_append_new(devices, device_json(r, v));
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(asw_pod_mounts(r->asw), &it, &v, NULL)) {
		const struct asw_pod_mount *pm = v;
		json_t *o;

		if (dsw_get_pod_volume(r->dsw, pm->target))
			continue;
		o = json_object();
		json_object_set_new(o, "target", json_string(pm->target));
		json_object_set_new(o, "volume",
				    pm->volume_name ? json_string(pm->volume_name) : json_null());
		json_object_set_new(o, "in_flight",
				    op_json(hashmap_get(r->ops.inflight_pod, pm->target)));
		json_object_set_new(o, "backoff", backoff_json(r, "pod", pm->target));
		json_array_append_new(unwanted, o);
	}
	json_object_set_new(journal, "path", json_string(journal_path(r->journal)));
	json_object_set_new(journal, "saves",
			    json_integer((json_int_t)journal_save_count(r->journal)));
	json_object_set_new(journal, "unsaved_changes", json_boolean(journal_is_dirty(r->journal)));
	json_object_set_new(journal, "healthy", json_boolean(!r->journal_health.error[0]));
	json_object_set_new(journal, "error",
			    r->journal_health.error[0] ? json_string(r->journal_health.error)
						       : json_null());
	json_object_set_new(journal, "failed_saves",
			    json_integer((json_int_t)r->journal_health.failures));
	json_object_set_new(journal, "retry_in_ms",
			    json_integer(
				    r->journal_health.retry_ms > now_ms()
					    ? (json_int_t)(r->journal_health.retry_ms - now_ms())
					    : 0));
	json_object_set_new(journal, "startup",
			    r->journal_health.note[0] ? json_string(r->journal_health.note)
						      : json_null());
	json_object_set_new(counts, "desired_pod_volumes",
			    json_integer((json_int_t)hashmap_size(dsw_pod_volumes(r->dsw))));
	json_object_set_new(counts, "mounted", json_integer((json_int_t)mounted));
	json_object_set_new(counts, "failing", json_integer((json_int_t)failing));
	json_object_set_new(counts, "devices",
			    json_integer((json_int_t)hashmap_size(asw_devices(r->asw))));
	json_object_set_new(counts, "in_backoff", json_integer(backoff_count(r->backoff)));
	json_object_set_new(counts, "in_flight",
			    json_integer((json_int_t)(hashmap_size(r->ops.inflight_pod) +
						      hashmap_size(r->ops.inflight_dev))));

	json_object_set_new(counts, "passes", json_integer((json_int_t)r->status.stats.passes));
	json_object_set_new(counts, "mount_table_reads",
			    json_integer((json_int_t)r->loop.table_reads));
	json_object_set_new(counts, "mount_event_batches",
			    json_integer((json_int_t)r->loop.mount_event_batches));
	json_object_set_new(counts, "mount_event_overflows",
			    json_integer((json_int_t)r->loop.mount_event_overflows));
	json_object_set_new(root, "mount_table_source",
			    json_string(mount_monitor_has_events(r->monitor) ? "mount events"
									     : "libmount"));

	json_object_set_new(root, "version", json_string(VOLAGENT_VERSION));
	json_object_set_new(root, "pid", json_integer(getpid()));
	json_object_set_new(root, "started_at", wall_time(r->status.started_ms));
	json_object_set_new(root, "uptime_seconds",
			    json_integer((json_int_t)((now_ms() - r->status.started_ms) / 1000)));
	json_object_set_new(root, "ready", json_boolean(r->status.ready));
	json_object_set_new(root, "journal", journal);
	json_object_set_new(root, "counts", counts);
	json_object_set_new(root, "volumes", list);
	json_object_set_new(root, "devices", devices);
	json_object_set_new(root, "mounts_being_removed", unwanted);
	json_object_set_new(root, "storage_servers", servers_json());
	{
		size_t stale = 0;
		json_t *on_node = node_volumes_json(r->node_vols, r->asw, now_ms(), &stale);

		json_object_set_new(counts, "on_node",
				    json_integer((json_int_t)json_array_size(on_node)));
		json_object_set_new(counts, "stale_stages", json_integer((json_int_t)stale));
		json_object_set_new(root, "on_node", on_node);
	}
	if (r->specs)
		json_object_set_new(root, "spec_files", spec_files_json(r->specs));
	json_decref(volumes);
	return json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
}
