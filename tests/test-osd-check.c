/* test-osd-check.c - `volagent osd-check` on a real bluestore OSD made by ceph-osd on a loop
 * device, with renames the kernel really makes (the images are re-attached in another order),
 * and the saved-record parser on malformed records from tests/files/osd-records. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "macro.h"
#include "osd-check.h"
#include "test-devinv-images.h"
#include "test-groups.h"

#define RECORDS "tests/files/osd-records"

static struct {
	char *dir;
	struct img osd, other, blank;
	char rec_own[600], rec_cv[600];
	bool ready;
	char skip_why[200];
	/* Random per run: another run of this test on the host must not make duplicates. */
	char osd_uuid[37], ext4_uuid[37];
} fx;

struct run {
	int status;
	char *out, *err;
};

static struct run osd_check(const char *saved, const char *how, const char *what, bool json)
{
	const char *args[] = { "osd-check", "--saved", saved, how, what, json ? "--json" : NULL,
			       NULL };
	struct run r = { 0 };

	r.status = test_volagent2(args, &r.out, &r.err);
	if (getenv("VERBOSE"))
		fprintf(stderr, "$ volagent osd-check --saved %s %s '%s'%s\n%s%s(exit %d)\n", saved,
			how, what, json ? " --json" : "", r.out, r.err, r.status);
	return r;
}

static void run_done(struct run *r)
{
	free(r->out);
	free(r->err);
}

static char *anchored(const char *name)
{
	return strdup_printf("^%s$", name);
}

#define REQUIRE_OSD()                                                  \
	do {                                                           \
		if (!fx.ready) {                                       \
			fprintf(stderr, "skipped: %s\n", fx.skip_why); \
			skip();                                        \
		}                                                      \
	} while (0)

/* ---- records, no devices needed ---- */

static const struct {
	const char *file, *message;
} malformed[] = {
	{ "not-json.json", "not-json.json:2:0: not JSON" },
	{ "empty.json", "empty.json:1:0: not JSON" },
	{ "duplicate-key.json", "not JSON: duplicate object key" },
	{ "top-array.json", "the record must be a JSON object" },
	{ "cv-missing-osd-id.json",
	  "entry \"5e7a1c9d-3b2f-4e8a-9c6d-0f1e2d3c4b5a\": field \"osd_id\": missing" },
	{ "cv-bad-uuid.json", "entry \"not-a-uuid\": field \"osd_uuid\": not a uuid" },
	{ "cv-key-mismatch.json", "entry \"0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d\": field "
				  "\"osd_uuid\": the entry's key is neither" },
	{ "cv-not-bluestore.json", "field \"type\": only bluestore OSDs can be checked" },
	{ "cv-device-number.json", "field \"device\": not a string" },
	{ "va-bad-version.json", "record: field \"volagent_osd_record\": must be 1 or 2" },
	{ "va1-hw-id.json", "osds[0]: field \"hw_id\": only in records of version 2" },
	{ "va2-bad-hw-kind.json", "osds[0]: field \"hw_id_kind\": not one of wwn, serial" },
	{ "va2-hw-id-missing.json", "osds[0]: field \"hw_id\": missing" },
	{ "va2-hw-id-space.json", "osds[0]: field \"hw_id\": not a by-id name" },
	{ "va-osds-not-array.json", "record: field \"osds\": not an array" },
	{ "va-entry-not-object.json", "osds[0]: not an object" },
	{ "va-osd-id-string.json", "osds[0]: field \"osd_id\": not an integer" },
	{ "va-osd-id-negative.json", "osds[0]: field \"osd_id\": out of range" },
	{ "va-bad-kind.json", "osds[1]: field \"id_kind\": not one of" },
	{ "va-bad-device.json", "osds[0]: field \"device\": not a device name" },
	{ "va-missing-value.json", "osds[0]: field \"id_value\": missing" },
	{ "va-bluestore-not-uuid.json", "osds[0]: field \"id_value\": not an OSD uuid" },
	{ "va-duplicate-osd.json", "osds[1]: field \"osd_id\": osd.3 is also in osds[0]" },
};

