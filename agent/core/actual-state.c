/* actual-state.c - see actual-state.h. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "actual-state.h"
#include "macro.h"
#include "path-util.h"

struct actual_state {
	char *root_dir;
	char *pods_prefix;	    /* "<root>/pods/" */
	struct hashmap *pod_mounts; /* target -> asw_pod_mount */
	/* volume name -> the first of the pod mounts that hold it (keyed by its volume_name;
	 * the others follow on next_of_volume). */
	struct hashmap *by_volume;
	/* volume name -> unwanted_count: how many of its pod mounts are marked unwanted
	 * (asw_pod_mount_set_unwanted); unwanted_lost: out of memory once, not known. */
	struct hashmap *unwanted;
	bool unwanted_lost;
	struct hashmap *devices;      /* volume name -> asw_device */
	struct hashmap *device_paths; /* mount path -> asw_device */
	/* Targets unmounted since the last table refresh, with the generation then: a table
	 * read before the unmount must not bring them back as unverified mounts. */
	struct hashmap *unmounted;
	struct hashmap *tracked; /* target -> tracked_target */
	/* Targets whose record the table has not confirmed yet (set of owned strings): what
	 * the state learned from an operation that the table did not show then, a tracked
	 * target.  A full read syncs these (and the targets it reports changed), not every
	 * record: elsewhere the state agrees with the table, which reports every change. */
	struct hashmap *pending;
	bool pending_lost;		 /* out of memory: the next full read syncs every record */
	const struct mount_table *table; /* to tell whether a new record agrees with it */
};

struct tracked_target {
	char *target;
	char *pod_uid;
	char *outer_name;
	char *plugin_name;
};

static void tracked_free(void *p)
{
	struct tracked_target *t = p;

	free(t->target);
	free(t->pod_uid);
	free(t->outer_name);
	free(t->plugin_name);
	free(t);
}

struct unmounted {
	char *target;
	uint64_t gen;
};

struct actual_state *asw_new(const char *root_dir)
{
	struct actual_state *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->root_dir = strdup(root_dir);
	a->pods_prefix = strdup_printf("%s/pods/", root_dir);
	a->pod_mounts = hashmap_new();
	a->by_volume = hashmap_new();
	a->unwanted = hashmap_new();
	a->devices = hashmap_new();
	a->device_paths = hashmap_new();
	a->unmounted = hashmap_new();
	a->tracked = hashmap_new();
	a->pending = hashmap_new();
	if (!a->root_dir || !a->pods_prefix || !a->pod_mounts || !a->by_volume || !a->unwanted ||
	    !a->devices || !a->device_paths || !a->unmounted || !a->tracked || !a->pending)
		return asw_free(a);
	return a;
}

void asw_set_table(struct actual_state *a, const struct mount_table *t)
{
	a->table = t;
}

static void pending_add(struct actual_state *a, const char *target, uint32_t hash)
{
	char *dup;

	if (hashmap_get_hashed(a->pending, target, hash))
		return;
	dup = strdup(target);
	if (!dup || hashmap_put_hashed(a->pending, dup, hash, dup) < 0) {
		free(dup);
		a->pending_lost = true;
	}
}

static void pending_drop(struct actual_state *a, const char *target, uint32_t hash)
{
	free(hashmap_remove_hashed(a->pending, target, hash));
}

static void pending_clear(struct actual_state *a)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	void *v;

	while (hashmap_iterate(a->pending, &it, &v, NULL)) {
		hashmap_remove(a->pending, v);
		free(v);
	}
	a->pending_lost = false;
}

/* Whether the table shows pm's own mount at its target (then any later change of it is
 * reported by the table, and the record needs no full read). */
static bool table_shows(const struct actual_state *a, const struct asw_pod_mount *pm, uint32_t hash)
{
	const struct mount_info *mi;

	if (!a->table || pm->mount_id < 0)
		return false;
	mi = mount_table_get_hashed(a->table, pm->target, hash);
	return mi && mi->id == pm->mount_id;
}

void asw_pod_mount_changed(struct actual_state *a, const struct asw_pod_mount *pm)
{
	uint32_t hash = pm->target_hash;

	if (table_shows(a, pm, hash))
		pending_drop(a, pm->target, hash);
	else
		pending_add(a, pm->target, hash);
}

