/* test-nfs-options.c - the mount option helpers the nfs plugin builds its mounts and messages
 * with: split and join, lookup, and masking of options that carry credentials; and the one
 * rendering of a volume spec (volume-spec.h) every writer uses, with those options masked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mount-options.h"
#include "volume-spec.h"

static char **split(const char *s)
{
	char **v = NULL;

	assert_int_equal(mount_options_split(s, &v), 0);
	return v;
}

static void test_split_and_join(void **state)
{
	char **v = split("vers=4.1,port=2049,ro");
	char *s;

	assert_int_equal(mount_options_count(v), 3);
	assert_string_equal(v[0], "vers=4.1");
	assert_string_equal(v[2], "ro");
	s = mount_options_join(v);
	assert_string_equal(s, "vers=4.1,port=2049,ro");
	free(s);
	assert_int_equal(mount_options_append(&v, "noac"), 0);
	s = mount_options_join(v);
	assert_string_equal(s, "vers=4.1,port=2049,ro,noac");
	free(s);
	mount_options_free(v);

	v = split("");
	assert_int_equal(mount_options_count(v), 0);
	s = mount_options_join(v);
	assert_string_equal(s, "");
	free(s);
	mount_options_free(v);

	v = NULL;
	assert_int_equal(mount_options_split("a,,b", &v), -EINVAL);
	assert_int_equal(mount_options_split(",a", &v), -EINVAL);
	assert_int_equal(mount_options_split("a,", &v), -EINVAL);
	assert_int_equal(mount_options_split("a,b\nc", &v), -EINVAL);
	assert_null(v);
	assert_null(mount_options_free(NULL));

	/* An SELinux label as kubelet passes it: the quoted value keeps its comma and quotes,
	 * and joins back to the same string. */
	v = split("ro,context=\"system_u:object_r:container_file_t:s0:c12,c34\",noatime");
	assert_int_equal(mount_options_count(v), 3);
	assert_string_equal(v[1], "context=\"system_u:object_r:container_file_t:s0:c12,c34\"");
	assert_string_equal(mount_options_get(v, "context"),
			    "\"system_u:object_r:container_file_t:s0:c12,c34\"");
	s = mount_options_join(v);
	assert_string_equal(s,
			    "ro,context=\"system_u:object_r:container_file_t:s0:c12,c34\",noatime");
	free(s);
	mount_options_free(v);
	v = NULL;
	assert_int_equal(mount_options_split("ro,context=\"system_u:object_r:t:s0:c1,c2", &v),
			 -EINVAL);
	assert_null(v);
	assert_true(mount_option_is_single("context=\"system_u:object_r:t:s0:c1,c2\""));
	assert_false(mount_option_is_single("ro,exec"));
	assert_false(mount_option_is_single("context=\"a,b"));
}

