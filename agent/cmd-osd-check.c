/* cmd-osd-check.c - `volagent osd-check`: for each OSD in a saved record, may it be removed now?
 * Also `--record`, which prints a record of the OSDs on this node's devices now.  This command
 * reads devices and files only; it never removes or writes anything. */
#include <getopt.h>
#include <stdio.h>

#include "commands.h"
#include "macro.h"
#include "osd-check.h"

static void osd_check_usage(FILE *f)
{
	fprintf(f,
		"Usage: volagent osd-check --saved FILE (--devices LIST | --device-filter REGEX) "
		"[--json]\n"
		"       volagent osd-check --record [--devices LIST | --device-filter REGEX]\n"
		"\n"
		"For each OSD in FILE, says whether it may be removed now: KEEP, SAFE_TO_REMOVE,\n"
		"NOT_SAFE (its disk changed name; deciding by name would destroy it) or MISSING.\n"
		"\n"
		"  --saved FILE           the saved record: volagent's own (see --record) or the\n"
		"                         output of `ceph-volume raw list --format json`\n"
		"  --devices LIST         the device list as the user has it now: sda,sdb,... or\n"
		"                         by-id names (/dev/disk/by-id/virtio-SER1 or virtio-SER1),\n"
		"                         resolved through the inventory when the links are absent\n"
		"  --device-filter REGEX  the device filter as the user has it now (POSIX extended,\n"
		"                         matched against kernel names, unanchored)\n"
		"  --json                 print JSON\n"
		"  --record               print a record of the bluestore OSDs on this node now\n"
		"                         (on the selected devices only, when a selection is given)\n"
		"\n"
		"Exit status: 0 every OSD is KEEP or SAFE_TO_REMOVE, 1 any is NOT_SAFE or MISSING,\n"
		"2 bad input.  See docs/devices.md.\n");
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct devinv *, devinv_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct osd_record *, osd_record_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct osd_selection *, osd_selection_free);

static int print_json(json_t *root)
{
	int r = json_dumpf(root, stdout, JSON_INDENT(2));

	fputc('\n', stdout);
	return r;
}

static int do_record(const struct devinv *inv, const struct osd_selection *sel)
{
	json_auto_t *rec = osd_record_from_devinv(inv, sel);

	if (!rec || print_json(rec) < 0) {
		fprintf(stderr, "volagent osd-check: cannot format the record\n");
		return 1;
	}
	if (json_array_size(json_object_get(rec, "osds")) == 0)
		fprintf(stderr, "volagent osd-check: no bluestore OSD found%s\n",
			sel ? " on the selected devices" : "");
	return 0;
}

static int do_check(const struct devinv *inv, const struct osd_selection *sel,
		    const struct osd_record *rec, bool json)
{
	json_auto_t *osds = json_array(), *warnings = json_array(), *root = NULL;
	bool all_ok = true;

	if (!osds || !warnings)
		return 1;
	for (size_t i = 0; i < rec->n_entries; i++) {
		struct osd_check_result res;

		if (osd_check_entry(inv, sel, &rec->entries[i], &res) < 0) {
			fprintf(stderr, "volagent osd-check: out of memory\n");
			return 1;
		}
		if (res.verdict == OSD_NOT_SAFE || res.verdict == OSD_MISSING)
			all_ok = false;
		if (json) {
			json_array_append_new(osds, osd_check_result_to_json(&res));
			if (res.warning)
				json_array_append_new(warnings, json_string(res.warning));
		} else {
			printf("%s\n", res.message);
			if (res.warning)
				fprintf(stderr, "%s\n", res.warning);
		}
		osd_check_result_done(&res);
	}
	if (rec->n_entries == 0)
		fprintf(stderr, "volagent osd-check: the saved record lists no OSD\n");
	if (json) {
		root = json_pack("{s:s, s:{s:s, s:s}, s:b, s:O, s:O}", "record_format", rec->format,
				 "selection", "kind", sel->is_filter ? "device-filter" : "devices",
				 "value", sel->text, "ok", all_ok, "osds", osds, "warnings",
				 warnings);
		if (!root || print_json(root) < 0)
			return 1;
	}
	if (fflush(stdout) != 0)
		return 1;
	return all_ok ? 0 : 1;
}

int cmd_osd_check(int argc, char **argv)
{
	static const struct option opts[] = { { "saved", required_argument, NULL, 's' },
					      { "devices", required_argument, NULL, 'd' },
					      { "device-filter", required_argument, NULL, 'f' },
					      { "json", no_argument, NULL, 'j' },
					      { "record", no_argument, NULL, 'r' },
					      { "help", no_argument, NULL, 'h' },
					      {} };
	_cleanup_(devinv_freep) struct devinv *inv = NULL;
	_cleanup_(osd_record_freep) struct osd_record *rec = NULL;
	_cleanup_(osd_selection_freep) struct osd_selection *sel = NULL;
	const char *saved = NULL, *list = NULL, *filter = NULL;
	struct error_info err = { 0 };
	bool json = false, record = false;
	int c, r;

	while ((c = getopt_long(argc, argv, "s:d:f:jrh", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			saved = optarg;
			break;
		case 'd':
			list = optarg;
			break;
		case 'f':
			filter = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'r':
			record = true;
			break;
		case 'h':
			osd_check_usage(stdout);
			return 0;
		default:
			osd_check_usage(stderr);
			return 2;
		}
	}
	if (optind < argc || (list && filter) || (record && saved) ||
	    (!record && (!saved || (!list && !filter)))) {
		osd_check_usage(stderr);
		return 2;
	}
	if (list)
		r = osd_selection_new_list(list, &sel, &err);
	else if (filter)
		r = osd_selection_new_filter(filter, &sel, &err);
	else
		r = 0;
	if (r == 0 && saved)
		r = osd_record_load(saved, &rec, &err);
	if (r < 0) {
		fprintf(stderr, "volagent osd-check: %s\n", err_msg(&err));
		return 2;
	}
	r = devinv_scan(NULL, 0, &inv, &err);
	if (r < 0) {
		fprintf(stderr, "volagent osd-check: %s\n", err_msg(&err));
		return 1;
	}
	if (sel) {
		r = osd_selection_resolve(sel, inv, &err);
		if (r < 0) {
			fprintf(stderr, "volagent osd-check: %s\n", err_msg(&err));
			return 2;
		}
	}
	if (record)
		return do_record(inv, sel);
	return do_check(inv, sel, rec, json);
}
