/* osd-check.c - the user's device selection and the per-OSD verdict (table in osd-check.h).
 * The order matters: first where the saved identity is now, then what the selection says
 * about that name.  A name alone never decides. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "macro.h"
#include "osd-check.h"

static const char *const verdict_names[] = {
	[OSD_KEEP] = "KEEP",
	[OSD_SAFE_TO_REMOVE] = "SAFE_TO_REMOVE",
	[OSD_NOT_SAFE] = "NOT_SAFE",
	[OSD_MISSING] = "MISSING",
};

const char *osd_verdict_to_string(enum osd_verdict v)
{
	return (unsigned)v < ARRAY_SIZE(verdict_names) ? verdict_names[v] : "?";
}

/* ---- selection ---- */

struct osd_selection *osd_selection_free(struct osd_selection *sel)
{
	if (!sel)
		return NULL;
	for (size_t i = 0; sel->names && sel->names[i]; i++)
		free(sel->names[i]);
	free(sel->names);
	for (size_t i = 0; sel->entries && sel->entries[i]; i++)
		free(sel->entries[i]);
	free(sel->entries);
	if (sel->is_filter)
		regfree(&sel->filter);
	free(sel->text);
	free(sel);
	return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct osd_selection *, osd_selection_free);

static const char *bare_name(const char *name)
{
	return startswith(name, "/dev/") ? name + strlen("/dev/") : name;
}

/* A list entry as the kernel name it means now: "/dev/disk/by-id/x" -> "sdc". */
static char *list_entry_name(const char *entry)
{
	char real[PATH_MAX];

	if (startswith(entry, "/dev/") && strchr(entry + strlen("/dev/"), '/') &&
	    realpath(entry, real) && startswith(real, "/dev/"))
		return strdup(real + strlen("/dev/"));
	return strdup(bare_name(entry));
}

int osd_selection_new_list(const char *list, struct osd_selection **ret, struct error_info *err)
{
	_cleanup_(osd_selection_freep) struct osd_selection *sel = calloc(1, sizeof(*sel));
	_cleanup_free_ char *copy = strdup(list);
	size_t n = 0, cap = 1;
	char *save = NULL;

	if (!sel || !copy)
		return -ENOMEM;
	for (const char *p = list; *p; p++)
		cap += *p == ',';
	sel->names = calloc(cap + 1, sizeof(char *));
	sel->entries = calloc(cap + 1, sizeof(char *));
	sel->text = strdup(list);
	if (!sel->names || !sel->entries || !sel->text)
		return -ENOMEM;
	/* Empty entries are refused rather than skipped: "sda,,sdb" is likely a mistake. */
	if (!*list || list[0] == ',' || endswith(list, ",") || strstr(list, ",,"))
		return err_set(err, -EINVAL, "--devices: empty entry in \"%s\"", list);
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!*bare_name(tok))
			return err_set(err, -EINVAL, "--devices: \"%s\" names no device", tok);
		sel->entries[n] = strdup(tok);
		sel->names[n] = list_entry_name(tok);
		if (!sel->entries[n] || !sel->names[n++])
			return -ENOMEM;
	}
	*ret = TAKE_PTR(sel);
	return 0;
}

static bool kernel_name_exists(const struct devinv *inv, const char *name)
{
	for (size_t i = 0; i < inv->n_devices; i++)
		if (streq(inv->devices[i]->name, name))
			return true;
	return false;
}

int osd_selection_resolve(struct osd_selection *sel, const struct devinv *inv,
			  struct error_info *err)
{
	for (size_t i = 0; !sel->is_filter && sel->entries[i]; i++) {
		const char *e = sel->entries[i];
		bool by_id = startswith(e, "/dev/disk/by-id/");
		const struct devinv_device *d;
		size_t n;
		char *name;

		/* A plain word is a kernel name first; only a word no device is called is tried as
		 * a by-id name. */
		if (!by_id && (strchr(e, '/') || kernel_name_exists(inv, e)))
			continue;
		n = devinv_find_by_id(inv, e, &d);
		if (n > 1)
			return err_set(
				err, -ENOTUNIQ,
				"--devices: \"%s\" fits %zu devices (they share a serial); name "
				"the device by another id",
				e, n);
		if (n == 0) {
			if (!by_id || !startswith(sel->names[i], "disk/by-id/"))
				continue; /* a plain name of no device, or a link that resolved */
			return err_set(err, -ENOENT,
				       "--devices: \"%s\": no device of this node has that by-id "
				       "name",
				       e);
		}
		name = strdup(d->name);
		if (!name)
			return -ENOMEM;
		free(sel->names[i]);
		sel->names[i] = name;
	}
	return 0;
}

