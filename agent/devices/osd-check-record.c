/* osd-check-record.c - the saved record of where each OSD was deployed: parsing the project's
 * own format and ceph-volume's `raw list` JSON, and writing the project's format from the
 * devices now.  The record decides whether a disk may be wiped, so it is read strictly: any
 * entry that is not exactly right rejects the whole record, naming the entry and field. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "macro.h"
#include "osd-check.h"

/* Version 2 added the disk's hardware id beside the identity; version 1 is still read. */
#define RECORD_VERSION 2
#define OSD_ID_MAX 1000000

DEFINE_TRIVIAL_CLEANUP_FUNC(struct osd_record *, osd_record_free);

struct osd_record *osd_record_free(struct osd_record *rec)
{
	if (!rec)
		return NULL;
	for (size_t i = 0; i < rec->n_entries; i++) {
		free(rec->entries[i].device);
		free(rec->entries[i].value);
		free(rec->entries[i].hw_value);
		free(rec->entries[i].where);
	}
	free(rec->entries);
	free(rec);
	return NULL;
}

static int bad(struct error_info *err, const char *origin, const char *where, const char *field,
	       const char *why)
{
	if (field)
		return err_set(err, -EINVAL, "%s: %s: field \"%s\": %s", origin, where, field, why);
	return err_set(err, -EINVAL, "%s: %s: %s", origin, where, why);
}

/* A device name as saved: "sda" or an absolute /dev path; nothing that could not be one. */
static bool device_name_valid(const char *s)
{
	if (!*s || strlen(s) > 255)
		return false;
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return false;
	if (strchr(s, '/') && !startswith(s, "/dev/"))
		return false;
	return !strstr(s, "/../") && !endswith(s, "/..");
}

static int get_osd_id(json_t *o, const char *origin, const char *where, struct error_info *err,
		      int *ret)
{
	json_t *v = json_object_get(o, "osd_id");

	if (!v)
		return bad(err, origin, where, "osd_id", "missing");
	if (!json_is_integer(v))
		return bad(err, origin, where, "osd_id", "not an integer");
	if (json_integer_value(v) < 0 || json_integer_value(v) > OSD_ID_MAX)
		return bad(err, origin, where, "osd_id", "out of range");
	*ret = (int)json_integer_value(v);
	return 0;
}

static int get_string(json_t *o, const char *key, const char *origin, const char *where,
		      struct error_info *err, const char **ret)
{
	json_t *v = json_object_get(o, key);

	if (!v)
		return bad(err, origin, where, key, "missing");
	if (!json_is_string(v))
		return bad(err, origin, where, key, "not a string");
	if (!*json_string_value(v))
		return bad(err, origin, where, key, "empty");
	*ret = json_string_value(v);
	return 0;
}

static int add_entry(struct osd_record *rec, int osd_id, const char *device,
		     enum devinv_id_kind kind, const char *value, const char *where)
{
	struct osd_record_entry *e, *nv;

	nv = realloc(rec->entries, (rec->n_entries + 1) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	rec->entries = nv;
	e = &rec->entries[rec->n_entries];
	*e = (struct osd_record_entry){ .osd_id = osd_id, .kind = kind };
	e->device = strdup(device);
	e->value = strdup(value);
	e->where = strdup(where);
	rec->n_entries++;
	if (!e->device || !e->value || !e->where)
		return -ENOMEM;
	return 0;
}

/* An identity value: printable, bounded, and for bluestore an OSD uuid (with an optional role). */
static bool identity_valid(enum devinv_id_kind kind, const char *value)
{
	const char *slash;

	if (!*value || strlen(value) > 512)
		return false;
	for (const char *p = value; *p; p++)
		if ((unsigned char)*p < ' ' || *p == 0x7f)
			return false;
	if (kind != DEVINV_ID_BLUESTORE)
		return true;
	slash = strchr(value, '/');
	return bluestore_uuid_valid(value, slash ? (size_t)(slash - value) : strlen(value));
}

/* Version 2's optional pair "hw_id_kind" (wwn or serial) and "hw_id" (a by-id name). */
static int parse_hw_id(json_t *o, json_int_t version, const char *origin, const char *where,
		       struct error_info *err, struct osd_record_entry *e)
{
	bool has_kind = json_object_get(o, "hw_id_kind"), has_id = json_object_get(o, "hw_id");
	const char *kind_name, *value;
	int kind, r;

