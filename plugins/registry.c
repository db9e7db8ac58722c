/* registry.c - the built-in volume plugins (or a table a test hands in), found by name or by
 * spec, and the mounter and attachment records the core hands to them. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "plugin.h"

extern const struct volume_plugin local_plugin;
extern const struct volume_plugin nfs_plugin;
extern const struct volume_plugin rbd_plugin;

static const struct volume_plugin *const builtin_plugins[] = {
	&local_plugin,
	&nfs_plugin,
	&rbd_plugin,
};

/* The table in use: the built-in plugins unless a test handed in its own. */
static const struct volume_plugin *const *plugins = builtin_plugins;
static size_t n_plugins = ARRAY_SIZE(builtin_plugins);

/* "local, nfs, rbd", built once per table before anyone reads it: plugin_names() is called
 * from CSI handler threads at once (it was once filled lazily with strcat by each of them). */
static char names[256];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void build_names(void)
{
	char buf[sizeof(names)];
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n_plugins && len < sizeof(buf); i++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s", i ? ", " : "",
					plugins[i]->name);
	memcpy(names, buf, sizeof(names));
}

void plugin_registry_set(const struct volume_plugin *const *table, size_t n)
{
	pthread_once(&names_once, build_names); /* so that it cannot run again after this */
	plugins = table ? table : builtin_plugins;
	n_plugins = table ? n : ARRAY_SIZE(builtin_plugins);
	build_names();
}

const struct volume_plugin *plugin_find_by_name(const char *name)
{
	for (size_t i = 0; i < n_plugins; i++)
		if (streq(plugins[i]->name, name))
			return plugins[i];
	return NULL;
}

const struct volume_plugin *plugin_registry_get(size_t i)
{
	return i < n_plugins ? plugins[i] : NULL;
}

const char *plugin_names(void)
{
	pthread_once(&names_once, build_names);
	return names;
}

int plugin_find_for_spec(const struct volume_spec *spec, const struct volume_plugin **ret,
			 struct error_info *err)
{
	const struct volume_plugin *found = NULL;

	for (size_t i = 0; i < n_plugins; i++) {
		if (!plugins[i]->ops->can_support(spec))
			continue;
		if (found)
			return err_set(err, -EINVAL,
				       "type \"%s\": plugins %s and %s both accept it", spec->type,
				       found->name, plugins[i]->name);
		found = plugins[i];
	}
	if (!found)
		return err_set(err, -EINVAL, "type \"%s\": no plugin supports it (have: %s)",
			       spec->type, plugin_names());
	*ret = found;
	return 0;
}

struct volume_mounter *plugin_new_mounter(const struct volume_plugin *p, struct volume_spec *spec,
					  const char *pod_uid, bool read_only,
					  const char *device_mount_path)
{
	struct volume_mounter *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->plugin = p;
	m->spec = volume_spec_ref(spec);
	m->pod_uid = pod_uid ? strdup(pod_uid) : NULL;
	m->read_only = read_only || spec->read_only;
	m->device_mount_path = device_mount_path ? strdup(device_mount_path) : NULL;
	if ((pod_uid && !m->pod_uid) || (device_mount_path && !m->device_mount_path))
		return plugin_free_mounter(m);
	return m;
}

struct volume_mounter *plugin_free_mounter(struct volume_mounter *m)
{
	if (!m)
		return NULL;
	volume_spec_unref(m->spec);
	free(m->pod_uid);
	free(m->device_mount_path);
	free(m);
	return NULL;
}

void device_attachment_clear(struct device_attachment *att)
{
	free(att->device_path);
	for (size_t i = 0; i < att->n_meta; i++) {
		free(att->meta[i].key);
		free(att->meta[i].value);
	}
	free(att->meta);
	memset(att, 0, sizeof(*att));
}

int device_attachment_set_meta(struct device_attachment *att, const char *key, const char *value)
{
	struct volume_attr *m = realloc(att->meta, (att->n_meta + 1) * sizeof(*m));

	if (!m)
		return -ENOMEM;
	att->meta = m;
	m[att->n_meta].key = strdup(key);
	m[att->n_meta].value = strdup(value);
	if (!m[att->n_meta].key || !m[att->n_meta].value) {
		free(m[att->n_meta].key);
		free(m[att->n_meta].value);
		return -ENOMEM;
	}
	att->n_meta++;
	return 0;
}

const char *device_attachment_get_meta(const struct device_attachment *att, const char *key)
{
	for (size_t i = 0; i < att->n_meta; i++)
		if (streq(att->meta[i].key, key))
			return att->meta[i].value;
	return NULL;
}