static void pod_mount_free(void *p)
{
	struct asw_pod_mount *pm = p;

	free((char *)pm->volume_name);
	free(pm);
}

struct unwanted_count {
	size_t n;
	char volume_name[]; /* the key */
};

static void unwanted_adjust(struct actual_state *a, const char *volume_name, bool up)
{
	struct unwanted_count *c = hashmap_get(a->unwanted, volume_name);
	size_t len;

	if (!up) {
		if (c && --c->n == 0)
			free(hashmap_remove(a->unwanted, volume_name));
		return;
	}
	if (c) {
		c->n++;
		return;
	}
	len = strlen(volume_name) + 1;
	c = malloc(sizeof(*c) + len);
	if (c) {
		memcpy(c->volume_name, volume_name, len);
		c->n = 1;
	}
	if (!c || hashmap_put(a->unwanted, c->volume_name, c) < 0) {
		free(c);
		a->unwanted_lost = true;
	}
}

void asw_pod_mount_set_unwanted(struct actual_state *a, struct asw_pod_mount *pm, bool unwanted)
{
	if (!pm->volume_name || pm->unwanted == unwanted)
		return;
	pm->unwanted = unwanted;
	unwanted_adjust(a, pm->volume_name, unwanted);
}

int asw_count_unwanted_of(const struct actual_state *a, const char *volume_name)
{
	const struct unwanted_count *c;

	if (a->unwanted_lost)
		return -1;
	c = hashmap_get(a->unwanted, volume_name);
	return !c ? 0 : c->n > INT_MAX ? INT_MAX : (int)c->n;
}

/* Puts pm (holding a volume) on its volume's list.  Returns 0 or -ENOMEM. */
static int link_volume(struct actual_state *a, struct asw_pod_mount *pm)
{
	struct asw_pod_mount *first = hashmap_get(a->by_volume, pm->volume_name);

	pm->prev_of_volume = NULL;
	pm->next_of_volume = NULL;
	if (!first)
		return hashmap_put(a->by_volume, pm->volume_name, pm);
	/* After the first, whose volume_name stays the key. */
	pm->prev_of_volume = first;
	pm->next_of_volume = first->next_of_volume;
	if (first->next_of_volume)
		first->next_of_volume->prev_of_volume = pm;
	first->next_of_volume = pm;
	return 0;
}

/* Takes pm off its volume's list (before its volume_name goes: it may be the key). */
static void unlink_volume(struct actual_state *a, struct asw_pod_mount *pm)
{
	struct asw_pod_mount *next = pm->next_of_volume;

	if (!pm->volume_name)
		return;
	asw_pod_mount_set_unwanted(a, pm, false);
	if (next)
		next->prev_of_volume = pm->prev_of_volume;
	if (pm->prev_of_volume)
		pm->prev_of_volume->next_of_volume = next;
	else if (next) /* the first: the next one's volume_name becomes the key */
		hashmap_replace(a->by_volume, pm->volume_name, next->volume_name, next);
	else
		hashmap_remove(a->by_volume, pm->volume_name);
	pm->next_of_volume = pm->prev_of_volume = NULL;
}

/* Drops pm, which the caller took out of a->pod_mounts. */
static void pod_mount_drop(struct actual_state *a, struct asw_pod_mount *pm)
{
	unlink_volume(a, pm);
	pod_mount_free(pm);
}

int asw_pod_mount_set_volume(struct actual_state *a, struct asw_pod_mount *pm,
			     const char *volume_name)
{
	char *dup = NULL;

	if (streq_ptr(pm->volume_name, volume_name))
		return 0;
	if (volume_name && !(dup = strdup(volume_name)))
		return -ENOMEM;
	unlink_volume(a, pm);
	free((char *)pm->volume_name);
	pm->volume_name = dup;
	if (dup && link_volume(a, pm) < 0) {
		pm->volume_name = NULL; /* unverified again: it is verified once more */
		free(dup);
		return -ENOMEM;
	}
	return 0;
}

size_t asw_volume_count(const struct actual_state *a)
{
	return hashmap_size(a->by_volume);
}

const struct asw_pod_mount *asw_pod_mounts_of(const struct actual_state *a, const char *volume_name)
{
	return hashmap_get(a->by_volume, volume_name);
}

