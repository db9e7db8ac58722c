/* node-volumes.c - see node-volumes.h.  One entry per staged volume with no pod mount, with
 * the time it was first seen so; kept current in O(devices) per pass. */
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "log.h"
#include "macro.h"
#include "metrics.h"
#include "node-volumes.h"

struct unpublished {
	uint64_t since_ms;
	uint64_t seen_gen; /* the update that last saw it unpublished */
	bool logged;	   /* logged as a lost stage */
	char name[];
};

struct node_volumes {
	uint64_t stale_after_ms;
	uint64_t gen;
	struct hashmap *unpublished; /* volume name -> struct unpublished */
};

struct node_volumes *node_volumes_new(uint64_t stale_after_ms)
{
	struct node_volumes *nv = calloc(1, sizeof(*nv));

	if (!nv)
		return NULL;
	nv->stale_after_ms = stale_after_ms;
	nv->unpublished = hashmap_new();
	if (!nv->unpublished) {
		free(nv);
		return NULL;
	}
	return nv;
}

struct node_volumes *node_volumes_free(struct node_volumes *nv)
{
	if (!nv)
		return NULL;
	hashmap_free_values(nv->unpublished, free);
	free(nv);
	return NULL;
}

static bool is_stale(const struct node_volumes *nv, const struct unpublished *u, uint64_t now)
{
	return nv->stale_after_ms && now - u->since_ms >= nv->stale_after_ms;
}

void node_volumes_update(struct node_volumes *nv, const struct actual_state *a, uint64_t now_ms)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	size_t on_node = asw_volume_count(a), stale = 0;
	void *v;

	if (!nv)
		return;
	nv->gen++;
	while (hashmap_iterate(asw_devices(a), &it, &v, NULL)) {
		const struct asw_device *d = v;
		struct unpublished *u;

		/* A filesystem's record alone holds nothing on the node. */
		if (asw_pod_mounts_of(a, d->volume_name) || asw_device_is_record_only(d))
			continue;
		on_node++;
		u = hashmap_get(nv->unpublished, d->volume_name);
		if (!u) {
			u = calloc(1, sizeof(*u) + strlen(d->volume_name) + 1);
			if (!u)
				continue;
			strcpy(u->name, d->volume_name);
			u->since_ms = now_ms;
			if (hashmap_put(nv->unpublished, u->name, u) < 0) {
				free(u);
				continue;
			}
		}
		u->seen_gen = nv->gen;
		if (!is_stale(nv, u, now_ms))
			continue;
		stale++;
		if (!u->logged)
			log_warning("volume staged with no pod publishing it: kubelet may have lost "
				    "track of it; the agent leaves it as it is",
				    "volume", d->volume_name, "path", d->mount_path, "device",
				    d->att.device_path ? d->att.device_path : "", "seconds",
				    LOG_INT((now_ms - u->since_ms) / 1000));
		u->logged = true;
	}
	/* Published again, or unstaged. */
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(nv->unpublished, &it, &v, NULL)) {
		struct unpublished *u = v;

		if (u->seen_gen == nv->gen)
			continue;
		if (u->logged)
			log_info("lost stage is published or unstaged again", "volume", u->name);
		hashmap_remove(nv->unpublished, u->name);
		free(u);
	}
	metrics_set_node_gauges(on_node, stale);
}

/* The entry of volume name in o (made on first use). */
static json_t *entry(json_t *o, const char *name, const char *plugin)
{
	json_t *e = json_object_get(o, name);

	if (e)
		return e;
	e = json_object();
	json_object_set_new(e, "volume", json_string(name));
	json_object_set_new(e, "plugin", plugin ? json_string(plugin) : json_null());
	json_object_set_new(e, "published", json_array());
	json_object_set_new(e, "staged_at", json_null());
	json_object_set_new(e, "device", json_null());
	json_object_set_new(e, "attached", json_false());
	json_object_set_new(e, "unpublished_since_seconds", json_null());
	json_object_set_new(e, "stale", json_false());
	json_object_set_new(o, name, e);
	return e;
}

json_t *node_volumes_json(const struct node_volumes *nv, const struct actual_state *a,
			  uint64_t now_ms, size_t *ret_stale)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	json_t *by_name = json_object(), *list = json_array(), *e;
	const char *key;
	size_t stale = 0;
	void *v;

	while (hashmap_iterate(asw_pod_mounts(a), &it, &v, NULL)) {
		const struct asw_pod_mount *pm = v;
		/* Not verified yet: shown by its target, it is on the node all the same. */
		json_t *p = json_object();

		e = entry(by_name, pm->volume_name ? pm->volume_name : pm->target, pm->plugin_name);
		json_object_set_new(p, "pod_uid", json_string(pm->pod_uid ? pm->pod_uid : ""));
		json_object_set_new(p, "target", json_string(pm->target));
		json_array_append_new(json_object_get(e, "published"), p);
	}
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(asw_devices(a), &it, &v, NULL)) {
		const struct asw_device *d = v;
		const struct unpublished *u = nv ? hashmap_get(nv->unpublished, d->volume_name)
						 : NULL;

		if (asw_device_is_record_only(d))
			continue;

		e = entry(by_name, d->volume_name, d->plugin_name);
		if (d->mounted && d->mount_path)
			json_object_set_new(e, "staged_at", json_string(d->mount_path));
		if (d->att.device_path)
			json_object_set_new(e, "device", json_string(d->att.device_path));
		json_object_set_new(e, "attached", json_boolean(d->attached));
		if (u && !asw_pod_mounts_of(a, d->volume_name)) {
			json_object_set_new(e, "unpublished_since_seconds",
					    json_integer(
						    (json_int_t)((now_ms - u->since_ms) / 1000)));
			json_object_set_new(e, "stale", json_boolean(is_stale(nv, u, now_ms)));
			stale += is_stale(nv, u, now_ms);
		}
	}
	json_object_foreach(by_name, key, e) json_array_append(list, e);
	json_decref(by_name);
	if (ret_stale)
		*ret_stale = stale;
	return list;
}
