/* journal.c - see journal.h.
 *
 * The "csi" section is written from text kept per entry: the caller hands the same json_t
 * for an entry that did not change (reconciler-requests.c keeps them), and its compact text,
 * made by jansson once, is kept here by that pointer (with a reference, so the address is not
 * reused while kept).  A save then serialises only the entries that are new since the last
 * one; the document is the jansson text of the rest of the root with the entries' texts
 * joined into its "csi" list. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file-util.h"
#include "hashmap.h"
#include "journal.h"
#include "macro.h"
#include "path-util.h"

#define JOURNAL_VERSION 1

struct journal {
	char *dir;
	char *path;
	char *prev_path; /* the text the last save replaced */
	bool dirty;
	unsigned long saves;
	struct hashmap *csi_text; /* "%p" of a csi entry -> struct entry_text */
	unsigned gen;
};

/* The compact text of one entry of the csi list. */
struct entry_text {
	char key[2 * sizeof(void *) + 3];
	json_t *entry; /* a reference */
	char *text;
	size_t len;
	unsigned gen; /* the save that last wrote it */
};

static void entry_text_free(void *p)
{
	struct entry_text *t = p;

	json_decref(t->entry);
	free(t->text);
	free(t);
}

const char *journal_boot_id(void)
{
	static char id[64];
	FILE *f;

	if (id[0])
		return id;
	f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (f) {
		if (fgets(id, sizeof(id), f))
			id[strcspn(id, "\n")] = '\0';
		fclose(f);
	}
	return id;
}

int journal_open(const char *state_dir, struct journal **ret, struct error_info *err)
{
	struct journal *j;
	int r = path_mkdir_p(state_dir, 0700);

	if (r < 0)
		return err_set(err, r, "state dir %s: %s", state_dir, strerror(-r));
	j = calloc(1, sizeof(*j));
	if (!j || !(j->dir = strdup(state_dir)) ||
	    !(j->path = strdup_printf("%s/journal.json", state_dir)) ||
	    !(j->prev_path = strdup_printf("%s/journal.json.prev", state_dir))) {
		journal_free(j);
		return -ENOMEM;
	}
	*ret = j;
	return 0;
}

struct journal *journal_free(struct journal *j)
{
	if (!j)
		return NULL;
	hashmap_free_values(j->csi_text, entry_text_free);
	free(j->dir);
	free(j->path);
	free(j->prev_path);
	free(j);
	return NULL;
}

static const char *get_string(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Reads one device entry; returns -EBADMSG naming the field when it is malformed. */
static int load_device(struct actual_state *a, json_t *e, size_t i, struct error_info *err)
{
	const char *volume = get_string(e, "volume"), *plugin = get_string(e, "plugin");
	const char *mount_path = get_string(e, "mount_path"), *device = get_string(e, "device");
	const struct volume_plugin *p;
	struct volume_spec *spec = NULL;
	struct error_info ignored = { 0 };
	struct asw_device *d;
	json_t *meta, *v;
	const char *key;

	if (!volume || !plugin || !mount_path)
		return err_set(err, -EBADMSG,
			       "devices[%zu]: volume, plugin and mount_path are "
			       "required strings",
			       i);
	if (asw_get_device(a, volume))
		return err_set(err, -EBADMSG, "devices[%zu]: volume %s is listed twice", i, volume);
	p = plugin_find_by_name(plugin);
	(void)plugin_construct_spec(p, volume, mount_path, &spec, &ignored);
	/* Optional: an entry without it (every one before raw block volumes) is Filesystem. */
	if (spec && json_is_true(json_object_get(e, "block")))
		spec->block = true;
	d = asw_add_device(a, volume, plugin, spec, mount_path);
	volume_spec_unref(spec);
	if (!d)
		return -ENOMEM;
	d->attached = json_is_true(json_object_get(e, "attached"));
	d->read_only = json_is_true(json_object_get(e, "read_only"));
	if (device && !(d->att.device_path = strdup(device)))
		return -ENOMEM;
	/* Optional (agents before it did not record it): the filesystem made or mounted. */
	v = json_object_get(e, "fs_uuid");
	if (v && (!json_is_string(v) || json_string_length(v) == 0 ||
		  json_string_length(v) >= MOUNT_TARGET_UUID_MAX))
		return err_set(err, -EBADMSG, "devices[%zu].fs_uuid: must be a UUID string", i);
	if (v && !(d->fs_uuid = strdup(json_string_value(v))))
		return -ENOMEM;
	meta = json_object_get(e, "meta");
	if (meta && !json_is_object(meta))
		return err_set(err, -EBADMSG, "devices[%zu].meta: must be an object", i);
	json_object_foreach(meta, key, v)
	{
		if (!json_is_string(v))
			return err_set(err, -EBADMSG, "devices[%zu].meta.%s: must be a string", i,
				       key);
		if (device_attachment_set_meta(&d->att, key, json_string_value(v)) < 0)
			return -ENOMEM;
	}
	return 0;
}

static void move_aside(const char *path)
{
	_cleanup_free_ char *aside = strdup_printf("%s.corrupt", path);

	if (aside)
		(void)rename(path, aside);
}

static void forget_devices(struct actual_state *a)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	void *v;

	while (hashmap_iterate(asw_devices(a), &it, &v, NULL))
		asw_remove_device(a, ((struct asw_device *)v)->volume_name);
}