/* Copies s after the struct at *pp and returns the copy. */
static const char *put_string(char **pp, const char *s)
{
	size_t n = strlen(s) + 1;
	char *copy = memcpy(*pp, s, n);

	*pp += n;
	return copy;
}

bool asw_device_is_record_only(const struct asw_device *d)
{
	return d->fs_uuid && !d->mounted && !d->attached && !d->att.device_path &&
	       d->att.n_meta == 0 && startswith(d->volume_name, "csi:");
}

static void device_free(void *p)
{
	struct asw_device *d = p;

	free(d->volume_name);
	free(d->plugin_name);
	free(d->mount_path);
	free(d->fs_uuid);
	volume_spec_unref(d->spec);
	device_attachment_clear(&d->att);
	free(d);
}

static void clear_unmounted(struct hashmap *h)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	void *v;

	while (hashmap_iterate(h, &it, &v, NULL)) {
		struct unmounted *u = v;
		hashmap_remove(h, u->target);
		free(u->target);
		free(u);
	}
}

struct actual_state *asw_free(struct actual_state *a)
{
	if (!a)
		return NULL;
	hashmap_free_values(a->pod_mounts, pod_mount_free);
	hashmap_free(a->by_volume);
	hashmap_free_values(a->unwanted, free);
	hashmap_free(a->device_paths);
	hashmap_free_values(a->devices, device_free);
	if (a->unmounted)
		clear_unmounted(a->unmounted);
	hashmap_free_values(a->tracked, tracked_free);
	hashmap_free(a->unmounted);
	if (a->pending)
		pending_clear(a);
	hashmap_free(a->pending);
	free(a->root_dir);
	free(a->pods_prefix);
	free(a);
	return NULL;
}

struct asw_pod_mount *asw_set_pod_mount(struct actual_state *a, const char *target,
					const char *pod_uid, const char *outer_name,
					const char *plugin_name, const char *volume_name,
					bool read_only, int mount_id, uint64_t gen)
{
	struct asw_pod_mount *pm = hashmap_remove(a->pod_mounts, target);
	struct unmounted *u = hashmap_remove(a->unmounted, target);

	if (u) {
		free(u->target);
		free(u);
	}
	uint32_t hash = hashmap_hash(target);
	char *p;

	if (pm)
		pod_mount_drop(a, pm);
	pm = malloc(sizeof(*pm) + strlen(target) + strlen(pod_uid) + strlen(outer_name) +
		    strlen(plugin_name) + 4);
	if (!pm)
		return NULL;
	*pm = (struct asw_pod_mount){
		.volume_name = volume_name ? strdup(volume_name) : NULL,
		.learned_gen = gen,
		.mount_id = mount_id,
		.target_hash = hash,
		.read_only = read_only,
	};
	p = (char *)(pm + 1);
	pm->target = put_string(&p, target);
	pm->pod_uid = put_string(&p, pod_uid);
	pm->outer_name = put_string(&p, outer_name);
	pm->plugin_name = put_string(&p, plugin_name);
	if ((volume_name && !pm->volume_name) ||
	    hashmap_put_hashed(a->pod_mounts, pm->target, hash, pm) < 0) {
		pod_mount_free(pm);
		return NULL;
	}
	if (volume_name && link_volume(a, pm) < 0) {
		hashmap_remove_hashed(a->pod_mounts, pm->target, hash);
		pod_mount_free(pm);
		return NULL;
	}
	asw_pod_mount_changed(a, pm);
	return pm;
}

void asw_remove_pod_mount(struct actual_state *a, const char *target, uint64_t gen)
{
	struct asw_pod_mount *pm = hashmap_remove(a->pod_mounts, target);
	struct unmounted *u;

	if (pm)
		pod_mount_drop(a, pm);
	if (hashmap_get(a->unmounted, target))
		return;
	u = calloc(1, sizeof(*u));
	if (!u || !(u->target = strdup(target))) {
		free(u);
		return;
	}
	u->gen = gen;
	if (hashmap_put(a->unmounted, u->target, u) < 0) {
		free(u->target);
		free(u);
	}
}

struct asw_pod_mount *asw_get_pod_mount(const struct actual_state *a, const char *target)
{
	return hashmap_get(a->pod_mounts, target);
}