int osd_selection_new_filter(const char *regex, struct osd_selection **ret, struct error_info *err)
{
	_cleanup_(osd_selection_freep) struct osd_selection *sel = calloc(1, sizeof(*sel));
	char why[128];
	int r;

	if (!sel)
		return -ENOMEM;
	if (!*regex)
		return err_set(err, -EINVAL, "--device-filter: empty expression");
	sel->text = strdup(regex);
	if (!sel->text)
		return -ENOMEM;
	r = regcomp(&sel->filter, regex, REG_EXTENDED | REG_NOSUB);
	if (r != 0) {
		regerror(r, &sel->filter, why, sizeof(why));
		return err_set(err, -EINVAL, "--device-filter \"%s\": %s", regex, why);
	}
	sel->is_filter = true;
	*ret = TAKE_PTR(sel);
	return 0;
}

bool osd_selection_selects(const struct osd_selection *sel, const char *name)
{
	const char *bare = bare_name(name);

	if (sel->is_filter)
		return regexec(&sel->filter, bare, 0, NULL, 0) == 0;
	for (size_t i = 0; sel->names[i]; i++)
		if (streq(sel->names[i], bare))
			return true;
	return false;
}

const char *osd_selection_what(const struct osd_selection *sel)
{
	return sel->is_filter ? "the device filter" : "the device list";
}

/* ---- the check ---- */

static bool holds(const struct devinv_device *d, const struct osd_record_entry *e)
{
	return devinv_device_has_identity(d, e->kind, e->value);
}

/* "a different device (ext4 uuid ...)", "a blank device (no identity found)" */
static char *describe_other(const struct devinv_device *d)
{
	_cleanup_free_ char *phrase = NULL;

	if (d->id_kind == DEVINV_ID_NONE)
		return strdup_printf("a blank device (no identity found%s%s)",
				     d->probe_error ? ": " : "", d->probe_error ?: "");
	phrase = devinv_identity_phrase(d, d->id_kind, devinv_device_identity(d, d->id_kind));
	return phrase ? strdup_printf("a different device (%s)", phrase) : NULL;
}

/* What the saved name holds now, for messages: "sda now holds nothing". */
static char *saved_name_now(const struct osd_check_result *res, const char *saved)
{
	_cleanup_free_ char *other = NULL;

	if (!res->saved_now)
		return strdup_printf("%s now holds nothing", saved);
	other = describe_other(res->saved_now);
	return other ? strdup_printf("%s now holds %s", saved, other) : NULL;
}

static char *found_list(const struct devinv *inv, const struct osd_record_entry *e)
{
	char *s = strdup("");

	for (size_t i = 0; s && i < inv->n_devices; i++) {
		char *n;
		if (!holds(inv->devices[i], e))
			continue;
		n = strdup_printf("%s%s%s", s, *s ? ", " : "", inv->devices[i]->name);
		free(s);
		s = n;
	}
	return s;
}

static char *make_message(const struct devinv *inv, const struct osd_selection *sel,
			  const struct osd_check_result *res)
{
	const struct osd_record_entry *e = res->entry;
	const char *saved = bare_name(e->device), *what = osd_selection_what(sel);
	const char *verdict = osd_verdict_to_string(res->verdict);
	_cleanup_free_ char *id = devinv_identity_phrase(res->now, e->kind, e->value);
	_cleanup_free_ char *now = saved_name_now(res, saved);
	_cleanup_free_ char *where = NULL;

	if (!id || !now)
		return NULL;
	switch (res->verdict) {
	case OSD_KEEP:
		if (streq(res->now->name, saved))
			return strdup_printf("osd.%d: %s: on %s with %s; %s selects %s", e->osd_id,
					     verdict, saved, id, what, saved);
		return strdup_printf("osd.%d: %s: saved on %s with %s, now on %s, which %s "
				     "selects; %s",
				     e->osd_id, verdict, saved, id, res->now->name, what, now);
	case OSD_SAFE_TO_REMOVE:
		return strdup_printf("osd.%d: %s: still on %s with %s, and %s no longer selects "
				     "%s",
				     e->osd_id, verdict, saved, id, what, saved);
	case OSD_NOT_SAFE:
		if (res->n_found > 1) {
			where = found_list(inv, e);
			return where ? strdup_printf("osd.%d: %s: saved on %s with %s, which is now "
						     "on %zu devices (%s): cannot tell which one "
						     "is the OSD",
						     e->osd_id, verdict, saved, id, res->n_found,
						     where)
				     : NULL;
		}
		return strdup_printf("osd.%d: %s: saved on %s with %s, now on %s; %s; %s does "
				     "not select %s, and deciding by name would destroy this OSD",
				     e->osd_id, verdict, saved, id, res->now->name, now, what,
				     res->now->name);
	case OSD_MISSING:
	default:
		if (res->hw_now)
			return strdup_printf("osd.%d: %s: saved on %s with %s, which is on no "
					     "device of this node; its disk (%s) is now %s and "
					     "holds no such label; %s",
					     e->osd_id, verdict, saved, id, e->hw_value,
					     res->hw_now->name, now);
		return strdup_printf("osd.%d: %s: saved on %s with %s, which is on no device of "
				     "this node; %s",
				     e->osd_id, verdict, saved, id, now);
	}
}

