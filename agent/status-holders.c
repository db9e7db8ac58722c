/* status-holders.c - `volagent status --holders VOLUME|PATH` and the holders drain-check
 * lists: the mount paths of a volume are taken from the agent's status snapshot, and who
 * holds each is found here, in the command's own process (holders.h: a bounded scan of /proc
 * in a child), so that asking never holds up the agent.  The command runs in the agent's
 * mount namespace when it is run where the agent runs (the host, or `kubectl exec` into the
 * agent's container). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "holders.h"
#include "macro.h"

/* How long one path is looked at. */
#define STATUS_HOLDERS_TIMEOUT_MS 3000

static const char *jstr(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

static json_t *find_volume(json_t *root, const char *what)
{
	json_t *v;
	size_t i;

	json_array_foreach(json_object_get(root, "volumes"), i, v)
	{
		const char *name = jstr(v, "name"), *id = jstr(v, "volume_id");

		if ((name && streq(name, what)) || (id && streq(id, what)))
			return v;
	}
	return NULL;
}

/* Appends {"path", "device", "holders" or "error"} for path to ret, unless it is there already
 * or nothing is mounted there. */
static void add_path(json_t *ret, const char *path, const char *device)
{
	struct error_info err = { 0 };
	struct holders h;
	char text[2048];
	json_t *o, *e;
	size_t i;
	int r;

	if (!path)
		return;
	json_array_foreach(ret, i, e) if (streq(jstr(e, "path"), path)) return;
	r = holders_find(path, device, STATUS_HOLDERS_TIMEOUT_MS, &h, &err);
	if (r == -ENOENT)
		return;
	o = json_object();
	json_object_set_new(o, "path", json_string(path));
	if (device)
		json_object_set_new(o, "device", json_string(device));
	if (r < 0)
		json_object_set_new(o, "error", json_string(err_msg(&err)));
	else
		json_object_set_new(o, "holders",
				    json_string(holders_format(&h, text, sizeof(text))));
	json_array_append_new(ret, o);
}

/* Whether device entry d of a snapshot is of the volume what (its name, or a CSI volume id). */
static bool device_is(json_t *d, const char *what)
{
	const char *name = jstr(d, "volume");

	return name && (streq(name, what) || (startswith(name, "csi:") && streq(name + 4, what)));
}

static void status_volume_holders(json_t *root, json_t *v, json_t *ret)
{
	json_t *e;
	size_t i;

	json_array_foreach(json_object_get(v, "pods"), i, e) add_path(ret, jstr(e, "target"), NULL);
	json_array_foreach(json_object_get(root, "devices"), i,
			   e) if (jstr(v, "name") && device_is(e, jstr(v, "name")))
		add_path(ret, jstr(e, "mount_path"), jstr(e, "device"));
	add_path(ret, jstr(v, "device_mount_path"), NULL);
}

void status_node_volume_holders(json_t *e, json_t *ret)
{
	json_t *p;
	size_t i;

	json_array_foreach(json_object_get(e, "published"), i, p)
		add_path(ret, jstr(p, "target"), NULL);
	add_path(ret, jstr(e, "staged_at"), jstr(e, "device"));
}

int status_print_holders(json_t *root, const char *what, bool as_json)
{
	json_auto_t *list = json_array();
	json_t *e;
	size_t i;

	if (what[0] == '/') {
		add_path(list, what, NULL);
		if (!json_array_size(list)) {
			fprintf(stderr, "volagent status: nothing is mounted at %s\n", what);
			return 1;
		}
	} else {
		json_t *v = find_volume(root, what), *d;
		bool found = v != NULL;

		if (v)
			status_volume_holders(root, v, list);
		/* A volume no longer desired may still be attached or mounted. */
		json_array_foreach(json_object_get(root, "devices"), i, d) if (device_is(d, what))
		{
			found = true;
			add_path(list, jstr(d, "mount_path"), jstr(d, "device"));
		}
		if (!found) {
			fprintf(stderr, "volagent status: the agent has no volume \"%s\"\n", what);
			return 1;
		}
	}
	if (as_json) {
		char *s = json_dumps(list, JSON_INDENT(2));

		if (s)
			puts(s);
		free(s);
		return 0;
	}
	if (!json_array_size(list))
		printf("%s: nothing of it is mounted\n", what);
	json_array_foreach(list, i, e)
	{
		const char *h = jstr(e, "holders");

		if (jstr(e, "error"))
			printf("%s: holders not found: %s\n", jstr(e, "path"), jstr(e, "error"));
		else if (h && *h)
			printf("%s: held by: %s\n", jstr(e, "path"), h);
		else
			printf("%s: nothing holds it\n", jstr(e, "path"));
	}
	return 0;
}