/* Reads one journal file into a: 0, -ENOENT when there is none, or -EBADMSG (err says why;
 * a is left empty, all or nothing: a half-read journal would be trusted wrongly). */
static int load_file(const char *path, struct actual_state *a, bool *ret_same_boot,
		     json_t **ret_csi, struct error_info *err)
{
	json_auto_t *root = NULL;
	json_error_t jerr;
	json_t *devices, *e;
	const char *boot;
	size_t i;
	int r;

	if (access(path, F_OK) < 0 && errno == ENOENT)
		return -ENOENT;
	root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return err_set(err, -EBADMSG, "%s line %d: %s", path, jerr.line, jerr.text);
	if (!json_is_object(root) ||
	    json_integer_value(json_object_get(root, "version")) != JOURNAL_VERSION ||
	    !json_is_array(devices = json_object_get(root, "devices")))
		return err_set(err, -EBADMSG, "%s: not a version %d journal with a devices list",
			       path, JOURNAL_VERSION);
	json_array_foreach(devices, i, e)
	{
		if (!json_is_object(e))
			r = err_set(err, -EBADMSG, "devices[%zu]: must be an object", i);
		else
			r = load_device(a, e, i, err);
		if (r < 0) {
			forget_devices(a);
			return r == -EBADMSG ? err_prefix(err, "%s", path) : r;
		}
	}
	boot = get_string(root, "boot_id");
	*ret_same_boot = boot && streq(boot, journal_boot_id());
	*ret_csi = json_incref(json_object_get(root, "csi"));
	return 0;
}

int journal_load(struct journal *j, struct actual_state *a, bool *ret_same_boot, json_t **ret_csi,
		 struct error_info *err)
{
	struct error_info prev_err = { 0 };
	char why[sizeof(err->msg)];
	int r, k;

	*ret_same_boot = false;
	*ret_csi = NULL;
	r = load_file(j->path, a, ret_same_boot, ret_csi, err);
	if (r == -ENOENT)
		return 0; /* none yet, or removed on purpose: a copy beside it is not read */
	if (r != -EBADMSG)
		return r;
	move_aside(j->path);
	/* The copy the last save replaced: what a journal torn on its disk leaves. */
	k = load_file(j->prev_path, a, ret_same_boot, ret_csi, &prev_err);
	snprintf(why, sizeof(why), "%s", err_msg(err));
	if (k == 0) {
		err_set(err, -EBADMSG, "%s (moved aside to %s.corrupt)", why, j->path);
		return JOURNAL_LOADED_PREVIOUS;
	}
	if (k != -EBADMSG && k != -ENOENT)
		return k;
	return err_set(err, -EBADMSG, "%s (moved aside to %s.corrupt%s%s)", why, j->path,
		       k == -EBADMSG ? "; its previous copy is unreadable too: " : "",
		       k == -EBADMSG ? err_msg(&prev_err) : "");
}

static json_t *device_to_json(const struct asw_device *d)
{
	json_t *o = json_object(), *meta = json_object();

	if (!o || !meta) {
		json_decref(o);
		json_decref(meta);
		return NULL;
	}
	json_object_set_new(o, "volume", json_string(d->volume_name));
	json_object_set_new(o, "plugin", json_string(d->plugin_name));
	json_object_set_new(o, "mount_path", json_string(d->mount_path));
	if (d->att.device_path)
		json_object_set_new(o, "device", json_string(d->att.device_path));
	json_object_set_new(o, "attached", json_boolean(d->attached));
	json_object_set_new(o, "read_only", json_boolean(d->read_only));
	if (d->fs_uuid)
		json_object_set_new(o, "fs_uuid", json_string(d->fs_uuid));
	if (d->spec && d->spec->block)
		json_object_set_new(o, "block", json_true());
	for (size_t i = 0; i < d->att.n_meta; i++)
		json_object_set_new(meta, d->att.meta[i].key, json_string(d->att.meta[i].value));
	json_object_set_new(o, "meta", meta);
	return o;
}

/* The kept text of entry e, made now if it is new.  NULL: no memory. */
static struct entry_text *entry_text_get(struct journal *j, json_t *e)
{
	struct entry_text *t, key;

	snprintf(key.key, sizeof(key.key), "%p", (void *)e);
	t = hashmap_get(j->csi_text, key.key);
	if (!t) {
		t = calloc(1, sizeof(*t));
		if (!t)
			return NULL;
		memcpy(t->key, key.key, sizeof(t->key));
		t->text = json_dumps(e, JSON_COMPACT | JSON_ENCODE_ANY);
		if (!t->text || hashmap_put(j->csi_text, t->key, t) < 0) {
			free(t->text);
			free(t);
			return NULL;
		}
		t->entry = json_incref(e);
		t->len = strlen(t->text);
	}
	t->gen = j->gen;
	return t;
}

