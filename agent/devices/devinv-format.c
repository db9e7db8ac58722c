/* devinv-format.c - the device inventory as JSON (shaped like `lsblk --json`, with the stable
 * id added) and as a table for people.  Every field is present in the JSON; what neither sysfs,
 * udev nor libblkid knows is null, so a program can tell "absent" from "empty". */
#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "devinv.h"
#include "macro.h"

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *strv_array(char **v)
{
	json_t *a = json_array();

	for (size_t i = 0; a && v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static json_t *bluestore_json(const struct devinv_device *d)
{
	const struct bluestore_label *l = &d->bluestore;

	if (!d->has_bluestore)
		return json_null();
	return json_pack("{s:s, s:o, s:o, s:o}", "osd-uuid", l->osd_uuid, "osd-id",
			 l->osd_id >= 0 ? json_integer(l->osd_id) : json_null(), "ceph-fsid",
			 str_or_null(l->ceph_fsid[0] ? l->ceph_fsid : NULL), "description",
			 str_or_null(l->description[0] ? l->description : NULL));
}

static json_t *device_fields(const struct devinv_device *d)
{
	char majmin[32];
	json_t *o;

	snprintf(majmin, sizeof(majmin), "%u:%u", major(d->devnum), minor(d->devnum));
	o = json_object();
	if (!o)
		return NULL;
	json_object_set_new(o, "name", json_string(d->name));
	json_object_set_new(o, "path", json_string(d->path));
	json_object_set_new(o, "maj:min", json_string(majmin));
	json_object_set_new(o, "size", json_integer((json_int_t)d->size));
	json_object_set_new(o, "type", json_string(d->type));
	json_object_set_new(o, "ro", json_boolean(d->ro));
	json_object_set_new(o, "rm", json_boolean(d->removable));
	json_object_set_new(o, "rota", json_boolean(d->rota));
	json_object_set_new(o, "model", str_or_null(d->model));
	json_object_set_new(o, "serial", str_or_null(d->serial));
	json_object_set_new(o, "wwn", str_or_null(d->wwn));
	json_object_set_new(o, "dm-name", str_or_null(d->dm_name));
	json_object_set_new(o, "dm-uuid", str_or_null(d->dm_uuid));
	json_object_set_new(o, "back-file", str_or_null(d->back_file));
	json_object_set_new(o, "links", strv_array(d->links));
	json_object_set_new(o, "fstype", str_or_null(d->fstype));
	json_object_set_new(o, "uuid", str_or_null(d->uuid));
	json_object_set_new(o, "label", str_or_null(d->label));
	json_object_set_new(o, "partuuid", str_or_null(d->partuuid));
	json_object_set_new(o, "pttype", str_or_null(d->pttype));
	json_object_set_new(o, "ptuuid", str_or_null(d->ptuuid));
	json_object_set_new(o, "bluestore", bluestore_json(d));
	json_object_set_new(o, "holders", strv_array(d->holders));
	json_object_set_new(o, "mountpoints", strv_array(d->mountpoints));
	json_object_set_new(o, "stable-id", str_or_null(d->stable_id));
	json_object_set_new(o, "id-kind", json_string(devinv_id_kind_to_string(d->id_kind)));
	json_object_set_new(o, "id-source", str_or_null(d->id_source));
	json_object_set_new(o, "by-id", strv_array(d->by_id));
	json_object_set_new(o, "duplicate-id", json_boolean(d->duplicate_id));
	json_object_set_new(o, "udev", json_boolean(d->udev_initialized));
	json_object_set_new(o, "probe-error", str_or_null(d->probe_error));
	return o;
}

json_t *devinv_device_to_json(const struct devinv *inv, const struct devinv_device *d)
{
	json_t *o = device_fields(d), *children = NULL;

	if (!o)
		return NULL;
	for (size_t i = 0; i < inv->n_devices; i++) {
		const struct devinv_device *c = inv->devices[i];

		if (!c->parent || !streq(c->parent, d->name))
			continue;
		if (!children) {
			children = json_array();
			json_object_set_new(o, "children", children);
		}
		json_array_append_new(children, device_fields(c));
	}
	return o;
}

json_t *devinv_to_json(const struct devinv *inv)
{
	json_t *list = json_array(), *root;

	if (!list)
		return NULL;
	for (size_t i = 0; i < inv->n_devices; i++) {
		const struct devinv_device *d = inv->devices[i];

		/* A partition whose disk is listed goes under that disk's children. */
		if (d->parent && devinv_find(inv, d->parent))
			continue;
		json_array_append_new(list, devinv_device_to_json(inv, d));
	}
	root = json_pack("{s:b, s:o}", "udev", inv->udev_db, "blockdevices", list);
	return root;
}

static void human_size(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "BKMGTPE";
	double v = (double)bytes;
	size_t u = 0;

	while (v >= 1024 && u < sizeof(units) - 2) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%lluB", (unsigned long long)bytes);
	else if (v < 10 && v != (double)(uint64_t)v)
		snprintf(buf, len, "%.1f%c", v, units[u]);
	else
		snprintf(buf, len, "%.0f%c", v, units[u]);
}

static const char *dash(const char *s)
{
	return s ? s : "-";
}

void devinv_print_table(const struct devinv *inv, FILE *f)
{
	fprintf(f, "%-12s %-8s %6s %2s %-5s %-14s %-46s %-15s %s\n", "NAME", "MAJ:MIN", "SIZE",
		"RO", "TYPE", "FSTYPE", "STABLE-ID", "ID-SOURCE", "MOUNTPOINTS");
	for (size_t i = 0; i < inv->n_devices; i++) {
		const struct devinv_device *d = inv->devices[i];
		bool nested = d->parent && devinv_find(inv, d->parent);
		char name[64], majmin[32], size[16];
		const char *id = d->stable_id;

		if (nested) {
			bool last = i + 1 == inv->n_devices ||
				    !streq_ptr(inv->devices[i + 1]->parent, d->parent);
			snprintf(name, sizeof(name), "%s%s", last ? "`-" : "|-", d->name);
		} else {
			snprintf(name, sizeof(name), "%s", d->name);
		}
		snprintf(majmin, sizeof(majmin), "%u:%u", major(d->devnum), minor(d->devnum));
		human_size(d->size, size, sizeof(size));
		fprintf(f, "%-12s %-8s %6s %2d %-5s %-14s %-46s %-15s ", name, majmin, size, d->ro,
			d->type, dash(d->fstype), id ? id : "- (no identity)", dash(d->id_source));
		for (size_t m = 0; d->mountpoints && d->mountpoints[m]; m++)
			fprintf(f, "%s%s", m ? "," : "", d->mountpoints[m]);
		if (!d->mountpoints)
			fputs("-", f);
		if (d->duplicate_id)
			fprintf(f, "  [duplicate id%s]",
				d->id_kind == DEVINV_ID_SERIAL ? ": serial shared, not trusted"
							       : "");
		if (d->probe_error)
			fprintf(f, "  [probe: %s]", d->probe_error);
		fputc('\n', f);
	}
	if (!inv->udev_db)
		fprintf(f,
			"\nno udev database: hardware ids come from sysfs, named as udev would name "
			"them; /dev/disk/by-* links and what only udev knows (USB serials) are "
			"absent\n");
}