int osd_check_entry(const struct devinv *inv, const struct osd_selection *sel,
		    const struct osd_record_entry *e, struct osd_check_result *ret)
{
	struct osd_check_result res = { .entry = e };
	const char *saved = bare_name(e->device);

	for (size_t i = 0; i < inv->n_devices; i++)
		if (holds(inv->devices[i], e)) {
			/* Where it is under its saved name, that is the one to talk about. */
			if (!res.now || streq(inv->devices[i]->name, saved))
				res.now = inv->devices[i];
			res.n_found++;
		}
	res.saved_now = devinv_find(inv, e->device);
	for (size_t i = 0; e->hw_value && !res.hw_now && i < inv->n_devices; i++)
		if (devinv_device_has_identity(inv->devices[i], e->hw_kind, e->hw_value) &&
		    !inv->devices[i]->duplicate_id)
			res.hw_now = inv->devices[i];
	res.saved_holds_other = res.saved_now && !holds(res.saved_now, e);

	if (res.n_found == 0) {
		res.verdict = OSD_MISSING;
		res.selected = osd_selection_selects(sel, saved);
	} else {
		res.selected = osd_selection_selects(sel, res.now->name);
		if (res.n_found > 1)
			res.verdict = OSD_NOT_SAFE;
		else if (streq(res.now->name, saved))
			res.verdict = res.selected ? OSD_KEEP : OSD_SAFE_TO_REMOVE;
		else
			res.verdict = res.selected ? OSD_KEEP : OSD_NOT_SAFE;
	}

	res.message = make_message(inv, sel, &res);
	if (!res.message)
		return -ENOMEM;
	/* The selection would hand whatever now sits under the saved name to Ceph. */
	res.foreign = res.saved_holds_other && osd_selection_selects(sel, saved);
	if (res.foreign) {
		_cleanup_free_ char *other = describe_other(res.saved_now);
		res.warning = other ? strdup_printf("warning: %s selects %s, where osd.%d was "
						    "deployed, but %s now holds %s: the selection "
						    "would hand a foreign disk to Ceph",
						    osd_selection_what(sel), saved, e->osd_id,
						    saved, other)
				    : NULL;
		if (!res.warning) {
			osd_check_result_done(&res);
			return -ENOMEM;
		}
	}
	*ret = res;
	return 0;
}

void osd_check_result_done(struct osd_check_result *res)
{
	free(res->message);
	free(res->warning);
	res->message = res->warning = NULL;
}

static json_t *osd_check_result_json_base(const struct osd_check_result *res);

static json_t *device_brief(const struct devinv_device *d)
{
	if (!d)
		return json_null();
	return json_pack("{s:s, s:o, s:s}", "name", d->name, "stable-id",
			 d->stable_id ? json_string(d->stable_id) : json_null(), "id-kind",
			 devinv_id_kind_to_string(d->id_kind));
}

json_t *osd_check_result_to_json(const struct osd_check_result *res)
{
	const struct osd_record_entry *e = res->entry;
	json_t *o = osd_check_result_json_base(res);

	if (o) {
		json_object_set_new(o, "hw_id",
				    e->hw_value ? json_string(e->hw_value) : json_null());
		json_object_set_new(o, "hw_id_now_on",
				    res->hw_now ? json_string(res->hw_now->name) : json_null());
	}
	return o;
}

static json_t *osd_check_result_json_base(const struct osd_check_result *res)
{
	const struct osd_record_entry *e = res->entry;

	return json_pack("{s:i, s:s, s:s, s:s, s:s, s:o, s:i, s:o, s:b, s:b, s:s, s:o}", "osd_id",
			 e->osd_id, "status", osd_verdict_to_string(res->verdict), "saved_device",
			 bare_name(e->device), "id_kind", devinv_id_kind_to_string(e->kind),
			 "id_value", e->value, "now_on",
			 res->now ? json_string(res->now->name) : json_null(), "found_on_devices",
			 (int)res->n_found, "saved_device_now", device_brief(res->saved_now),
			 "selected", res->selected, "foreign_disk_selected", res->foreign,
			 "message", res->message, "warning",
			 res->warning ? json_string(res->warning) : json_null());
}