	if (!has_kind && !has_id)
		return 0;
	if (version < 2)
		return bad(err, origin, where, has_kind ? "hw_id_kind" : "hw_id",
			   "only in records of version 2");
	if (json_is_null(json_object_get(o, "hw_id_kind")) &&
	    json_is_null(json_object_get(o, "hw_id")))
		return 0;
	r = get_string(o, "hw_id_kind", origin, where, err, &kind_name);
	if (r == 0)
		r = get_string(o, "hw_id", origin, where, err, &value);
	if (r < 0)
		return r;
	kind = devinv_id_kind_from_string(kind_name);
	if (kind != DEVINV_ID_WWN && kind != DEVINV_ID_SERIAL)
		return bad(err, origin, where, "hw_id_kind", "not one of wwn, serial");
	if (!identity_valid(kind, value) || strchr(value, ' '))
		return bad(err, origin, where, "hw_id", "not a by-id name");
	e->hw_kind = kind;
	e->hw_value = strdup(value);
	return e->hw_value ? 0 : -ENOMEM;
}

static int parse_volagent(json_t *root, const char *origin, struct osd_record *rec,
			  struct error_info *err)
{
	json_t *version = json_object_get(root, "volagent_osd_record");
	json_t *osds = json_object_get(root, "osds"), *o;
	size_t i;
	int r;

