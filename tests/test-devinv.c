/* test-devinv.c - the device inventory and `volagent devices` on real loop devices: ext4, xfs,
 * a GPT with partitions, a bluestore OSD made by ceph-osd, and a blank device.  The JSON of
 * each image is compared with a golden file, after leaving out what changes from run to run
 * or host to host (kernel names, numbers, backing paths, udev links, rotational). */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "bluestore-label.h"
#include "devinv.h"
#include "macro.h"
#include "test-devinv-images.h"
#include "test-groups.h"

#define GOLDEN_DIR "tests/expected/devices"

static struct {
	char *dir;
	struct img ext4, xfs, gpt, blank, bluestore;
	bool have_bluestore;
	char bluestore_skip[200];
} fx;

/* ---- the bluestore label parser, on labels built here ---- */

struct label_buf {
	unsigned char b[BLUESTORE_LABEL_SIZE];
	size_t len;
};

static void put(struct label_buf *l, const void *p, size_t n)
{
	assert_true(l->len + n <= sizeof(l->b));
	memcpy(l->b + l->len, p, n);
	l->len += n;
}

static void put_le(struct label_buf *l, uint64_t v, size_t width)
{
	for (size_t i = 0; i < width; i++) {
		unsigned char c = (unsigned char)(v >> (8 * i));
		put(l, &c, 1);
	}
}

static void put_str(struct label_buf *l, const char *s)
{
	put_le(l, strlen(s), 4);
	put(l, s, strlen(s));
}

/* A label the way Ceph writes it (struct v2), with description and the meta map given. */
static void build_label(struct label_buf *l, const char *uuid, const char *desc,
			const char *const *meta)
{
	size_t len_at, start, n_meta = 0;
	uint8_t v = 2, compat = 1;

	memset(l, 0, sizeof(*l));
	put(l, "bluestore block device\n", 23);
	put(l, uuid, strlen(uuid));
	put(l, "\n", 1);
	put(l, &v, 1);
	put(l, &compat, 1);
	len_at = l->len;
	put_le(l, 0, 4);
	start = l->len;
	put(l, "0123456789abcdef", 16);
	put_le(l, 1ULL << 30, 8);
	put_le(l, 0, 8);
	put_str(l, desc);
	while (meta[n_meta])
		n_meta++;
	put_le(l, n_meta / 2, 4);
	for (size_t i = 0; i < n_meta; i++)
		put_str(l, meta[i]);
	for (size_t i = 0; i < 4; i++)
		l->b[len_at + i] = (unsigned char)((l->len - start) >> (8 * i));
}

static void test_label_parse(void **state)
{
	const char *meta[] = {
		"bfm_size", "1073741824", "ceph_fsid", OSD_FSID, "whoami", "12", NULL
	};
	struct label_buf l;
	struct bluestore_label bl;

	build_label(&l, OSD_UUID, "main", meta);
	assert_int_equal(bluestore_label_parse(l.b, l.len, &bl), 0);
	assert_string_equal(bl.osd_uuid, OSD_UUID);
	assert_string_equal(bl.ceph_fsid, OSD_FSID);
	assert_int_equal(bl.osd_id, 12);
	assert_string_equal(bl.description, "main");
	assert_true(bl.size == 1ULL << 30);

	/* Every truncation either fails cleanly or keeps the uuid and loses only the tail. */
	for (size_t n = 0; n < l.len; n++) {
		struct bluestore_label t;
		int r = bluestore_label_parse(l.b, n, &t);

		if (n < 23 + 36 + 1) {
			assert_int_equal(r, -EINVAL);
			continue;
		}
		assert_int_equal(r, 0);
		assert_string_equal(t.osd_uuid, OSD_UUID);
		/* The encoded length says more than n holds: nothing of it is trusted. */
		assert_int_equal(t.osd_id, -1);
	}
}