/* The options of the agent's own mounts: nosuid and nodev unless asked otherwise. */
static void test_own_mount(void **state)
{
	static const char *const cases[][3] = {
		/* options, read_only ("1"), the options mounted */
		{ "", "", "nosuid,nodev" },	{ "vers=4.1", "1", "vers=4.1,ro,nosuid,nodev" },
		{ "suid", "", "suid,nodev" },	{ "dev,vers=3", "", "dev,vers=3,nosuid" },
		{ "suid,dev", "", "suid,dev" }, { "nosuid", "", "nosuid,nodev" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char **v = NULL, **own, *joined;

		assert_int_equal(mount_options_split(cases[i][0], &v), 0);
		own = mount_options_own_mount(v, cases[i][1][0] == '1');
		assert_non_null(own);
		joined = mount_options_join(own);
		assert_string_equal(joined, cases[i][2]);
		free(joined);
		free(own); /* the vector only: its strings are v's */
		mount_options_free(v);
	}
}

static void test_get(void **state)
{
	char **v = split("port=1,vers=4.1,ro,port=2049");

	assert_string_equal(mount_options_get(v, "port"), "2049"); /* the last one wins */
	assert_string_equal(mount_options_get(v, "ro"), "");
	assert_null(mount_options_get(v, "rw"));
	assert_null(mount_options_get(v, "por"));
	assert_null(mount_options_get(NULL, "ro"));
	mount_options_free(v);
}

static void test_sensitive(void **state)
{
	assert_true(mount_option_is_sensitive("password=x", NULL));
	assert_true(mount_option_is_sensitive("PASS=x", NULL));
	assert_true(mount_option_is_sensitive("secret=x", NULL));
	assert_true(mount_option_is_sensitive("sec=krb5p", NULL));
	assert_true(mount_option_is_sensitive("keytab=/etc/k", NULL));
	assert_false(mount_option_is_sensitive("sec=sys", NULL));
	assert_false(mount_option_is_sensitive("vers=4.1", NULL));
	assert_false(mount_option_is_sensitive("passive=1", NULL));
	assert_false(mount_option_is_sensitive("username=bob", NULL));
	assert_true(mount_option_is_sensitive("username=bob", "domain, username"));
	assert_true(mount_option_is_sensitive("Domain=x", "domain,username"));
	assert_true(mount_option_is_sensitive("magic", "magic"));
	assert_false(mount_option_is_sensitive("magicx", "magic"));
}

static void test_mask(void **state)
{
	char **v = split("vers=4.1,password=hunter2,sec=krb5i,token=abc,magic,user=bob");
	char *m = mount_options_mask(v, "magic,user");

	assert_string_equal(m, "vers=4.1,password=****,sec=****,token=****,****,user=****");
	free(m);
	m = mount_options_mask(NULL, NULL);
	assert_string_equal(m, "");
	free(m);
	mount_options_free(v);
}

static void test_mask_text(void **state)
{
	char **v = split("vers=4.1,password=hunter2,user=bob");
	char text[128];

	strcpy(text, "mount.nfs: bad option password=hunter2 (hunter2), user=bob, vers=4.1");
	mount_options_mask_text(text, sizeof(text), v, "user");
	assert_string_equal(text,
			    "mount.nfs: bad option password=**** (****), user=****, vers=4.1");

	/* A message that fills its buffer stays terminated and leaks nothing. */
	memset(text, 'x', sizeof(text));
	memcpy(text + sizeof(text) - 9, "hunter2", 7);
	text[sizeof(text) - 1] = '\0';
	text[sizeof(text) - 2] = 'y';
	mount_options_mask_text(text, sizeof(text), v, NULL);
	assert_null(strstr(text, "hunter2"));
	assert_true(strlen(text) < sizeof(text));

	/* A short buffer: the mask replaces a value even when the rest must be cut. */
	{
		char small[12] = "pw hunter2!";
		mount_options_mask_text(small, sizeof(small), v, NULL);
		assert_string_equal(small, "pw ****!");
	}
	mount_options_free(v);
}

/* An nfs spec with every kind of sensitive option: built in (password, sec=krb5p), named in
 * sensitiveMountOptions (ticket, and the flag option magic), in a "mountOptions" attribute,
 * and a CSI secret. */
static struct volume_spec *sensitive_spec(void)
{
	struct volume_spec *s = volume_spec_new("nfs");

	assert_non_null(s);
	assert_int_equal(volume_spec_set(s, "server", "10.0.0.1"), 0);
	assert_int_equal(volume_spec_set(s, "path", "/export"), 0);
	assert_int_equal(volume_spec_set(s, VOLUME_SPEC_SENSITIVE_KEY, "ticket,magic"), 0);
	assert_int_equal(volume_spec_add_mount_option(s, "vers=4.1"), 0);
	assert_int_equal(volume_spec_add_mount_option(s, "password=hunter2"), 0);
	assert_int_equal(volume_spec_add_mount_option(s, "sec=krb5p"), 0);
	assert_int_equal(volume_spec_add_mount_option(s, "ticket=abc123"), 0);
	assert_int_equal(volume_spec_add_mount_option(s, "magic"), 0);
	assert_int_equal(volume_spec_set_secret(s, "token", "t0ken"), 0);
	s->read_only = true;
	return s;
}

static char *dump(json_t *o)
{
	char *s;

	assert_non_null(o);
	s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	json_decref(o);
	assert_non_null(s);
	return s;
}

static void test_spec_status_json(void **state)
{
	_cleanup_volume_spec_ struct volume_spec *s = sensitive_spec();
	char *j = dump(volume_spec_to_json(s, VOLUME_SPEC_JSON_STATUS));

	assert_string_equal(j,
			    "{\"mountOptions\":[\"vers=4.1\",\"password=****\",\"sec=****\","
			    "\"ticket=****\",\"****\"],\"path\":\"/export\",\"readOnly\":true,"
			    "\"sensitiveMountOptions\":\"ticket,magic\",\"server\":\"10.0.0.1\"}");
	free(j);
	j = dump(volume_spec_to_json(NULL, VOLUME_SPEC_JSON_STATUS));
	assert_string_equal(j, "null");
	free(j);
}

/* The journal's form is on-disk state: exactly what journal version 1 always wrote. */
static void test_spec_journal_json(void **state)
{
	_cleanup_volume_spec_ struct volume_spec *s = sensitive_spec();
	_cleanup_volume_spec_ struct volume_spec *plain = volume_spec_new("local");
	char *j = dump(volume_spec_to_json(s, VOLUME_SPEC_JSON_JOURNAL));

	assert_string_equal(j, "{\"attrs\":{\"path\":\"/export\",\"sensitiveMountOptions\":"
			       "\"ticket,magic\",\"server\":\"10.0.0.1\"},\"mount_options\":["
			       "\"vers=4.1\",\"" VOLUME_SPEC_MASKED_OPTION
			       "\",\"" VOLUME_SPEC_MASKED_OPTION "\",\"" VOLUME_SPEC_MASKED_OPTION
			       "\",\"" VOLUME_SPEC_MASKED_OPTION
			       "\"],\"read_only\":true,\"type\":\"nfs\"}");
	free(j);
	assert_int_equal(volume_spec_set(plain, "path", "/dev/sdb"), 0);
	assert_int_equal(volume_spec_add_mount_option(plain, "noatime"), 0);
	j = dump(volume_spec_to_json(plain, VOLUME_SPEC_JSON_JOURNAL));
	assert_string_equal(j, "{\"attrs\":{\"path\":\"/dev/sdb\"},\"mount_options\":"
			       "[\"noatime\"],\"read_only\":false,\"type\":\"local\"}");
	free(j);
}

/* A "mountOptions" attribute (one comma-separated string) is masked too, and marks a journal
 * entry as not to be restored; one that does not split is hidden whole. */
static void test_spec_options_attribute(void **state)
{
	_cleanup_volume_spec_ struct volume_spec *s = volume_spec_new("nfs");
	_cleanup_volume_spec_ struct volume_spec *bad = volume_spec_new("nfs");
	_cleanup_volume_spec_ struct volume_spec *fine = volume_spec_new("nfs");
	char *j, *t, *t2;

	assert_int_equal(volume_spec_set(s, "mountOptions", "vers=3,secret=s3cr3t"), 0);
	assert_true(volume_spec_has_sensitive_option(s));
	j = dump(volume_spec_to_json(s, VOLUME_SPEC_JSON_STATUS));
	assert_string_equal(j, "{\"mountOptions\":[\"vers=3\",\"secret=****\"]}");
	free(j);
	j = dump(volume_spec_to_json(s, VOLUME_SPEC_JSON_JOURNAL));
	assert_null(strstr(j, "s3cr3t"));
	assert_non_null(strstr(j, "\"mount_options\":[\"" VOLUME_SPEC_MASKED_OPTION "\"]"));
	free(j);
	t = volume_spec_format(s);
	assert_string_equal(t, "nfs mountOptions=vers=3,secret=****");
	assert_int_equal(volume_spec_add_mount_option(s, "ro"), 0);
	t2 = volume_spec_format(s); /* the spec's options first, as the plugins apply them */
	assert_string_equal(t2, "nfs mountOptions=ro,vers=3,secret=****");
	free(t2);
	free(t);

	assert_int_equal(volume_spec_set(bad, "mountOptions", "a,,password=x"), 0);
	assert_true(volume_spec_has_sensitive_option(bad));
	t = volume_spec_format(bad);
	assert_string_equal(t, "nfs mountOptions=****");
	free(t);

	assert_int_equal(volume_spec_set(fine, "mountOptions", "vers=3"), 0);
	assert_false(volume_spec_has_sensitive_option(fine));
	j = dump(volume_spec_to_json(fine, VOLUME_SPEC_JSON_JOURNAL));
	assert_non_null(strstr(j, "\"mount_options\":[]"));
	free(j);
}

static void test_spec_format_and_mask_text(void **state)
{
	_cleanup_volume_spec_ struct volume_spec *s = sensitive_spec();
	char *t = volume_spec_format(s);
	char text[256];

	assert_string_equal(t,
			    "nfs server=10.0.0.1 path=/export sensitiveMountOptions=ticket,magic "
			    "mountOptions=vers=4.1,password=****,sec=****,ticket=****,**** ro");
	free(t);
	assert_true(volume_spec_has_sensitive_option(s));

	/* A CSI fingerprint, or a helper's error that echoed the options. */
	snprintf(text, sizeof(text), "type=nfs;opt=password=hunter2;opt=ticket=abc123;opt=magic;");
	volume_spec_mask_text(s, text, sizeof(text));
	assert_string_equal(text, "type=nfs;opt=password=****;opt=ticket=****;opt=****;");
	volume_spec_mask_text(NULL, text, sizeof(text)); /* no spec: nothing to mask */
	assert_string_equal(text, "type=nfs;opt=password=****;opt=ticket=****;opt=****;");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_and_join),
		cmocka_unit_test(test_get),
		cmocka_unit_test(test_own_mount),
		cmocka_unit_test(test_sensitive),
		cmocka_unit_test(test_mask),
		cmocka_unit_test(test_mask_text),
		cmocka_unit_test(test_spec_status_json),
		cmocka_unit_test(test_spec_journal_json),
		cmocka_unit_test(test_spec_options_attribute),
		cmocka_unit_test(test_spec_format_and_mask_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
