/* test-helper-scope.c - lib/helper-scope outside systemd: nothing is moved and the helper
 * stays where it is (the present behaviour in a container or a shell).  The move itself, into
 * a real transient scope of a real systemd, is checked by tests/systemd/test-unit.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "helper-scope.h"

static void read_cgroup(pid_t pid, char *buf, size_t size)
{
	char path[64];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	f = fopen(path, "re");
	assert_non_null(f);
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
}

static void test_outside_systemd_nothing_moved(void **state)
{
	struct error_info err = { 0 };
	char before[4096], after[4096], unit[256] = "";
	pid_t child;
	int status;

	if (helper_scope_wanted())
		skip(); /* running as a systemd service: the unit test covers that */
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		pause();
		_exit(0);
	}
	read_cgroup(child, before, sizeof(before));
	assert_int_equal(helper_scope_move(child, "test", "a test helper", unit, sizeof(unit),
					   &err),
			 0);
	read_cgroup(child, after, sizeof(after));
	assert_string_equal(before, after);
	assert_string_equal(unit, ""); /* not written when nothing was moved */
	assert_int_equal(err.code, 0);
	assert_int_equal(kill(child, 0), 0);
	kill(child, SIGTERM);
	assert_int_equal(waitpid(child, &status, 0), child);
}

static void test_switched_off(void **state)
{
	setenv("VOLAGENT_HELPER_SCOPE", "0", 1);
	assert_false(helper_scope_wanted());
	assert_int_equal(helper_scope_move(getpid(), "test", NULL, NULL, 0, NULL), 0);
	unsetenv("VOLAGENT_HELPER_SCOPE");
}

static void test_bad_arguments(void **state)
{
	assert_int_equal(helper_scope_move(0, "test", NULL, NULL, 0, NULL), -EINVAL);
	assert_int_equal(helper_scope_move(-1, "test", NULL, NULL, 0, NULL), -EINVAL);
	assert_int_equal(helper_scope_move(getpid(), NULL, NULL, NULL, 0, NULL), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_outside_systemd_nothing_moved),
		cmocka_unit_test(test_switched_off),
		cmocka_unit_test(test_bad_arguments),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
