/* desired-state.c - see desired-state.h. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block-map.h"
#include "desired-state.h"
#include "macro.h"
#include "mount-options.h"
#include "path-util.h"

/* One allocation: the targets array, then the uid. */
struct dsw_pod {
	char *uid;
	void *owner; /* dsw_pod_set_owner */
	size_t n_targets;
	const char *targets[]; /* the pod's volume dirs, keys into pod_volumes */
};

struct desired_state {
	char *root_dir;
	struct hashmap *volumes;     /* name -> dsw_volume */
	struct hashmap *pod_volumes; /* target -> dsw_pod_volume */
	struct hashmap *pods;	     /* uid -> dsw_pod */
	size_t n_mounted;	     /* pod volumes with mounted set */
	dsw_change_fn change_fn;
	void *change_userdata;
};

void dsw_set_change_hook(struct desired_state *d, dsw_change_fn fn, void *userdata)
{
	d->change_fn = fn;
	d->change_userdata = userdata;
}

static void changed(struct desired_state *d, const char *target, const char *volume_name)
{
	if (d->change_fn)
		d->change_fn(d->change_userdata, target, volume_name);
}

/* Puts pv on its volume's list and counts it. */
static void link_pod_volume(struct dsw_pod_volume *pv)
{
	struct dsw_volume *v = pv->volume;

	pv->prev_of_volume = NULL;
	pv->next_of_volume = v->pod_volumes;
	if (v->pod_volumes)
		v->pod_volumes->prev_of_volume = pv;
	v->pod_volumes = pv;
	v->n_pod_volumes++;
	if (!pv->read_only)
		v->n_read_write++;
}

static void unlink_pod_volume(struct dsw_pod_volume *pv)
{
	struct dsw_volume *v = pv->volume;

	if (pv->prev_of_volume)
		pv->prev_of_volume->next_of_volume = pv->next_of_volume;
	else
		v->pod_volumes = pv->next_of_volume;
	if (pv->next_of_volume)
		pv->next_of_volume->prev_of_volume = pv->prev_of_volume;
	pv->next_of_volume = pv->prev_of_volume = NULL;
	v->n_pod_volumes--;
	if (!pv->read_only)
		v->n_read_write--;
}

char *dsw_pod_volume_dir(const char *root_dir, const char *pod_uid, const char *plugin,
			 const char *outer_name)
{
	return strdup_printf("%s/pods/%s/volumes/kubernetes.io~%s/%s", root_dir, pod_uid, plugin,
			     outer_name);
}

char *dsw_pod_volume_device_path(const char *root_dir, const char *pod_uid, const char *plugin,
				 const char *outer_name)
{
	return strdup_printf("%s/pods/%s/volumeDevices/kubernetes.io~%s/%s", root_dir, pod_uid,
			     plugin, outer_name);
}

char *dsw_device_mount_dir(const char *root_dir, const char *plugin, const char *volume_name)
{
	_cleanup_free_ char *esc = path_escape_component(volume_name);

	if (!esc)
		return NULL;
	return strdup_printf("%s/plugins/kubernetes.io/%s/mounts/%s", root_dir, plugin, esc);
}

char *dsw_device_held_path(const char *root_dir, const char *plugin, const char *volume_name)
{
	_cleanup_free_ char *esc = path_escape_component(volume_name);

	if (!esc)
		return NULL;
	return strdup_printf("%s/plugins/kubernetes.io/%s/volumeDevices/%s/%s", root_dir, plugin,
			     esc, BLOCK_MAP_HELD_NAME);
}

struct desired_state *dsw_new(const char *root_dir)
{
	struct desired_state *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->root_dir = strdup(root_dir);
	d->volumes = hashmap_new();
	d->pod_volumes = hashmap_new();
	d->pods = hashmap_new();
	if (!d->root_dir || !d->volumes || !d->pod_volumes || !d->pods)
		return dsw_free(d);
	return d;
}

/* A volume with its name in the same allocation. */
static struct dsw_volume *volume_new(const char *name)
{
	size_t n = strlen(name) + 1;
	struct dsw_volume *v = calloc(1, sizeof(*v) + n);

	if (v)
		v->name = memcpy((char *)(v + 1), name, n);
	return v;
}

static void volume_free(struct dsw_volume *v)
{
	volume_spec_unref(v->spec);
	free(v->device_mount_path);
	free(v->volume_id);
	free(v->fingerprint);
	free(v);
}

static void pod_volume_free(struct dsw_pod_volume *pv)
{
	free(pv->fingerprint);
	pod_info_clear(&pv->pod);
	free(pv);
}