static void test_label_malformed(void **state)
{
	const char *meta[] = { "whoami", "3", NULL };
	struct label_buf l;
	struct bluestore_label bl;

	/* Not a label at all. */
	memset(&l, 0, sizeof(l));
	assert_int_equal(bluestore_label_parse(l.b, sizeof(l.b), &bl), -EINVAL);
	/* A uuid that is not one. */
	build_label(&l, "5e7a1c9d-3b2f-4e8a-9c6d-0f1e2d3c4bZZ", "main", meta);
	assert_int_equal(bluestore_label_parse(l.b, l.len, &bl), -EINVAL);
	/* A description length far past the end: uuid kept, the rest ignored. */
	build_label(&l, OSD_UUID, "main", meta);
	memset(l.b + 60 + 6 + 32, 0xff, 4);
	assert_int_equal(bluestore_label_parse(l.b, l.len, &bl), 0);
	assert_string_equal(bl.osd_uuid, OSD_UUID);
	assert_int_equal(bl.osd_id, -1);
	assert_string_equal(bl.description, "");
	/* A meta count past any sane bound. */
	build_label(&l, OSD_UUID, "main", meta);
	memset(l.b + 60 + 6 + 32 + 4 + 4, 0x7f, 4);
	assert_int_equal(bluestore_label_parse(l.b, l.len, &bl), 0);
	assert_int_equal(bl.osd_id, -1);
	assert_string_equal(bl.description, "main");
	/* whoami that is not a number. */
	{
		const char *bad[] = { "whoami", "7x", NULL };
		build_label(&l, OSD_UUID, "bluefs db", bad);
		assert_int_equal(bluestore_label_parse(l.b, l.len, &bl), 0);
		assert_int_equal(bl.osd_id, -1);
		assert_string_equal(bl.description, "bluefs db");
	}
}

/* ---- real images ---- */

/* Says which step of a setup failed, since cmocka only reports "GROUP SETUP". */
#define SETUP_STEP(what, expr)                                       \
	do {                                                         \
		if ((expr) != 0) {                                   \
			fprintf(stderr, "setup: %s failed\n", what); \
			return -1;                                   \
		}                                                    \
	} while (0)

static int group_setup(void **state)
{
	fx.dir = test_mkdtemp("devinv");
	SETUP_STEP("ext4 image", img_make(&fx.ext4, fx.dir, "ext4.img", IMG_SIZE));
	SETUP_STEP("mkfs.ext4", img_ext4(&fx.ext4));
	SETUP_STEP("attach ext4", img_attach(&fx.ext4, false));
	SETUP_STEP("xfs image", img_make(&fx.xfs, fx.dir, "xfs.img", XFS_IMG_SIZE));
	SETUP_STEP("mkfs.xfs", img_xfs(&fx.xfs));
	SETUP_STEP("attach xfs", img_attach(&fx.xfs, false));
	SETUP_STEP("gpt image", img_make(&fx.gpt, fx.dir, "gpt.img", IMG_SIZE));
	SETUP_STEP("sfdisk", img_gpt_table(&fx.gpt));
	SETUP_STEP("attach gpt with partitions", img_attach(&fx.gpt, true));
	SETUP_STEP("mkfs.ext4 on partition 1", img_gpt_fs(&fx.gpt));
	SETUP_STEP("blank image", img_make(&fx.blank, fx.dir, "blank.img", IMG_SIZE));
	SETUP_STEP("attach blank", img_attach(&fx.blank, false));
	if (!img_have_ceph_osd()) {
		snprintf(fx.bluestore_skip, sizeof(fx.bluestore_skip),
			 "ceph-osd is not installed (Debian package ceph-osd)");
	} else if (img_make(&fx.bluestore, fx.dir, "bluestore.img", BLUESTORE_IMG_SIZE) < 0 ||
		   img_attach(&fx.bluestore, false) < 0 ||
		   img_bluestore(&fx.bluestore, fx.dir) != 0) {
		snprintf(fx.bluestore_skip, sizeof(fx.bluestore_skip),
			 "ceph-osd --mkfs failed on %s", fx.bluestore.dev);
	} else {
		fx.have_bluestore = true;
	}
	return 0;
}

static int group_teardown(void **state)
{
	return test_cleanup_loops_and_dir(fx.dir);
}