struct asw_pod_mount *asw_get_pod_mount_hashed(const struct actual_state *a, const char *target,
					       uint32_t hash)
{
	return hashmap_get_hashed(a->pod_mounts, target, hash);
}

const struct hashmap *asw_pod_mounts(const struct actual_state *a)
{
	return a->pod_mounts;
}

size_t asw_count_pod_mounts_of(const struct actual_state *a, const char *volume_name)
{
	size_t n = 0;

	for (const struct asw_pod_mount *pm = asw_pod_mounts_of(a, volume_name); pm;
	     pm = pm->next_of_volume)
		n++;
	return n;
}

struct asw_device *asw_add_device(struct actual_state *a, const char *volume_name,
				  const char *plugin_name, struct volume_spec *spec,
				  const char *mount_path)
{
	struct asw_device *d = hashmap_get(a->devices, volume_name);

	if (d)
		return d;
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->volume_name = strdup(volume_name);
	d->plugin_name = strdup(plugin_name);
	d->mount_path = strdup(mount_path);
	d->spec = volume_spec_ref(spec);
	d->mount_id = -1;
	if (!d->volume_name || !d->plugin_name || !d->mount_path ||
	    hashmap_put(a->devices, d->volume_name, d) < 0) {
		device_free(d);
		return NULL;
	}
	/* A second device at one path (never made by the agent) is found by the full sync. */
	(void)hashmap_put(a->device_paths, d->mount_path, d);
	return d;
}

struct asw_device *asw_get_device(const struct actual_state *a, const char *volume_name)
{
	return hashmap_get(a->devices, volume_name);
}

void asw_remove_device(struct actual_state *a, const char *volume_name)
{
	struct asw_device *d = hashmap_remove(a->devices, volume_name);

	if (!d)
		return;
	if (hashmap_get(a->device_paths, d->mount_path) == d)
		hashmap_remove(a->device_paths, d->mount_path);
	device_free(d);
}

const struct hashmap *asw_devices(const struct actual_state *a)
{
	return a->devices;
}

bool asw_parse_pod_volume_dir(const char *root_dir, const char *path, char **ret_buf,
			      const char **ret_uid, const char **ret_plugin, const char **ret_name)
{
	size_t n = strlen(root_dir);
	char *buf, *uid, *vols, *plugin, *name, *slash;

	if (strncmp(path, root_dir, n) != 0 || !startswith(path + n, "/pods/"))
		return false;
	buf = strdup(path + n + strlen("/pods/"));
	if (!buf)
		return false;
	/* <uid>/volumes/kubernetes.io~<plugin>/<name> and nothing deeper; volumeDevices/ for a
	 * raw block volume's file */
	uid = buf;
	vols = strchr(uid, '/');
	if (!vols)
		goto no;
	*vols++ = '\0';
	plugin = strchr(vols, '/');
	if (!plugin)
		goto no;
	*plugin++ = '\0';
	name = strchr(plugin, '/');
	if (!name)
		goto no;
	*name++ = '\0';
	slash = strchr(name, '/');
	if (slash || (!streq(vols, "volumes") && !streq(vols, "volumeDevices")) ||
	    !startswith(plugin, "kubernetes.io~") || !path_is_safe_component(uid) ||
	    !path_is_safe_component(name))
		goto no;
	*ret_buf = buf;
	*ret_uid = uid;
	*ret_plugin = plugin + strlen("kubernetes.io~");
	*ret_name = name;
	return true;
no:
	free(buf);
	return false;
}

int asw_track_target(struct actual_state *a, const char *target, const char *pod_uid,
		     const char *outer_name, const char *plugin_name)
{
	struct tracked_target *t;

	if (hashmap_get(a->tracked, target))
		return 0;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->target = strdup(target);
	t->pod_uid = strdup(pod_uid);
	t->outer_name = strdup(outer_name);
	t->plugin_name = strdup(plugin_name);
	if (!t->target || !t->pod_uid || !t->outer_name || !t->plugin_name ||
	    hashmap_put(a->tracked, t->target, t) < 0) {
		tracked_free(t);
		return -ENOMEM;
	}
	/* A mount already there is learned by the next full read. */
	pending_add(a, t->target, hashmap_hash(t->target));
	return 0;
}

void asw_untrack_target(struct actual_state *a, const char *target)
{
	struct tracked_target *t = hashmap_remove(a->tracked, target);

	if (t)
		tracked_free(t);
}