	if (!json_is_integer(version) || json_integer_value(version) < 1 ||
	    json_integer_value(version) > RECORD_VERSION)
		return bad(err, origin, "record", "volagent_osd_record", "must be 1 or 2");
	if (!osds)
		return bad(err, origin, "record", "osds", "missing");
	if (!json_is_array(osds))
		return bad(err, origin, "record", "osds", "not an array");
	rec->format = "volagent";
	json_array_foreach(osds, i, o)
	{
		char where[64];
		const char *device, *kind_name, *value;
		int osd_id, kind;

		snprintf(where, sizeof(where), "osds[%zu]", i);
		if (!json_is_object(o))
			return bad(err, origin, where, NULL, "not an object");
		r = get_osd_id(o, origin, where, err, &osd_id);
		if (r == 0)
			r = get_string(o, "device", origin, where, err, &device);
		if (r == 0)
			r = get_string(o, "id_kind", origin, where, err, &kind_name);
		if (r == 0)
			r = get_string(o, "id_value", origin, where, err, &value);
		if (r < 0)
			return r;
		if (!device_name_valid(device))
			return bad(err, origin, where, "device", "not a device name or /dev path");
		kind = devinv_id_kind_from_string(kind_name);
		if (kind <= DEVINV_ID_NONE)
			return bad(err, origin, where, "id_kind",
				   "not one of wwn, serial, dm-uuid, partuuid, ptuuid, bluestore, "
				   "fs-uuid");
		if (!identity_valid(kind, value))
			return bad(err, origin, where, "id_value",
				   kind == DEVINV_ID_BLUESTORE ? "not an OSD uuid"
							       : "not a valid identity");
		r = add_entry(rec, osd_id, device, kind, value, where);
		if (r == 0)
			r = parse_hw_id(o, json_integer_value(version), origin, where, err,
					&rec->entries[rec->n_entries - 1]);
		if (r == -ENOMEM)
			return err_set(err, r, "%s: out of memory", origin);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ceph-volume raw list: {"<osd uuid>": {"ceph_fsid", "device", "osd_id", "osd_uuid", "type"}}.
 * Older releases keyed entries by OSD id; both are accepted when they agree with the entry. */
static int parse_ceph_volume(json_t *root, const char *origin, struct osd_record *rec,
			     struct error_info *err)
{
	const char *key;
	json_t *o;
	int r;

	rec->format = "ceph-volume";
	json_object_foreach(root, key, o)
	{
		char where[128], idbuf[16];
		const char *device, *osd_uuid, *type;
		int osd_id;

		snprintf(where, sizeof(where), "entry \"%.80s\"", key);
		if (!json_is_object(o))
			return bad(err, origin, where, NULL, "not an object");
		r = get_osd_id(o, origin, where, err, &osd_id);
		if (r == 0)
			r = get_string(o, "osd_uuid", origin, where, err, &osd_uuid);
		if (r == 0)
			r = get_string(o, "device", origin, where, err, &device);
		if (r < 0)
			return r;
		if (!bluestore_uuid_valid(osd_uuid, strlen(osd_uuid)))
			return bad(err, origin, where, "osd_uuid", "not a uuid");
		if (!device_name_valid(device))
			return bad(err, origin, where, "device", "not a device name or /dev path");
		type = json_string_value(json_object_get(o, "type"));
		if (json_object_get(o, "type") && (!type || !streq(type, "bluestore")))
			return bad(err, origin, where, "type",
				   "only bluestore OSDs can be checked");
		snprintf(idbuf, sizeof(idbuf), "%d", osd_id);
		if (strcasecmp(key, osd_uuid) != 0 && !streq(key, idbuf))
			return bad(err, origin, where, "osd_uuid",
				   "the entry's key is neither its osd_uuid nor its osd_id");
		r = add_entry(rec, osd_id, device, DEVINV_ID_BLUESTORE, osd_uuid, where);
		if (r < 0)
			return err_set(err, r, "%s: out of memory", origin);
	}
	return 0;
}

static int check_unique_ids(const struct osd_record *rec, const char *origin,
			    struct error_info *err)
{
	for (size_t i = 0; i < rec->n_entries; i++)
		for (size_t j = 0; j < i; j++)
			if (rec->entries[i].osd_id == rec->entries[j].osd_id) {
				char why[96];
				snprintf(why, sizeof(why), "osd.%d is also in %s",
					 rec->entries[i].osd_id, rec->entries[j].where);
				return bad(err, origin, rec->entries[i].where, "osd_id", why);
			}
	return 0;
}

static int parse_root(json_t *root, const char *origin, struct osd_record **ret,
		      struct error_info *err)
{
	_cleanup_(osd_record_freep) struct osd_record *rec = NULL;
	int r;

	if (!json_is_object(root))
		return err_set(err, -EINVAL, "%s: the record must be a JSON object", origin);
	rec = calloc(1, sizeof(*rec));
	if (!rec)
		return -ENOMEM;
	if (json_object_get(root, "volagent_osd_record") || json_object_get(root, "osds"))
		r = parse_volagent(root, origin, rec, err);
	else
		r = parse_ceph_volume(root, origin, rec, err);
	if (r == 0)
		r = check_unique_ids(rec, origin, err);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(rec);
	return 0;
}

int osd_record_parse(const char *text, const char *origin, struct osd_record **ret,
		     struct error_info *err)
{
	json_auto_t *root = NULL;
	json_error_t jerr;

	root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return err_set(err, -EINVAL, "%s:%d:%d: not JSON: %s", origin, jerr.line,
			       jerr.column, jerr.text);
	return parse_root(root, origin, ret, err);
}

int osd_record_load(const char *path, struct osd_record **ret, struct error_info *err)
{
	json_auto_t *root = NULL;
	json_error_t jerr;

	if (access(path, R_OK) < 0)
		return err_set(err, -errno, "%s: %s", path, strerror(errno));
	root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return err_set(err, -EINVAL, "%s:%d:%d: not JSON: %s", path, jerr.line, jerr.column,
			       jerr.text);
	return parse_root(root, path, ret, err);
}

static bool serial_shared(const struct devinv *inv, const struct devinv_device *d,
			  const char *serial)
{
	for (size_t i = 0; i < inv->n_devices; i++)
		if (inv->devices[i] != d &&
		    devinv_device_has_identity(inv->devices[i], DEVINV_ID_SERIAL, serial))
			return true;
	return false;
}

json_t *osd_record_from_devinv(const struct devinv *inv, const struct osd_selection *sel)
{
	json_t *osds = json_array();

	for (size_t i = 0; osds && i < inv->n_devices; i++) {
		const struct devinv_device *d = inv->devices[i];

		if (!devinv_device_is_osd(d) || d->bluestore.osd_id < 0)
			continue;
		enum devinv_id_kind hw_kind;
		const char *hw;
		json_t *o;

		if (sel && !osd_selection_selects(sel, d->name))
			continue;
		o = json_pack("{s:i, s:s, s:s, s:s}", "osd_id", d->bluestore.osd_id, "device",
			      d->name, "id_kind", "bluestore", "id_value", d->bluestore.osd_uuid);
		/* The disk's hardware id, when it has one of its own (not a shared serial). */
		hw = devinv_device_hw_identity(d, &hw_kind);
		if (o && hw && !(hw_kind == DEVINV_ID_SERIAL && serial_shared(inv, d, hw))) {
			json_object_set_new(o, "hw_id_kind",
					    json_string(devinv_id_kind_to_string(hw_kind)));
			json_object_set_new(o, "hw_id", json_string(hw));
		}
		json_array_append_new(osds, o);
	}
	return json_pack("{s:i, s:o}", "volagent_osd_record", RECORD_VERSION, "osds", osds);
}