/* A pod volume with its three strings in one allocation (target NULL: NULL). */
static struct dsw_pod_volume *pod_volume_new(const char *target, const char *pod_uid,
					     const char *outer_name)
{
	size_t nt, nu, nn;
	struct dsw_pod_volume *pv;
	char *p;

	if (!target)
		return NULL;
	nt = strlen(target) + 1;
	nu = strlen(pod_uid) + 1;
	nn = strlen(outer_name) + 1;
	pv = calloc(1, sizeof(*pv) + nt + nu + nn);
	if (!pv)
		return NULL;
	p = (char *)(pv + 1);
	pv->target = memcpy(p, target, nt);
	pv->pod_uid = memcpy(p + nt, pod_uid, nu);
	pv->outer_name = memcpy(p + nt + nu, outer_name, nn);
	pv->target_hash = hashmap_hash(pv->target);
	return pv;
}

/* A pod with room for n targets. */
static struct dsw_pod *pod_new(const char *uid, size_t n)
{
	size_t nu = strlen(uid) + 1;
	struct dsw_pod *p = calloc(1, sizeof(*p) + n * sizeof(p->targets[0]) + nu);

	if (p)
		p->uid = memcpy((char *)&p->targets[n], uid, nu);
	return p;
}

static void pod_free(struct dsw_pod *p)
{
	free(p); /* the target strings belong to the pod volumes */
}

/* Drops one pod volume and, with its last user, its volume. */
static void drop_pod_volume(struct desired_state *d, const char *target)
{
	struct dsw_pod_volume *pv = hashmap_remove(d->pod_volumes, target);

	if (!pv)
		return;
	unlink_pod_volume(pv);
	if (pv->mounted)
		d->n_mounted--;
	changed(d, pv->target, pv->volume->name);
	if (pv->volume->n_pod_volumes == 0 && !pv->volume->staged) {
		hashmap_remove(d->volumes, pv->volume->name);
		volume_free(pv->volume);
	}
	pod_volume_free(pv);
}

int dsw_remove_pod(struct desired_state *d, const char *uid)
{
	struct dsw_pod *p = hashmap_remove(d->pods, uid);

	if (!p)
		return -ENOENT;
	for (size_t i = 0; i < p->n_targets; i++)
		drop_pod_volume(d, p->targets[i]);
	pod_free(p);
	return 0;
}

struct desired_state *dsw_free(struct desired_state *d)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	void *v;

	if (!d)
		return NULL;
	d->change_fn = NULL;
	while (hashmap_iterate(d->pods, &it, &v, NULL)) {
		struct dsw_pod *p = v;
		dsw_remove_pod(d, p->uid);
	}
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(d->pod_volumes, &it, &v, NULL)) /* CSI: not part of a pod */
		drop_pod_volume(d, ((struct dsw_pod_volume *)v)->target);
	it = HASHMAP_ITER_INIT;
	while (hashmap_iterate(d->volumes, &it, &v, NULL)) { /* staged CSI volumes */
		hashmap_remove(d->volumes, ((struct dsw_volume *)v)->name);
		volume_free(v);
	}
	hashmap_free(d->volumes);
	hashmap_free(d->pod_volumes);
	hashmap_free(d->pods);
	free(d->root_dir);
	free(d);
	return NULL;
}

/* Whether every user of existing other than pod uid is gone once uid is replaced. */
static bool only_used_by(const struct desired_state *d, const struct dsw_volume *v, const char *uid)
{
	const struct dsw_pod *p = hashmap_get(d->pods, uid);
	size_t mine = 0;

	if (!p)
		return false;
	for (size_t i = 0; i < p->n_targets; i++) {
		const struct dsw_pod_volume *pv = hashmap_get(d->pod_volumes, p->targets[i]);
		if (pv && pv->volume == v)
			mine++;
	}
	return mine == v->n_pod_volumes;
}

int dsw_reserve(struct desired_state *d, size_t n_pods, size_t n_pod_volumes)
{
	int r = hashmap_reserve(d->pods, hashmap_size(d->pods) + n_pods);

	if (r == 0)
		r = hashmap_reserve(d->pod_volumes, hashmap_size(d->pod_volumes) + n_pod_volumes);
	/* At most one volume per pod volume; as many when none is shared (the common case). */
	if (r == 0)
		r = hashmap_reserve(d->volumes, hashmap_size(d->volumes) + n_pod_volumes);
	return r;
}

static struct dsw_volume *get_or_add_volume(struct desired_state *d, const struct pod_volume *src)
{
	struct dsw_volume *v = hashmap_get(d->volumes, src->volume_name);

