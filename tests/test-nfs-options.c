/* test-nfs-options.c - the mount option helpers the nfs plugin builds its mounts and messages
 * with: split and join, lookup, and masking of options that carry credentials. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mount-options.h"

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
	assert_string_equal(text, "mount.nfs: bad option password=**** (****), user=****, vers=4.1");

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_and_join), cmocka_unit_test(test_get),
		cmocka_unit_test(test_sensitive),      cmocka_unit_test(test_mask),
		cmocka_unit_test(test_mask_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
