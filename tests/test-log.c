/* test-log.c - logfmt quoting and levels of log.c, checked on a captured stderr. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <errno.h>
#include <cmocka.h>

#include "log.h"
#include "error.h"

static char *capture(void (*fn)(void))
{
	char path[] = "/tmp/volagent-logtest-XXXXXX";
	int fd = mkstemp(path), saved = dup(2);
	static char buf[8192];
	ssize_t n;

	unlink(path);
	dup2(fd, 2);
	fn();
	dup2(saved, 2);
	close(saved);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	close(fd);
	return buf;
}

static void emit_quoted(void)
{
	log_info("volume mounted", "target", "/var/lib/a b", "quote", "say \"hi\"", "plain", "x");
}

static void test_quoting(void **state)
{
	char *out = capture(emit_quoted);

	assert_non_null(strstr(out, "level=info msg=\"volume mounted\""));
	assert_non_null(strstr(out, " target=\"/var/lib/a b\""));
	assert_non_null(strstr(out, " quote=\"say \\\"hi\\\"\""));
	assert_non_null(strstr(out, " plain=x\n"));
}

static void emit_debug(void)
{
	log_debug("reconcile", "hidden");
	log_info("shown", "n", LOG_INT(42));
}

static void test_levels(void **state)
{
	char *out;

	log_set_level(LOG_LVL_INFO);
	out = capture(emit_debug);
	assert_null(strstr(out, "hidden"));
	assert_non_null(strstr(out, "msg=shown n=42"));
	assert_int_equal(log_set_level_name("warning"), 0);
	assert_int_equal(log_get_level(), LOG_LVL_WARNING);
	assert_int_equal(log_set_level_name("loud"), -EINVAL);
	log_set_level(LOG_LVL_INFO);
}

static void test_error_info(void **state)
{
	struct error_info e = { 0 };

	assert_string_equal(err_msg(&e), "no error");
	assert_int_equal(err_set(&e, -ENOENT, "path %s", "/x"), -ENOENT);
	assert_int_equal(err_prefix(&e, "volume %s", "data"), -ENOENT);
	assert_string_equal(err_msg(&e), "volume data: path /x");
	err_clear(&e);
	e.code = -EIO;
	assert_string_equal(err_msg(&e), strerror(EIO));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quoting),
		cmocka_unit_test(test_levels),
		cmocka_unit_test(test_error_info),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