static void test_malformed_records(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(malformed); i++) {
		_cleanup_free_ char *path = strdup_printf(RECORDS "/%s", malformed[i].file);
		struct run r = osd_check(path, "--devices", "sdb", false);

		if (r.status != 2 || !strstr(r.err, malformed[i].message))
			fail_msg("%s: exit %d, stderr: %s (wanted exit 2 and \"%s\")",
				 malformed[i].file, r.status, r.err, malformed[i].message);
		/* Nothing is checked from a record that is wrong anywhere. */
		assert_string_equal(r.out, "");
		run_done(&r);
	}
}

static void test_valid_records_parse(void **state)
{
	struct osd_record *rec = NULL;
	struct error_info err = { 0 };

	assert_int_equal(osd_record_load(RECORDS "/ceph-volume-valid.json", &rec, &err), 0);
	assert_string_equal(rec->format, "ceph-volume");
	assert_int_equal(rec->n_entries, 2);
	assert_int_equal(rec->entries[0].osd_id, 3);
	assert_string_equal(rec->entries[0].device, "/dev/sdb");
	assert_int_equal(rec->entries[0].kind, DEVINV_ID_BLUESTORE);
	assert_string_equal(rec->entries[0].value, "5e7a1c9d-3b2f-4e8a-9c6d-0f1e2d3c4b5a");
	rec = osd_record_free(rec);

	assert_int_equal(osd_record_load(RECORDS "/volagent-valid.json", &rec, &err), 0);
	assert_string_equal(rec->format, "volagent");
	assert_int_equal(rec->n_entries, 3);
	assert_int_equal(rec->entries[1].kind, DEVINV_ID_PARTUUID);
	assert_string_equal(rec->entries[1].device, "/dev/nvme0n1p2");
	assert_int_equal(rec->entries[2].kind, DEVINV_ID_WWN);
	assert_null(rec->entries[0].hw_value);
	rec = osd_record_free(rec);

	/* Version 2: the hardware id beside the identity, optional (null or absent). */
	assert_int_equal(osd_record_load(RECORDS "/volagent-v2-valid.json", &rec, &err), 0);
	assert_int_equal(rec->n_entries, 4);
	assert_int_equal(rec->entries[0].hw_kind, DEVINV_ID_SERIAL);
	assert_string_equal(rec->entries[0].hw_value, "virtio-OSDSER1");
	assert_int_equal(rec->entries[1].hw_kind, DEVINV_ID_WWN);
	assert_string_equal(rec->entries[1].hw_value, "wwn-0x5000c500a1b2c3d4");
	assert_null(rec->entries[2].hw_value);
	assert_null(rec->entries[3].hw_value);
	assert_int_equal(rec->entries[3].kind, DEVINV_ID_SERIAL);
	rec = osd_record_free(rec);

	assert_int_equal(osd_record_load(RECORDS "/no-such-file.json", &rec, &err), -ENOENT);
	assert_null(rec);
}

static void test_bad_arguments(void **state)
{
	const char *valid = RECORDS "/volagent-valid.json";
	const char *both[] = { "osd-check", "--saved",	       valid, "--devices",
			       "sda",	    "--device-filter", "sd",  NULL };
	const char *neither[] = { "osd-check", "--saved", valid, NULL };
	const char *no_saved[] = { "osd-check", "--devices", "sda", NULL };
	char *err = NULL;
	struct run r;

	assert_int_equal(test_volagent2(both, NULL, NULL), 2);
	assert_int_equal(test_volagent2(neither, NULL, NULL), 2);
	assert_int_equal(test_volagent2(no_saved, NULL, NULL), 2);
	r = osd_check(valid, "--device-filter", "sd[a-", false);
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "--device-filter \"sd[a-\""));
	run_done(&r);
	r = osd_check(valid, "--devices", "sda,,sdb", false);
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "empty entry"));
	run_done(&r);
	r = osd_check(RECORDS "/no-such-file.json", "--devices", "sda", false);
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "no-such-file.json: No such file or directory"));
	run_done(&r);
	free(err);
}

