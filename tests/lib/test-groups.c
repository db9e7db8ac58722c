/* test-groups.c - several cmocka groups run in order (see test-groups.h). */
#include "test-groups.h"
#include "testlib.h"

int test_run_groups(const struct test_group *groups, size_t n)
{
	int r = 0;

	test_enter_private_mountns();
	for (size_t i = 0; i < n; i++)
		r |= _cmocka_run_group_tests(groups[i].name, groups[i].tests, groups[i].n,
					     groups[i].setup, groups[i].teardown);
	return r;
}
