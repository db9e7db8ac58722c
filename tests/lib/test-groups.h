/* test-groups.h - a test file of several cmocka groups (unit cases, then cases on a group
 * fixture of loop devices, ...): one table of the groups, run in order in the test's private
 * mount namespace. */
#pragma once

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

struct test_group {
	const char *name;
	const struct CMUnitTest *tests;
	size_t n;
	CMFixtureFunction setup, teardown; /* the group's, or NULL */
};

/* A table entry for the array of cases tests. */
#define TEST_GROUP(name, tests, setup, teardown)                                 \
	{                                                                        \
		name, tests, sizeof(tests) / sizeof((tests)[0]), setup, teardown \
	}

/* Enters a private mount namespace (test_enter_private_mountns) and runs the n groups in
 * order.  Returns the OR of their results (0 when every case passed), for main. */
int test_run_groups(const struct test_group *groups, size_t n);