static void report(void (*changed)(const char *target, void *userdata), void *userdata,
		   const char *target)
{
	if (changed)
		changed(target, userdata);
}

static bool sync_devices(struct actual_state *a, const struct mount_table *t,
			 void (*changed_fn)(const char *target, void *userdata), void *userdata);

bool asw_sync_with_table(struct actual_state *a, const struct mount_table *t,
			 void (*changed_fn)(const char *target, void *userdata), void *userdata)
{
	uint64_t gen = mount_table_generation(t);
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	bool changed = false;
	void *v;

	/* Every record is looked at: only those learned after this read stay pending. */
	pending_clear(a);
	/* Room for the mounts the table shows (at start-up: every one is new), so that the
	 * index is not rebuilt again and again while it fills. */
	if (hashmap_size(a->pod_mounts) < mount_table_size(t))
		(void)hashmap_reserve(a->pod_mounts, mount_table_size(t));
	/* Pod mounts the table no longer shows. */
	while (hashmap_iterate(a->pod_mounts, &it, &v, NULL)) {
		struct asw_pod_mount *pm = v;
		const struct mount_info *mi =
			mount_table_get_hashed(t, pm->target, pm->target_hash);

		if (pm->learned_gen >= gen) {
			pending_add(a, pm->target, pm->target_hash);
			continue; /* learned after this table was read */
		}
		if (!mi || (pm->mount_id >= 0 && mi->id != pm->mount_id)) {
			hashmap_remove(a->pod_mounts, pm->target);
			report(changed_fn, userdata, pm->target);
			pod_mount_drop(a, pm);
			changed = true;
		}
	}
	/* Mounts under <root>/pods that nothing told us about. */
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(mount_table_entries(t), &it, &v, NULL)) {
		const struct mount_info *mi = v;
		const struct unmounted *u;
		const char *uid, *plugin, *name;
		char *buf;

		const struct tracked_target *tt = hashmap_get(a->tracked, mi->target);

		if ((!tt && !startswith(mi->target, a->pods_prefix)) ||
		    hashmap_get(a->pod_mounts, mi->target))
			continue;
		u = hashmap_get(a->unmounted, mi->target);
		if (u && u->gen >= gen)
			continue; /* the table was read before we unmounted it */
		if (tt) {
			asw_set_pod_mount(a, mi->target, tt->pod_uid, tt->outer_name,
					  tt->plugin_name, NULL, mi->read_only, mi->id, 0);
			report(changed_fn, userdata, mi->target);
			changed = true;
			continue;
		}
		if (!asw_parse_pod_volume_dir(a->root_dir, mi->target, &buf, &uid, &plugin, &name))
			continue;
		asw_set_pod_mount(a, mi->target, uid, name, plugin, NULL, mi->read_only, mi->id, 0);
		report(changed_fn, userdata, mi->target);
		free(buf);
		changed = true;
	}
	clear_unmounted(a->unmounted);
	return sync_devices(a, t, changed_fn, userdata) || changed;
}

/* Devices: the node-wide mount is there or not. */
static bool sync_devices(struct actual_state *a, const struct mount_table *t,
			 void (*changed_fn)(const char *target, void *userdata), void *userdata)
{
	uint64_t gen = mount_table_generation(t);
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	bool changed = false;
	void *v;

	while (hashmap_iterate(a->devices, &it, &v, NULL)) {
		struct asw_device *d = v;
		const struct mount_info *mi = mount_table_get(t, d->mount_path);
		bool mounted = mi != NULL;

		if (d->learned_gen >= gen || mounted == d->mounted)
			continue;
		d->mounted = mounted;
		d->mount_id = mi ? mi->id : -1;
		report(changed_fn, userdata, d->mount_path);
		changed = true;
	}
	return changed;
}

/* Forgets target's "unmounted since" note once the table is newer than the unmount. */
static void drop_unmounted_before(struct actual_state *a, const char *target, uint32_t hash,
				  uint64_t gen)
{
	struct unmounted *u = hashmap_get_hashed(a->unmounted, target, hash);

	if (!u || u->gen >= gen)
		return;
	hashmap_remove_hashed(a->unmounted, target, hash);
	free(u->target);
	free(u);
}