/* The selection alone: lists by name or /dev path, filters unanchored as Rook's are. */
static void test_selection(void **state)
{
	struct osd_selection *sel = NULL;
	struct error_info err = { 0 };

	assert_int_equal(osd_selection_new_list("sda,/dev/nvme0n1", &sel, &err), 0);
	assert_true(osd_selection_selects(sel, "sda"));
	assert_true(osd_selection_selects(sel, "/dev/sda"));
	assert_true(osd_selection_selects(sel, "nvme0n1"));
	assert_false(osd_selection_selects(sel, "sdb"));
	assert_false(osd_selection_selects(sel, "sda1"));
	sel = osd_selection_free(sel);
	assert_int_equal(osd_selection_new_filter("sd[ab]", &sel, &err), 0);
	assert_true(osd_selection_selects(sel, "sda"));
	assert_true(osd_selection_selects(sel, "sdb1"));
	assert_false(osd_selection_selects(sel, "sdc"));
	sel = osd_selection_free(sel);
	assert_int_equal(osd_selection_new_filter("", &sel, &err), -EINVAL);
	assert_int_equal(osd_selection_new_list(",", &sel, &err), -EINVAL);
}

/* By-id names in the list resolve through the inventory; one that fits no device is refused
 * by name, and a plain word that is neither a kernel name nor a by-id name stays as it was
 * (the list may name a disk that is not attached now).  The VM test (tests/vm/test-device-ids.sh)
 * resolves real by-id names of virtio, NVMe, SCSI and SATA disks, and a shared serial. */
static void test_selection_by_id(void **state)
{
	struct osd_selection *sel = NULL;
	struct devinv *inv = NULL;
	struct error_info err = { 0 };

	assert_int_equal(devinv_scan(NULL, 0, &inv, &err), 0);
	assert_int_equal(osd_selection_new_list("volagent-test-no-such-disk,sdzz", &sel, &err), 0);
	assert_int_equal(osd_selection_resolve(sel, inv, &err), 0);
	assert_true(osd_selection_selects(sel, "volagent-test-no-such-disk"));
	assert_true(osd_selection_selects(sel, "sdzz"));
	sel = osd_selection_free(sel);
	assert_int_equal(osd_selection_new_list("sda,/dev/disk/by-id/virtio-volagent-no-such", &sel,
						&err),
			 0);
	assert_int_equal(osd_selection_resolve(sel, inv, &err), -ENOENT);
	assert_non_null(strstr(err_msg(&err), "\"/dev/disk/by-id/virtio-volagent-no-such\": no "
					      "device of this node has that by-id name"));
	sel = osd_selection_free(sel);
	/* A disk of this machine with a by-id name (a virtio disk with a serial, say) resolves. */
	for (size_t i = 0; i < inv->n_devices; i++) {
		const struct devinv_device *d = inv->devices[i];
		const struct devinv_device *found;
		_cleanup_free_ char *link = NULL;

		if (!d->by_id || d->duplicate_id ||
		    devinv_find_by_id(inv, d->by_id[0], &found) != 1)
			continue;
		link = strdup_printf("/dev/disk/by-id/%s", d->by_id[0]);
		assert_int_equal(osd_selection_new_list(link, &sel, &err), 0);
		assert_int_equal(osd_selection_resolve(sel, inv, &err), 0);
		assert_true(osd_selection_selects(sel, d->name));
		sel = osd_selection_free(sel);
		assert_ptr_equal(devinv_find(inv, d->by_id[0]), d);
		break;
	}
	devinv_free(inv);
}

/* ---- a real OSD ---- */

static int save_records(void)
{
	const char *rec_args[] = { "osd-check", "--record", "--devices", img_name(&fx.osd), NULL };
	const char *cv_args[] = {
		"ceph-volume", "raw", "list", fx.osd.dev, "--format", "json", NULL
	};
	char *out = NULL, *err = NULL;
	int r;

	r = test_volagent2(rec_args, &out, &err);
	if (r != 0 || !strstr(out, fx.osd_uuid))
		fprintf(stderr, "setup: volagent osd-check --record: exit %d: %s%s\n", r, out, err);
	else
		r = test_write_file(fx.rec_own, out);
	free(out);
	free(err);
	if (r != 0)
		return -1;
	r = test_run_capture2(cv_args, &out, &err);
	if (r != 0 || !strstr(out, fx.osd_uuid))
		fprintf(stderr, "setup: ceph-volume raw list: exit %d: %s%s\n", r, out, err);
	else
		r = test_write_file(fx.rec_cv, out);
	free(out);
	free(err);
	return r == 0 ? 0 : -1;
}