	if (v)
		return v;
	v = volume_new(src->volume_name);
	if (!v)
		return NULL;
	v->spec = volume_spec_ref(src->spec);
	v->plugin = src->plugin;
	v->uses_device = src->uses_device_known ? src->uses_device
						: plugin_uses_device(src->plugin, src->spec);
	if (v->uses_device)
		v->device_mount_path =
			src->spec->block
				? dsw_device_held_path(d->root_dir, src->plugin->name, v->name)
				: dsw_device_mount_dir(d->root_dir, src->plugin->name, v->name);
	if ((v->uses_device && !v->device_mount_path) || hashmap_put(d->volumes, v->name, v) < 0) {
		volume_free(v);
		return NULL;
	}
	return v;
}

void *dsw_pod_owner(const struct desired_state *d, const char *uid)
{
	const struct dsw_pod *p = hashmap_get(d->pods, uid);

	return p ? p->owner : NULL;
}

int dsw_pod_set_owner(struct desired_state *d, const char *uid, void *owner)
{
	struct dsw_pod *p = hashmap_get(d->pods, uid);

	if (!p)
		return -ENOENT;
	p->owner = owner;
	return 0;
}

/* dsw_pod_volume_dir() or, for block, dsw_pod_volume_device_path() in buf (one per pod volume
 * at start-up: joined without a format), or NULL when it does not fit. */
static const char *pod_volume_path(char *buf, size_t size, const char *root_dir,
				   const char *pod_uid, bool block, const char *plugin,
				   const char *outer_name)
{
	const char *parts[] = {
		root_dir,  "/pods/",
		pod_uid,   block ? "/volumeDevices/kubernetes.io~" : "/volumes/kubernetes.io~",
		plugin,	   "/",
		outer_name
	};
	char *p = buf;

	for (size_t i = 0; i < ARRAY_SIZE(parts); i++) {
		size_t n = strlen(parts[i]);

		if ((size_t)(p - buf) + n >= size)
			return NULL;
		memcpy(p, parts[i], n);
		p += n;
	}
	*p = '\0';
	return buf;
}

int dsw_set_pod(struct desired_state *d, const struct pod_spec *p, struct error_info *err)
{
	struct dsw_pod *pod;
	void *owner;

	/* Check first, so that a rejected spec changes nothing. */
	for (size_t i = 0; i < p->n_volumes; i++) {
		const struct pod_volume *src = &p->volumes[i];
		struct dsw_volume *v = hashmap_get(d->volumes, src->volume_name);

		if (v && !volume_spec_equal(v->spec, src->spec) && !only_used_by(d, v, p->uid)) {
			_cleanup_free_ char *have = mount_options_selinux(v->spec->mount_options);
			_cleanup_free_ char *want = mount_options_selinux(src->spec->mount_options);

			if (have && want && !streq(have, want))
				return err_set(err, -EEXIST,
					       "volumes[%zu]: %s is mounted for another pod with "
					       "SELinux label %s, not %s; one mount has one label",
					       i, src->volume_name, *have ? have : "(none)",
					       *want ? want : "(none)");
			return err_set(err, -EEXIST,
				       "volumes[%zu]: %s is already in use by another pod with "
				       "different settings",
				       i, src->volume_name);
		}
	}
	pod = hashmap_get(d->pods, p->uid);
	owner = pod ? pod->owner : NULL;
	dsw_remove_pod(d, p->uid);

	pod = pod_new(p->uid, p->n_volumes);
	if (!pod)
		return -ENOMEM;
	pod->owner = owner;
	if (hashmap_put(d->pods, pod->uid, pod) < 0) {
		pod_free(pod);
		return -ENOMEM;
	}
	for (size_t i = 0; i < p->n_volumes; i++) {
		const struct pod_volume *src = &p->volumes[i];
		char buf[PATH_MAX];
		_cleanup_free_ char *long_target = NULL;
		const char *target = pod_volume_path(buf, sizeof(buf), d->root_dir, p->uid,
						     src->spec->block, src->plugin->name,
						     src->name);
		struct dsw_pod_volume *pv;

		if (!target) /* longer than PATH_MAX: as it comes */
			target = long_target =
				src->spec->block
					? dsw_pod_volume_device_path(d->root_dir, p->uid,
								     src->plugin->name, src->name)
					: dsw_pod_volume_dir(d->root_dir, p->uid, src->plugin->name,
							     src->name);
		pv = pod_volume_new(target, p->uid, src->name);

		if (!pv)
			return -ENOMEM;
		pv->read_only = src->read_only || src->spec->read_only;
		pv->volume = get_or_add_volume(d, src);
		if (!pv->volume ||
		    hashmap_put_hashed(d->pod_volumes, pv->target, pv->target_hash, pv) < 0) {
			if (pv->volume && pv->volume->n_pod_volumes == 0) {
				hashmap_remove(d->volumes, pv->volume->name);
				volume_free(pv->volume);
			}
			pod_volume_free(pv);
			return -ENOMEM;
		}
		link_pod_volume(pv);
		pod->targets[pod->n_targets++] = pv->target;
		changed(d, pv->target, pv->volume->name);
	}
	return 0;
}

