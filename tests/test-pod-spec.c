/* test-pod-spec.c - golden tests of the pod spec parser: every file in tests/files/specs/good
 * must parse to the text in tests/expected/specs/<name>.out, and every file in
 * tests/files/specs/bad must be rejected with exactly the message in <name>.err.
 * VOLAGENT_UPDATE_GOLDEN=1 rewrites the expected files (review the diff before committing). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pod-spec.h"
#include "testlib.h"

#define FILES "tests/files/specs"
#define EXPECTED "tests/expected/specs"

static int cmp_attr(const void *a, const void *b)
{
	return strcmp(((const struct volume_attr *)a)->key, ((const struct volume_attr *)b)->key);
}

/* A stable text form of a parsed spec. */
static char *dump(const struct pod_spec *p)
{
	char *buf;
	size_t len;
	FILE *f = open_memstream(&buf, &len);

	fprintf(f, "pod uid=%s name=%s namespace=%s\n", p->uid, p->name ? p->name : "-",
		p->namespace ? p->namespace : "-");
	for (size_t i = 0; i < p->n_volumes; i++) {
		const struct pod_volume *v = &p->volumes[i];
		struct volume_attr *attrs = calloc(v->spec->n_attrs + 1, sizeof(*attrs));

		fprintf(f, "volume name=%s plugin=%s id=%s read_only=%s source_read_only=%s\n",
			v->name, v->plugin->name, v->volume_name, v->read_only ? "true" : "false",
			v->spec->read_only ? "true" : "false");
		memcpy(attrs, v->spec->attrs, v->spec->n_attrs * sizeof(*attrs));
		qsort(attrs, v->spec->n_attrs, sizeof(*attrs), cmp_attr);
		for (size_t j = 0; j < v->spec->n_attrs; j++)
			fprintf(f, "  attr %s=%s\n", attrs[j].key, attrs[j].value);
		for (char **o = v->spec->mount_options; *o; o++)
			fprintf(f, "  option %s\n", *o);
		if (v->spec->block)
			fprintf(f, "  volumeMode Block\n");
		free(attrs);
	}
	fclose(f);
	return buf;
}

static int for_each_file(const char *dir, void (*fn)(const char *name))
{
	struct dirent **list;
	int n = scandir(dir, &list, NULL, alphasort), count = 0;

	assert_true(n > 0);
	for (int i = 0; i < n; i++) {
		if (strstr(list[i]->d_name, ".json")) {
			fn(list[i]->d_name);
			count++;
		}
		free(list[i]);
	}
	free(list);
	return count;
}

static void check_good(const char *name)
{
	char path[512], expected[512], stem[256];
	struct error_info err = { 0 };
	struct pod_spec *p = NULL;
	char *text;
	int r;

	snprintf(path, sizeof(path), FILES "/good/%s", name);
	snprintf(stem, sizeof(stem), "%.*s", (int)(strlen(name) - 5), name);
	snprintf(expected, sizeof(expected), EXPECTED "/%s.out", stem);
	r = pod_spec_parse_file(path, &p, &err);
	if (r < 0)
		fail_msg("%s was rejected: %s", path, err_msg(&err));
	text = dump(p);
	assert_true(test_golden_matches(expected, text));
	free(text);
	pod_spec_free(p);
}

static void check_bad(const char *name)
{
	char path[512], expected[512], stem[256], actual[600];
	struct error_info err = { 0 };
	struct pod_spec *p = NULL;
	int r;

	snprintf(path, sizeof(path), FILES "/bad/%s", name);
	snprintf(stem, sizeof(stem), "%.*s", (int)(strlen(name) - 5), name);
	snprintf(expected, sizeof(expected), EXPECTED "/%s.err", stem);
	r = pod_spec_parse_file(path, &p, &err);
	if (r == 0)
		fail_msg("%s was accepted", path);
	assert_null(p);
	snprintf(actual, sizeof(actual), "%s\n", err_msg(&err));
	assert_true(test_golden_matches(expected, actual));
}

static void test_good_files(void **state)
{
	assert_true(for_each_file(FILES "/good", check_good) >= 3);
}

static void test_bad_files(void **state)
{
	assert_true(for_each_file(FILES "/bad", check_bad) >= 20);
}

static void test_missing_file(void **state)
{
	struct error_info err = { 0 };
	struct pod_spec *p = NULL;

	assert_int_equal(pod_spec_parse_file(FILES "/does-not-exist.json", &p, &err), -ENOENT);
}

