/* fixture-case.h - the cmocka setup, teardown and table entry of a suite whose tests each get
 * a fresh object of their own (an agent fixture, a CSI env, ...) as their state: the file
 * defines its static setup() and teardown() with one macro, and a table entry names the test
 * only. */
#pragma once

/* Defines static setup() (*state = the value of new_expr) and teardown() (free_fn(*state)). */
#define STATE_SETUP_TEARDOWN(new_expr, free_fn) \
	static int setup(void **state)          \
	{                                       \
		*state = (new_expr);            \
		return 0;                       \
	}                                       \
	static int teardown(void **state)       \
	{                                       \
		free_fn(*state);                \
		return 0;                       \
	}

/* The table entry of test fn with the file's setup() and teardown(). */
#define FIXTURE_CASE(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
