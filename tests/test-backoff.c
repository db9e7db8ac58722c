/* test-backoff.c - the retry schedule: 500 ms doubling to the cap, reset on success, the
 * last error reported once per change rather than on every retry, and each key reported due
 * once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <stdio.h>

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

struct due {
	char keys[4][8];
	unsigned n;
};

static void note_due(void *userdata, const char *key)
{
	struct due *d = userdata;

	if (d->n < 4)
		snprintf(d->keys[d->n], sizeof(d->keys[0]), "%s", key);
	d->n++;
}

/* Each key is reported due once per failure, when its delay is over, and then no longer
 * counts for the next deadline (so the caller's timer does not fire again for it). */
static void test_due_reported_once(void **state)
{
	struct backoff *b = backoff_new(500, 120000);
	struct due d = { 0 };

	backoff_failed(b, "a", 0, "x");
	backoff_failed(b, "b", 100, "y");
	backoff_take_due(b, 499, note_due, &d);
	assert_int_equal(d.n, 0);
	backoff_take_due(b, 500, note_due, &d);
	assert_int_equal(d.n, 1);
	assert_string_equal(d.keys[0], "a");
	assert_int_equal(backoff_next_deadline(b), 600);
	backoff_take_due(b, 700, note_due, &d);
	assert_int_equal(d.n, 2);
	assert_string_equal(d.keys[1], "b");
	assert_true(backoff_next_deadline(b) == UINT64_MAX);
	backoff_take_due(b, 5000, note_due, &d);
	assert_int_equal(d.n, 2);
	/* Failing again makes it due again, after the doubled delay. */
	backoff_failed(b, "a", 800, "x");
	assert_int_equal(backoff_next_deadline(b), 1800);
	backoff_take_due(b, 1800, note_due, &d);
	assert_int_equal(d.n, 3);
	assert_string_equal(d.keys[2], "a");
	backoff_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_doubles_to_cap),
		cmocka_unit_test(test_reset_on_success),
		cmocka_unit_test(test_error_change_reported_once),
		cmocka_unit_test(test_keys_independent),
		cmocka_unit_test(test_due_reported_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