static int group_setup(void **state)
{
	fx.dir = test_mkdtemp("osdcheck");
	snprintf(fx.rec_own, sizeof(fx.rec_own), "%s/record-volagent.json", fx.dir);
	snprintf(fx.rec_cv, sizeof(fx.rec_cv), "%s/record-ceph-volume.json", fx.dir);
	img_random_uuid(fx.osd_uuid);
	img_random_uuid(fx.ext4_uuid);
	if (!img_have_ceph_osd()) {
		snprintf(fx.skip_why, sizeof(fx.skip_why),
			 "ceph-osd is not installed (Debian package ceph-osd)");
		return 0;
	}
	if (img_make(&fx.osd, fx.dir, "osd.img", BLUESTORE_IMG_SIZE) < 0 ||
	    img_attach(&fx.osd, false) < 0 ||
	    img_bluestore_uuid(&fx.osd, fx.dir, fx.osd_uuid) != 0) {
		snprintf(fx.skip_why, sizeof(fx.skip_why), "ceph-osd --mkfs failed");
		return -1;
	}
	if (img_make(&fx.other, fx.dir, "other.img", IMG_SIZE) < 0 ||
	    img_ext4_uuid(&fx.other, fx.ext4_uuid) != 0 || img_attach(&fx.other, false) < 0)
		return -1;
	if (img_make(&fx.blank, fx.dir, "blank.img", IMG_SIZE) < 0 ||
	    img_attach(&fx.blank, false) < 0)
		return -1;
	if (save_records() != 0)
		return -1;
	fx.ready = true;
	return 0;
}

static int group_teardown(void **state)
{
	return test_cleanup_loops_and_dir(fx.dir);
}

static void test_record_written(void **state)
{
	char *text;
	json_t *rec, *e;

	REQUIRE_OSD();
	text = test_read_file(fx.rec_own);
	rec = json_loads(text, 0, NULL);
	assert_non_null(rec);
	assert_int_equal(json_integer_value(json_object_get(rec, "volagent_osd_record")), 2);
	assert_int_equal(json_array_size(json_object_get(rec, "osds")), 1);
	e = json_array_get(json_object_get(rec, "osds"), 0);
	assert_int_equal(json_integer_value(json_object_get(e, "osd_id")), 7);
	assert_string_equal(json_string_value(json_object_get(e, "device")), img_name(&fx.osd));
	assert_string_equal(json_string_value(json_object_get(e, "id_kind")), "bluestore");
	assert_string_equal(json_string_value(json_object_get(e, "id_value")), fx.osd_uuid);
	/* A loop device has no hardware id: none is written (the VM test has one). */
	assert_null(json_object_get(e, "hw_id"));
	json_decref(rec);
	free(text);
}

static void test_keep_unchanged(void **state)
{
	const char *recs[] = { fx.rec_own, fx.rec_cv };

	REQUIRE_OSD();
	for (size_t i = 0; i < ARRAY_SIZE(recs); i++) {
		struct run r = osd_check(recs[i], "--devices", img_name(&fx.osd), false);
		_cleanup_free_ char *want = strdup_printf("osd.7: KEEP: on %s with bluestore osd "
							  "uuid %s (osd.7); the device list "
							  "selects %s\n",
							  img_name(&fx.osd), fx.osd_uuid,
							  img_name(&fx.osd));

		assert_int_equal(r.status, 0);
		assert_string_equal(r.out, want);
		assert_string_equal(r.err, "");
		run_done(&r);
	}
}

/* Seed scenario SAFE: the user changed the filter, the device kept its name. */
static void test_user_changed_filter_name_unchanged_safe_to_remove(void **state)
{
	const char *recs[] = { fx.rec_own, fx.rec_cv };
	_cleanup_free_ char *filter = NULL;

	REQUIRE_OSD();
	filter = anchored(img_name(&fx.other));
	for (size_t i = 0; i < ARRAY_SIZE(recs); i++) {
		struct run r = osd_check(recs[i], "--device-filter", filter, false);
		_cleanup_free_ char *want = strdup_printf(
			"osd.7: SAFE_TO_REMOVE: still on %s with bluestore osd uuid %s (osd.7), "
			"and the device filter no longer selects %s\n",
			img_name(&fx.osd), fx.osd_uuid, img_name(&fx.osd));

		assert_int_equal(r.status, 0);
		assert_string_equal(r.out, want);
		/* The old name still holds the OSD: nothing foreign is selected. */
		assert_string_equal(r.err, "");
		run_done(&r);
	}
}

