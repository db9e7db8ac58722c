/* fixture-case.h - the cmocka case of a suite whose tests each get a fresh fixture from the
 * file's static setup() and teardown() (FIXTURE_SETUP_TEARDOWN, OUTSIDE_ENV_SETUP_TEARDOWN or
 * its own): a table entry names the test only. */
#pragma once

#define FIXTURE_CASE(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