bool asw_sync_target(struct actual_state *a, const struct mount_table *t, const char *target,
		     uint32_t hash)
{
	const struct mount_info *mi = mount_table_get_hashed(t, target, hash);
	struct asw_pod_mount *pm = hashmap_get_hashed(a->pod_mounts, target, hash);
	struct asw_device *d = hashmap_get_hashed(a->device_paths, target, hash);
	uint64_t gen = mount_table_generation(t);
	const struct tracked_target *tt;
	const struct unmounted *u;
	bool changed = false;

	/* The pod mount the table no longer shows, or another mount now covers. */
	if (pm && pm->learned_gen < gen && (!mi || (pm->mount_id >= 0 && mi->id != pm->mount_id))) {
		hashmap_remove_hashed(a->pod_mounts, target, hash);
		pod_mount_drop(a, pm);
		pm = NULL;
		changed = true;
	}
	/* A mount nothing told us about, at a tracked target or a pod volume dir. */
	u = hashmap_get_hashed(a->unmounted, target, hash);
	if (mi && !pm && !(u && u->gen >= gen)) {
		const char *uid, *plugin, *name;
		char *buf;

		tt = hashmap_get_hashed(a->tracked, target, hash);
		if (tt) {
			asw_set_pod_mount(a, mi->target, tt->pod_uid, tt->outer_name,
					  tt->plugin_name, NULL, mi->read_only, mi->id, 0);
			changed = true;
		} else if (startswith(target, a->pods_prefix) &&
			   asw_parse_pod_volume_dir(a->root_dir, target, &buf, &uid, &plugin,
						    &name)) {
			asw_set_pod_mount(a, mi->target, uid, name, plugin, NULL, mi->read_only,
					  mi->id, 0);
			free(buf);
			changed = true;
		}
	}
	drop_unmounted_before(a, target, hash, gen);
	/* Still pending: a record learned after this table and not shown by it. */
	pm = hashmap_get_hashed(a->pod_mounts, target, hash);
	if (pm && pm->learned_gen >= gen && !table_shows(a, pm, hash))
		pending_add(a, target, hash);
	else
		pending_drop(a, target, hash);
	/* A device's node-wide mount is there or not. */
	if (d && d->learned_gen < gen && (mi != NULL) != d->mounted) {
		d->mounted = mi != NULL;
		d->mount_id = mi ? mi->id : -1;
		changed = true;
	}
	return changed;
}

/* The targets of a set of owned strings, taken out of it (caller frees each and the array). */
static char **take_set(struct hashmap *h, size_t *ret_n)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	char **list = malloc((hashmap_size(h) + 1) * sizeof(*list));
	size_t n = 0;
	void *v;

	if (!list)
		return NULL;
	while (hashmap_iterate(h, &it, &v, NULL)) {
		hashmap_remove(h, v);
		list[n++] = v;
	}
	*ret_n = n;
	return list;
}

bool asw_sync_changed(struct actual_state *a, const struct mount_table *t,
		      void (*changed_fn)(const char *target, void *userdata), void *userdata)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	bool changed = false;
	char **list;
	size_t n = 0, k = 0;
	void *v;

	if (a->pending_lost)
		return asw_sync_with_table(a, t, changed_fn, userdata);
	/* The pending targets, and those unmounted since a table read (a mount the read
	 * still showed there is learned as unverified once the table is newer). */
	list = take_set(a->pending, &n);
	if (list) {
		char **more = realloc(list, (n + hashmap_size(a->unmounted) + 1) * sizeof(*list));

		if (more) {
			list = more;
			while (hashmap_iterate(a->unmounted, &it, &v, NULL)) {
				list[n + k] = strdup(((struct unmounted *)v)->target);
				if (list[n + k])
					k++;
			}
		}
	}
	if (!list || hashmap_size(a->unmounted) != k) {
		for (size_t i = 0; list && i < n + k; i++)
			free(list[i]);
		free(list);
		return asw_sync_with_table(a, t, changed_fn, userdata);
	}
	for (size_t i = 0; i < n + k; i++) {
		if (asw_sync_target(a, t, list[i], hashmap_hash(list[i]))) {
			report(changed_fn, userdata, list[i]);
			changed = true;
		}
		free(list[i]);
	}
	free(list);
	return sync_devices(a, t, changed_fn, userdata) || changed;
}