/* What the saved name holds now, as the check must say it, computed from what the swap
 * really did (another test may have taken a loop number in between). */
static char *expected_holds(const char *saved_name)
{
	if (streq(img_name(&fx.other), saved_name))
		return strdup_printf("%s now holds a different device (ext4 uuid %s)", saved_name,
				     fx.ext4_uuid);
	if (streq(img_name(&fx.blank), saved_name))
		return strdup_printf("%s now holds a blank device (no identity found)", saved_name);
	return strdup_printf("%s now holds", saved_name);
}

/* Seed scenario NOT SAFE: the device was renamed and the filter was not changed. */
static void test_device_renamed_filter_unchanged_not_safe(void **state)
{
	const char *recs[] = { fx.rec_own, fx.rec_cv };
	char saved[32];
	_cleanup_free_ char *filter = NULL, *holds = NULL, *now_on = NULL;

	REQUIRE_OSD();
	snprintf(saved, sizeof(saved), "%s", img_name(&fx.osd));
	if (!img_swap(&fx.osd, &fx.other, false, fx.dir))
		fprintf(stderr, "note: the names did not swap exactly; checking what happened\n");
	assert_string_not_equal(img_name(&fx.osd), saved);
	fprintf(stderr, "renamed: OSD image %s -> %s, ext4 image now %s\n", saved,
		img_name(&fx.osd), img_name(&fx.other));

	filter = anchored(saved);
	holds = expected_holds(saved);
	now_on = strdup_printf("osd.7: NOT_SAFE: saved on %s with bluestore osd uuid %s (osd.7), "
			       "now on %s; ",
			       saved, fx.osd_uuid, img_name(&fx.osd));
	for (size_t i = 0; i < ARRAY_SIZE(recs); i++) {
		struct run r = osd_check(recs[i], "--device-filter", filter, false);
		_cleanup_free_ char *tail = strdup_printf(
			"; the device filter does not select %s, and deciding by name would "
			"destroy this OSD\n",
			img_name(&fx.osd));

		assert_int_equal(r.status, 1);
		assert_true(startswith(r.out, now_on));
		assert_non_null(strstr(r.out, holds));
		assert_true(endswith(r.out, tail));
		/* The filter would hand what now sits under the old name to Ceph. */
		if (streq(img_name(&fx.other), saved))
			assert_non_null(strstr(r.err, "warning: the device filter selects"));
		run_done(&r);
	}
}

/* The name the OSD had when the record was saved. */
static void record_device(char *buf, size_t len)
{
	json_t *root = json_load_file(fx.rec_own, 0, NULL);

	assert_non_null(root);
	snprintf(buf, len, "%s",
		 json_string_value(json_object_get(json_array_get(json_object_get(root, "osds"), 0),
						   "device")));
	json_decref(root);
}

/* The same state through --json: what a program reads. */
static void test_not_safe_json(void **state)
{
	json_t *root, *o;
	char saved[32];
	struct run r;
	_cleanup_free_ char *filter = NULL;

	REQUIRE_OSD();
	/* After the rename above, the record's name is no longer where the OSD is. */
	record_device(saved, sizeof(saved));
	assert_string_not_equal(saved, img_name(&fx.osd));

	filter = anchored(saved);
	r = osd_check(fx.rec_own, "--device-filter", filter, true);
	assert_int_equal(r.status, 1);
	root = json_loads(r.out, 0, NULL);
	assert_non_null(root);
	assert_true(json_is_false(json_object_get(root, "ok")));
	assert_string_equal(json_string_value(json_object_get(root, "record_format")), "volagent");
	o = json_array_get(json_object_get(root, "osds"), 0);
	assert_int_equal(json_integer_value(json_object_get(o, "osd_id")), 7);
	assert_string_equal(json_string_value(json_object_get(o, "status")), "NOT_SAFE");
	assert_string_equal(json_string_value(json_object_get(o, "saved_device")), saved);
	assert_string_equal(json_string_value(json_object_get(o, "now_on")), img_name(&fx.osd));
	assert_int_equal(json_integer_value(json_object_get(o, "found_on_devices")), 1);
	assert_true(json_is_false(json_object_get(o, "selected")));
	if (streq(img_name(&fx.other), saved)) {
		json_t *held = json_object_get(o, "saved_device_now");
		_cleanup_free_ char *id = strdup_printf("fs-uuid:%s", fx.ext4_uuid);
		assert_string_equal(json_string_value(json_object_get(held, "stable-id")), id);
		assert_true(json_is_true(json_object_get(o, "foreign_disk_selected")));
		assert_int_equal(json_array_size(json_object_get(root, "warnings")), 1);
	}
	json_decref(root);
	run_done(&r);
}