/* Drops the texts of entries the last save did not write. */
static void entry_text_sweep(struct journal *j)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	struct entry_text **gone;
	size_t n = 0;
	void *v;

	gone = calloc(hashmap_size(j->csi_text) + 1, sizeof(*gone));
	while (gone && hashmap_iterate(j->csi_text, &it, &v, NULL))
		if (((struct entry_text *)v)->gen != j->gen)
			gone[n++] = v;
	for (size_t i = 0; i < n; i++)
		entry_text_free(hashmap_remove(j->csi_text, gone[i]->key));
	free(gone);
}

/* head (a compact JSON object, "{...}") with "csi": the entries of csi (an array), and a
 * newline.  NULL: no memory. */
static char *with_csi_list(struct journal *j, const char *head, json_t *csi)
{
	size_t n = json_array_size(csi), len = strlen(head), size = len + 16;
	struct entry_text **texts = calloc(n + 1, sizeof(*texts));
	char *out = NULL, *p;
	json_t *e;
	size_t i;

	if (!texts || (!j->csi_text && !(j->csi_text = hashmap_new())))
		goto out;
	j->gen++;
	json_array_foreach(csi, i, e)
	{
		texts[i] = entry_text_get(j, e);
		if (!texts[i])
			goto out;
		size += texts[i]->len + 1;
	}
	out = malloc(size);
	if (!out)
		goto out;
	/* head ends with its closing brace, and has at least one member before it. */
	p = mempcpy(out, head, len - 1);
	p = stpcpy(p, ",\"csi\":[");
	for (i = 0; i < n; i++) {
		if (i)
			*p++ = ',';
		p = mempcpy(p, texts[i]->text, texts[i]->len);
	}
	strcpy(p, "]}\n");
	entry_text_sweep(j);
out:
	free(texts);
	return out;
}

/* journal.json.prev becomes another name of the journal about to be replaced (a hard link: no
 * data is copied), so that the rename leaves the old text there; the directory's fsync after
 * the rename makes both durable.  The link is made under a temporary name and renamed over
 * the old copy, so a copy is there at every moment, and one is never given up for nothing (no
 * journal to link: the first save, or a torn one moved aside).  Best effort: without it a save
 * still goes on. */
static void keep_previous(struct journal *j)
{
	_cleanup_close_ int dfd = open(j->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (dfd < 0)
		return;
	if (unlinkat(dfd, ".journal.json.prev.tmp", 0) < 0 && errno != ENOENT)
		return;
	if (linkat(dfd, "journal.json", dfd, ".journal.json.prev.tmp", 0) < 0)
		return;
	if (renameat(dfd, ".journal.json.prev.tmp", dfd, "journal.json.prev") < 0)
		(void)unlinkat(dfd, ".journal.json.prev.tmp", 0);
}

int journal_save(struct journal *j, const struct actual_state *a, json_t *csi,
		 struct error_info *err)
{
	json_auto_t *root = json_object();
	json_t *devices = json_array();
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	_cleanup_free_ char *text = NULL, *line = NULL;
	void *v;
	int r;

	if (!root || !devices) {
		json_decref(devices);
		return -ENOMEM;
	}
	json_object_set_new(root, "version", json_integer(JOURNAL_VERSION));
	json_object_set_new(root, "boot_id", json_string(journal_boot_id()));
	json_object_set_new(root, "devices", devices);
	if (csi && !json_is_array(csi))
		json_object_set(root, "csi", csi);
	while (hashmap_iterate(asw_devices(a), &it, &v, NULL)) {
		json_t *o = device_to_json(v);
		if (!o)
			return -ENOMEM;
		json_array_append_new(devices, o);
	}
	/* Compact: a node with thousands of CSI volumes saves it often. */
	text = json_dumps(root, JSON_COMPACT);
	if (!text)
		return -ENOMEM;
	line = json_is_array(csi) ? with_csi_list(j, text, csi) : strdup_printf("%s\n", text);
	if (!line)
		return -ENOMEM;
	keep_previous(j);
	r = file_write_atomic(j->dir, "journal.json", line, 0600, err);
	if (r < 0)
		return err_prefix(err, "journal");
	j->saves++;
	return 0;
}

void journal_mark_dirty(struct journal *j)
{
	j->dirty = true;
}

bool journal_is_dirty(const struct journal *j)
{
	return j->dirty;
}

int journal_flush(struct journal *j, const struct actual_state *a, json_t *csi,
		  struct error_info *err)
{
	int r;

	if (!j->dirty)
		return 0;
	r = journal_save(j, a, csi, err);
	if (r == 0)
		j->dirty = false;
	return r;
}

unsigned long journal_save_count(const struct journal *j)
{
	return j->saves;
}

const char *journal_path(const struct journal *j)
{
	return j->path;
}