static json_t *devices_json(const char *const *extra)
{
	const char *args[16] = { "devices", "--json" };
	char *out = NULL;
	json_error_t jerr;
	json_t *root;
	size_t n = 2;

	for (size_t i = 0; extra && extra[i]; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	assert_int_equal(test_volagent(args, &out), 0);
	root = json_loads(out, 0, &jerr);
	if (!root)
		fail_msg("devices --json is not JSON: %s: %s", jerr.text, out);
	free(out);
	return root;
}

/* The top-level device backed by file, or NULL. */
static json_t *find_backed(json_t *root, const char *file)
{
	json_t *list = json_object_get(root, "blockdevices"), *d;
	char real[PATH_MAX];
	size_t i;

	if (!realpath(file, real))
		return NULL;
	json_array_foreach(list, i, d)
	{
		const char *b = json_string_value(json_object_get(d, "back-file"));
		if (b && streq(b, real))
			return d;
	}
	return NULL;
}

static const char *jstr(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* The device without what is not a property of the image: names, numbers, paths, udev's links
 * and state, rotational (follows where the backing file lives), and whether another device on
 * the host has the same id (another run of this test may). */
static json_t *project(json_t *d)
{
	static const char *const drop[] = {
		"name", "path", "maj:min", "back-file",	  "links",
		"udev", "rota", "holders", "mountpoints", "duplicate-id"
	};
	json_t *p = json_deep_copy(d), *children, *c;
	size_t i;

	for (size_t k = 0; k < ARRAY_SIZE(drop); k++)
		json_object_del(p, drop[k]);
	children = json_object_get(p, "children");
	json_array_foreach(children, i, c)
	{
		for (size_t k = 0; k < ARRAY_SIZE(drop); k++)
			json_object_del(c, drop[k]);
	}
	return p;
}

static void check_golden(json_t *root, const struct img *im, const char *golden)
{
	char path[256];
	json_t *d = find_backed(root, im->file), *p;
	char *got, *want;

	assert_non_null(d);
	p = project(d);
	got = json_dumps(p, JSON_INDENT(2) | JSON_SORT_KEYS);
	snprintf(path, sizeof(path), GOLDEN_DIR "/%s", golden);
	if (getenv("VOLAGENT_UPDATE_GOLDEN")) {
		char *text = strdup_printf("%s\n", got);
		assert_int_equal(test_write_file(path, text), 0);
		free(text);
	}
	want = test_read_file(path);
	if (!want)
		fail_msg("missing golden file %s; VOLAGENT_UPDATE_GOLDEN=1 writes it", path);
	if (strncmp(got, want, strlen(got)) != 0 || strlen(want) != strlen(got) + 1)
		fail_msg("%s differs from the device; got:\n%s\nwant:\n%s", path, got, want);
	free(got);
	free(want);
	json_decref(p);
}

static void test_golden_images(void **state)
{
	json_t *root = devices_json(NULL);

	check_golden(root, &fx.ext4, "ext4.json");
	check_golden(root, &fx.xfs, "xfs.json");
	check_golden(root, &fx.gpt, "gpt.json");
	check_golden(root, &fx.blank, "blank.json");
	if (fx.have_bluestore)
		check_golden(root, &fx.bluestore, "bluestore.json");
	json_decref(root);
	if (!fx.have_bluestore) {
		fprintf(stderr, "bluestore golden skipped: %s\n", fx.bluestore_skip);
		skip();
	}
}

static void test_stable_ids(void **state)
{
	json_t *root = devices_json(NULL), *d, *parts;

	d = find_backed(root, fx.ext4.file);
	assert_string_equal(jstr(d, "stable-id"), "fs-uuid:" EXT4_UUID);
	assert_string_equal(jstr(d, "id-kind"), "fs-uuid");
	assert_string_equal(jstr(d, "name"), img_name(&fx.ext4));
	assert_string_equal(jstr(d, "type"), "loop");
	assert_true(json_is_null(json_object_get(d, "wwn")));
	assert_true(json_is_null(json_object_get(d, "serial")));

	d = find_backed(root, fx.xfs.file);
	assert_string_equal(jstr(d, "fstype"), "xfs");
	assert_string_equal(jstr(d, "label"), "va-xfs");
	assert_string_equal(jstr(d, "stable-id"), "fs-uuid:" XFS_UUID);

	d = find_backed(root, fx.gpt.file);
	assert_string_equal(jstr(d, "pttype"), "gpt");
	assert_string_equal(jstr(d, "stable-id"), "ptuuid:3c0f7b52-6e1a-4d2b-9f84-0a1b2c3d4e5f");
	parts = json_object_get(d, "children");
	assert_int_equal(json_array_size(parts), 2);
	/* A partition is named by its entry, not by the filesystem in it. */
	assert_string_equal(jstr(json_array_get(parts, 0), "stable-id"),
			    "partuuid:a1b2c3d4-1111-4222-8333-444455556666");
	assert_string_equal(jstr(json_array_get(parts, 0), "uuid"), GPT_P1_FS_UUID);
	assert_string_equal(jstr(json_array_get(parts, 0), "type"), "part");
	assert_string_equal(jstr(json_array_get(parts, 1), "stable-id"),
			    "partuuid:b1b2c3d4-7777-4888-9999-aaaabbbbcccc");
	assert_true(json_is_null(json_object_get(json_array_get(parts, 1), "fstype")));

	d = find_backed(root, fx.blank.file);
	assert_true(json_is_null(json_object_get(d, "stable-id")));
	assert_string_equal(jstr(d, "id-kind"), "none");
	assert_true(json_is_null(json_object_get(d, "fstype")));
	assert_true(json_is_null(json_object_get(d, "probe-error")));
	json_decref(root);
}

static void test_bluestore_matches_ceph_volume(void **state)
{
	json_t *root, *d, *bs, *cv, *entry;
	char *out = NULL;

	if (!fx.have_bluestore) {
		fprintf(stderr, "skipped: %s\n", fx.bluestore_skip);
		skip();
	}
	root = devices_json(NULL);
	d = find_backed(root, fx.bluestore.file);
	assert_non_null(d);
	/* libblkid knows the type and no uuid; the uuid comes from the label. */
	assert_string_equal(jstr(d, "fstype"), "ceph_bluestore");
	assert_true(json_is_null(json_object_get(d, "uuid")));
	assert_string_equal(jstr(d, "stable-id"), "bluestore:" OSD_UUID);
	bs = json_object_get(d, "bluestore");
	assert_string_equal(jstr(bs, "osd-uuid"), OSD_UUID);
	assert_int_equal(json_integer_value(json_object_get(bs, "osd-id")), 7);
	assert_string_equal(jstr(bs, "ceph-fsid"), OSD_FSID);

	/* ceph-volume reads the same label and must agree. */
	assert_int_equal(test_run_capture((const char *const[]){ "ceph-volume", "raw", "list",
								 fx.bluestore.dev, "--format",
								 "json", NULL },
					  &out),
			 0);
	cv = json_loads(out, 0, NULL);
	assert_non_null(cv);
	entry = json_object_get(cv, OSD_UUID);
	assert_non_null(entry);
	assert_int_equal(json_integer_value(json_object_get(entry, "osd_id")), 7);
	assert_string_equal(jstr(entry, "device"), fx.bluestore.dev);
	json_decref(cv);
	json_decref(root);
	free(out);
}

static void test_table(void **state)
{
	const char *args[] = { "devices", NULL };
	char *out = NULL, *line, want[128];

	assert_int_equal(test_volagent(args, &out), 0);
	assert_true(startswith(out, "NAME "));
	line = strstr(out, img_name(&fx.ext4));
	assert_non_null(line);
	assert_non_null(strstr(line, "fs-uuid:" EXT4_UUID));
	/* Partitions are drawn under their disk. */
	snprintf(want, sizeof(want), "|-%sp1", img_name(&fx.gpt));
	assert_non_null(strstr(out, want));
	snprintf(want, sizeof(want), "`-%sp2", img_name(&fx.gpt));
	assert_non_null(strstr(out, want));
	line = strstr(out, img_name(&fx.blank));
	assert_non_null(line);
	assert_non_null(strstr(line, "- (no identity)"));
	if (access("/run/udev/control", F_OK) != 0)
		assert_non_null(strstr(out, "no udev database"));
	free(out);
}

static void test_named_devices(void **state)
{
	const char *const only[] = { fx.xfs.dev, NULL };
	json_t *root = devices_json(only), *list = json_object_get(root, "blockdevices");
	const char *bad[] = { "devices", "/dev/no-such-device", NULL };
	char *err = NULL;

	assert_int_equal(json_array_size(list), 1);
	assert_string_equal(jstr(json_array_get(list, 0), "name"), img_name(&fx.xfs));
	json_decref(root);
	assert_int_equal(test_volagent2(bad, NULL, &err), 2);
	assert_non_null(strstr(err, "/dev/no-such-device: no such block device"));
	free(err);
}

/* The library directly: find by name, node; identities by kind. */
static void test_library_scan(void **state)
{
	struct devinv *inv = NULL;
	struct error_info err = { 0 };
	const struct devinv_device *d;
	char *phrase;

	assert_int_equal(devinv_scan(NULL, 0, &inv, &err), 0);
	d = devinv_find(inv, fx.ext4.dev);
	assert_non_null(d);
	assert_ptr_equal(devinv_find(inv, img_name(&fx.ext4)), d);
	assert_string_equal(devinv_device_identity(d, DEVINV_ID_FS_UUID), EXT4_UUID);
	assert_null(devinv_device_identity(d, DEVINV_ID_PTUUID));
	phrase = devinv_identity_phrase(d, d->id_kind, devinv_device_identity(d, d->id_kind));
	assert_string_equal(phrase, "ext4 uuid " EXT4_UUID);
	free(phrase);
	assert_null(devinv_find(inv, "no-such-device"));
	assert_int_equal(devinv_id_kind_from_string("partuuid"), DEVINV_ID_PARTUUID);
	assert_int_equal(devinv_id_kind_from_string("name"), -EINVAL);
	devinv_free(inv);
}

/* The stable id follows the image when the kernel names change. */
static void test_id_follows_rename(void **state)
{
	char old_ext4[32], old_xfs[32];
	json_t *root, *d;

	snprintf(old_ext4, sizeof(old_ext4), "%s", img_name(&fx.ext4));
	snprintf(old_xfs, sizeof(old_xfs), "%s", img_name(&fx.xfs));
	if (!img_swap(&fx.ext4, &fx.xfs, false, fx.dir))
		fprintf(stderr,
			"note: names did not swap exactly (other tests use loop devices)\n");
	assert_true(fx.ext4.dev[0] && fx.xfs.dev[0]);
	root = devices_json(NULL);
	d = find_backed(root, fx.ext4.file);
	assert_string_equal(jstr(d, "name"), img_name(&fx.ext4));
	assert_string_equal(jstr(d, "stable-id"), "fs-uuid:" EXT4_UUID);
	d = find_backed(root, fx.xfs.file);
	assert_string_equal(jstr(d, "name"), img_name(&fx.xfs));
	assert_string_equal(jstr(d, "stable-id"), "fs-uuid:" XFS_UUID);
	if (streq(old_ext4, img_name(&fx.xfs)))
		fprintf(stderr, "renamed: ext4 %s -> %s, xfs %s -> %s\n", old_ext4,
			img_name(&fx.ext4), old_xfs, img_name(&fx.xfs));
	json_decref(root);
}

/* Two devices with one identity (a copied image) are both marked, not silently merged. */
static void test_duplicate_ids(void **state)
{
	struct img orig, copy;
	char uuid[37], cmd[1200];
	json_t *root;

	img_random_uuid(uuid);
	assert_int_equal(img_make(&orig, fx.dir, "dup.img", IMG_SIZE), 0);
	assert_int_equal(img_ext4_uuid(&orig, uuid), 0);
	assert_int_equal(img_attach(&orig, false), 0);
	root = devices_json(NULL);
	assert_true(json_is_false(json_object_get(find_backed(root, orig.file), "duplicate-id")));
	json_decref(root);

	snprintf(copy.file, sizeof(copy.file), "%s/dup-copy.img", fx.dir);
	snprintf(cmd, sizeof(cmd), "cp --sparse=always '%s' '%s'", orig.file, copy.file);
	assert_int_equal(test_run((const char *const[]){ "sh", "-c", cmd, NULL }), 0);
	assert_int_equal(img_attach(&copy, false), 0);
	root = devices_json(NULL);
	assert_true(json_is_true(json_object_get(find_backed(root, copy.file), "duplicate-id")));
	assert_true(json_is_true(json_object_get(find_backed(root, orig.file), "duplicate-id")));
	json_decref(root);
	img_detach(&copy);
	img_detach(&orig);
}

int main(void)
{
	const struct CMUnitTest unit[] = {
		cmocka_unit_test(test_label_parse),
		cmocka_unit_test(test_label_malformed),
	};
	const struct CMUnitTest images[] = {
		cmocka_unit_test(test_golden_images),
		cmocka_unit_test(test_stable_ids),
		cmocka_unit_test(test_bluestore_matches_ceph_volume),
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_named_devices),
		cmocka_unit_test(test_library_scan),
		cmocka_unit_test(test_id_follows_rename),
		cmocka_unit_test(test_duplicate_ids),
	};
	const struct test_group groups[] = {
		TEST_GROUP("bluestore label", unit, NULL, NULL),
		TEST_GROUP("devices on loop images", images, group_setup, group_teardown),
	};

	return test_run_groups(groups, ARRAY_SIZE(groups));
}