/* Renamed, and the user's list follows the new name: the OSD stays. */
static void test_keep_after_rename(void **state)
{
	const char *recs[] = { fx.rec_own, fx.rec_cv };

	REQUIRE_OSD();
	for (size_t i = 0; i < ARRAY_SIZE(recs); i++) {
		struct run r = osd_check(recs[i], "--devices", img_name(&fx.osd), false);
		_cleanup_free_ char *want = strdup_printf(", now on %s, which the device list "
							  "selects; ",
							  img_name(&fx.osd));

		assert_int_equal(r.status, 0);
		assert_true(startswith(r.out, "osd.7: KEEP: saved on "));
		assert_non_null(strstr(r.out, want));
		assert_string_equal(r.err, "");
		run_done(&r);
	}
}

/* The OSD's old name now holds a blank device. */
static void test_blank_device_under_saved_name(void **state)
{
	_cleanup_free_ char *filter = NULL, *want = NULL;
	char saved[32];
	struct run r;

	REQUIRE_OSD();
	/* Put the blank image under the name the record has for the OSD. */
	record_device(saved, sizeof(saved));
	if (!streq(img_name(&fx.other), saved) || !img_swap(&fx.other, &fx.blank, false, fx.dir) ||
	    !streq(img_name(&fx.blank), saved)) {
		fprintf(stderr, "skipped: could not put the blank image under %s\n", saved);
		skip();
	}
	filter = anchored(saved);
	r = osd_check(fx.rec_cv, "--device-filter", filter, false);
	want = strdup_printf("; %s now holds a blank device (no identity found); ", saved);
	assert_int_equal(r.status, 1);
	assert_true(startswith(r.out, "osd.7: NOT_SAFE: "));
	assert_non_null(strstr(r.out, want));
	assert_non_null(strstr(r.err, "now holds a blank device"));
	run_done(&r);
}

/* The OSD's disk is gone from the node. */
static void test_missing(void **state)
{
	const char *recs[] = { fx.rec_own, fx.rec_cv };
	char saved[32];

	REQUIRE_OSD();
	record_device(saved, sizeof(saved));
	img_detach(&fx.osd);
	for (size_t i = 0; i < ARRAY_SIZE(recs); i++) {
		struct run r = osd_check(recs[i], "--devices", saved, false);
		_cleanup_free_ char *want = strdup_printf(
			"osd.7: MISSING: saved on %s with bluestore osd uuid %s, which is on no "
			"device of this node; %s now holds",
			saved, fx.osd_uuid, saved);

		assert_int_equal(r.status, 1);
		assert_true(startswith(r.out, want));
		run_done(&r);
	}
	assert_int_equal(img_attach(&fx.osd, false), 0);
}

int main(void)
{
	const struct CMUnitTest records[] = {
		cmocka_unit_test(test_malformed_records),
		cmocka_unit_test(test_valid_records_parse),
		cmocka_unit_test(test_bad_arguments),
		cmocka_unit_test(test_selection),
		cmocka_unit_test(test_selection_by_id),
	};
	/* In this order: each step starts from the names the one before left. */
	const struct CMUnitTest osd[] = {
		cmocka_unit_test(test_record_written),
		cmocka_unit_test(test_keep_unchanged),
		cmocka_unit_test(test_user_changed_filter_name_unchanged_safe_to_remove),
		cmocka_unit_test(test_device_renamed_filter_unchanged_not_safe),
		cmocka_unit_test(test_not_safe_json),
		cmocka_unit_test(test_keep_after_rename),
		cmocka_unit_test(test_blank_device_under_saved_name),
		cmocka_unit_test(test_missing),
	};
	const struct test_group groups[] = {
		TEST_GROUP("saved records", records, NULL, NULL),
		TEST_GROUP("a bluestore OSD on loop devices", osd, group_setup, group_teardown),
	};

	return test_run_groups(groups, ARRAY_SIZE(groups));
}