/* pod_spec_parse_at: a file opened relative to its dir parses as by path; a FIFO is refused
 * at once (not waited on), a directory and an oversized file are refused naming why. */
static void test_parse_at_and_odd_files(void **state)
{
	char dir[] = "/tmp/test-pod-spec.XXXXXX", path[600];
	struct error_info err = { 0 };
	struct pod_spec *p = NULL;
	int dfd;
	FILE *f;

	assert_non_null(mkdtemp(dir));
	dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);

	snprintf(path, sizeof(path), "%s/ok.json", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("{\"pod\": {\"uid\": \"u1\"}, \"volumes\": [{\"name\": \"v\", "
	      "\"local\": {\"path\": \"/srv/x\"}}]}",
	      f);
	fclose(f);
	assert_int_equal(pod_spec_parse_at(dfd, "ok.json", path, &p, &err), 0);
	assert_string_equal(p->uid, "u1");
	assert_string_equal(p->origin, path);
	assert_int_equal(p->n_volumes, 1);
	p = pod_spec_free(p);

	snprintf(path, sizeof(path), "%s/fifo.json", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(pod_spec_parse_at(dfd, "fifo.json", path, &p, &err), -EINVAL);
	assert_string_equal(err_msg(&err), "not a regular file");
	assert_null(p);

	snprintf(path, sizeof(path), "%s/dir.json", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	err_clear(&err);
	assert_int_equal(pod_spec_parse_at(dfd, "dir.json", path, &p, &err), -EINVAL);
	assert_string_equal(err_msg(&err), "not a regular file");

	snprintf(path, sizeof(path), "%s/big.json", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(truncate(path, POD_SPEC_MAX_BYTES + 1), 0);
	err_clear(&err);
	assert_int_equal(pod_spec_parse_file(path, &p, &err), -EFBIG);
	assert_non_null(strstr(err_msg(&err), "larger than"));

	/* A syntax error still names its line and column. */
	snprintf(path, sizeof(path), "%s/syntax.json", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("{\"pod\":\n  {\"uid\": }", f);
	fclose(f);
	err_clear(&err);
	assert_int_equal(pod_spec_parse_at(dfd, "syntax.json", path, &p, &err), -EINVAL);
	assert_non_null(strstr(err_msg(&err), "line 2 column"));

	close(dfd);
	for (const char *n = "ok.json\0fifo.json\0big.json\0syntax.json\0"; *n;
	     n += strlen(n) + 1) {
		snprintf(path, sizeof(path), "%s/%s", dir, n);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/dir.json", dir);
	rmdir(path);
	rmdir(dir);
}

static void test_volume_names(void **state)
{
	assert_true(pod_volume_name_is_valid("data"));
	assert_true(pod_volume_name_is_valid("a-1"));
	assert_false(pod_volume_name_is_valid(""));
	assert_false(pod_volume_name_is_valid("-a"));
	assert_false(pod_volume_name_is_valid("a-"));
	assert_false(pod_volume_name_is_valid("a/b"));
	assert_false(pod_volume_name_is_valid(".."));
	assert_false(pod_volume_name_is_valid(
		"a234567890123456789012345678901234567890123456789012345678901234"));
}

static void test_same_source_same_id(void **state)
{
	struct error_info err = { 0 };
	struct pod_spec *a = NULL, *b = NULL;

	assert_int_equal(pod_spec_parse_string("{\"pod\":{\"uid\":\"a\"},\"volumes\":[{\"name\":"
					       "\"x\",\"local\":{\"path\":\"/srv/d\"}}]}",
					       "a", &a, &err),
			 0);
	assert_int_equal(pod_spec_parse_string("{\"pod\":{\"uid\":\"b\"},\"volumes\":[{\"name\":"
					       "\"y\",\"local\":{\"path\":\"/srv/d\"},"
					       "\"readOnly\":true}]}",
					       "b", &b, &err),
			 0);
	/* Two pods naming one source share one node-wide volume. */
	assert_string_equal(a->volumes[0].volume_name, b->volumes[0].volume_name);
	assert_true(volume_spec_equal(a->volumes[0].spec, b->volumes[0].spec));
	assert_false(a->volumes[0].read_only);
	assert_true(b->volumes[0].read_only);
	pod_spec_free(a);
	pod_spec_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_files),
		cmocka_unit_test(test_bad_files),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_volume_names),
		cmocka_unit_test(test_same_source_same_id),
		cmocka_unit_test(test_parse_at_and_odd_files),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
