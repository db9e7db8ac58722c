/* test-backoff.c - the retry schedule: 500 ms doubling to the cap, reset on success, and the
 * last error reported once per change rather than on every retry. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>

#include "backoff.h"

static void test_doubles_to_cap(void **state)
{
	struct backoff *b = backoff_new(500, 4000);
	const uint64_t expected[] = { 500, 1000, 2000, 4000, 4000, 4000 };
	uint64_t now = 1000;

	assert_true(backoff_ready(b, "k", now));
	for (size_t i = 0; i < 6; i++) {
		backoff_failed(b, "k", now, "boom");
		assert_int_equal(backoff_get(b, "k")->delay_ms, expected[i]);
		assert_false(backoff_ready(b, "k", now + expected[i] - 1));
		assert_true(backoff_ready(b, "k", now + expected[i]));
		assert_int_equal(backoff_next_deadline(b), now + expected[i]);
		now += expected[i];
	}
	assert_int_equal(backoff_get(b, "k")->failures, 6);
	backoff_free(b);
}

static void test_reset_on_success(void **state)
{
	struct backoff *b = backoff_new(500, 120000);

	backoff_failed(b, "k", 0, "e1");
	backoff_failed(b, "k", 500, "e1");
	assert_true(backoff_succeeded(b, "k"));
	assert_null(backoff_get(b, "k"));
	assert_true(backoff_ready(b, "k", 0));
	assert_false(backoff_succeeded(b, "k")); /* nothing to recover from */
	backoff_failed(b, "k", 10, "e1");
	assert_int_equal(backoff_get(b, "k")->delay_ms, 500); /* starts over */
	assert_int_equal(backoff_next_deadline(b), 510);
	backoff_free(b);
}

static void test_error_change_reported_once(void **state)
{
	struct backoff *b = backoff_new(500, 120000);

	assert_true(backoff_failed(b, "k", 0, "no such device"));
	assert_false(backoff_failed(b, "k", 500, "no such device"));
	assert_false(backoff_failed(b, "k", 1500, "no such device"));
	assert_true(backoff_failed(b, "k", 3500, "permission denied"));
	assert_string_equal(backoff_get(b, "k")->last_error, "permission denied");
	assert_int_equal(backoff_get(b, "k")->last_error_ms, 3500);
	backoff_free(b);
}

static void test_keys_independent(void **state)
{
	struct backoff *b = backoff_new(500, 120000);

	backoff_failed(b, "a", 0, "x");
	backoff_failed(b, "a", 500, "x");
	backoff_failed(b, "b", 100, "y");
	assert_int_equal(backoff_count(b), 2);
	assert_int_equal(backoff_get(b, "a")->delay_ms, 1000);
	assert_int_equal(backoff_get(b, "b")->delay_ms, 500);
	assert_int_equal(backoff_next_deadline(b), 600);
	backoff_forget(b, "b");
	assert_int_equal(backoff_next_deadline(b), 1500);
	assert_int_equal(backoff_count(b), 1);
	backoff_free(b);
	b = backoff_new(1, 1);
	assert_true(backoff_next_deadline(b) == UINT64_MAX);
	backoff_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_doubles_to_cap),
		cmocka_unit_test(test_reset_on_success),
		cmocka_unit_test(test_error_change_reported_once),
		cmocka_unit_test(test_keys_independent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