static struct dsw_volume *new_csi_volume(struct desired_state *d, const char *name,
					 const char *volume_id, struct volume_spec *spec,
					 const struct volume_plugin *plugin)
{
	struct dsw_volume *v = volume_new(name);

	if (!v)
		return NULL;
	v->volume_id = strdup(volume_id);
	v->spec = volume_spec_ref(spec);
	v->plugin = plugin;
	v->csi = true;
	v->uses_device = plugin_uses_device(plugin, spec);
	if (!v->volume_id || hashmap_put(d->volumes, v->name, v) < 0) {
		volume_free(v);
		return NULL;
	}
	return v;
}

struct dsw_volume *dsw_csi_stage(struct desired_state *d, const char *name, const char *volume_id,
				 struct volume_spec *spec, const struct volume_plugin *plugin,
				 const char *staging_path, const char *fingerprint)
{
	struct dsw_volume *v = new_csi_volume(d, name, volume_id, spec, plugin);

	if (!v)
		return NULL;
	v->staged = true;
	v->fingerprint = strdup(fingerprint);
	/* Kubelet's staging dir is where the device goes (a volume with no device needs none). */
	v->device_mount_path = v->uses_device ? strdup(staging_path) : NULL;
	if (!v->fingerprint || (v->uses_device && !v->device_mount_path)) {
		hashmap_remove(d->volumes, v->name);
		volume_free(v);
		return NULL;
	}
	changed(d, NULL, v->name);
	return v;
}

struct dsw_volume *dsw_csi_volume(struct desired_state *d, const char *name, const char *volume_id,
				  struct volume_spec *spec, const struct volume_plugin *plugin)
{
	return new_csi_volume(d, name, volume_id, spec, plugin);
}

void dsw_csi_unstage(struct desired_state *d, struct dsw_volume *v)
{
	v->staged = false;
	changed(d, NULL, v->name);
	if (v->n_pod_volumes == 0) {
		hashmap_remove(d->volumes, v->name);
		volume_free(v);
	}
}

struct dsw_pod_volume *dsw_csi_publish(struct desired_state *d, struct dsw_volume *v,
				       const char *target, const char *pod_uid,
				       const char *outer_name, bool read_only,
				       const char *fingerprint, const struct pod_info *pod)
{
	struct dsw_pod_volume *pv = pod_volume_new(target, pod_uid, outer_name);

	if (!pv)
		return NULL;
	pv->fingerprint = strdup(fingerprint);
	if (pod_info_copy(&pv->pod, pod) < 0) {
		pod_volume_free(pv);
		return NULL;
	}
	pv->read_only = read_only || v->spec->read_only;
	pv->volume = v;
	pv->csi = true;
	if (!pv->fingerprint ||
	    hashmap_put_hashed(d->pod_volumes, pv->target, pv->target_hash, pv) < 0) {
		pod_volume_free(pv);
		return NULL;
	}
	link_pod_volume(pv);
	changed(d, pv->target, v->name);
	return pv;
}

int dsw_csi_unpublish(struct desired_state *d, const char *target)
{
	struct dsw_pod_volume *pv = hashmap_get(d->pod_volumes, target);

	if (!pv || !pv->csi)
		return -ENOENT;
	drop_pod_volume(d, target);
	return 0;
}

struct dsw_volume *dsw_get_volume(const struct desired_state *d, const char *name)
{
	return hashmap_get(d->volumes, name);
}

struct dsw_pod_volume *dsw_get_pod_volume(const struct desired_state *d, const char *target)
{
	return hashmap_get(d->pod_volumes, target);
}

struct dsw_pod_volume *dsw_get_pod_volume_hashed(const struct desired_state *d, const char *target,
						 uint32_t hash)
{
	return hashmap_get_hashed(d->pod_volumes, target, hash);
}

const struct hashmap *dsw_volumes(const struct desired_state *d)
{
	return d->volumes;
}

const struct hashmap *dsw_pod_volumes(const struct desired_state *d)
{
	return d->pod_volumes;
}

void dsw_pod_volume_set_mounted(struct desired_state *d, struct dsw_pod_volume *pv, bool mounted)
{
	if (pv->mounted == mounted)
		return;
	pv->mounted = mounted;
	if (mounted)
		d->n_mounted++;
	else
		d->n_mounted--;
}

size_t dsw_mounted_count(const struct desired_state *d)
{
	return d->n_mounted;
}
