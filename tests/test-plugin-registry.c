/* test-plugin-registry.c - the plugin registry: a table handed in by a test, lookups, the
 * wrappers' behaviour for absent optional ops, and plugin_names() under concurrent callers.
 *
 * Defect 3 of issue 11: plugin_names() filled a static buffer lazily with strcat from every
 * thread that called it first, so concurrent first callers saw (and produced) doubled or torn
 * lists.  Each race runs in a fresh child process (a fresh registry), many threads released at
 * once by a barrier, and every thread must see exactly the expected string. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fake-plugin.h"
#include "metrics.h"
#include "plugin.h"

#define N_THREADS 16
#define N_ROUNDS 200

static bool never(const struct volume_spec *spec)
{
	return false;
}

static char *padding_get_volume_name(const struct volume_spec *spec)
{
	return strdup("padding:1");
}

/* The padding plugins accept nothing; the tests' bare fake (tests/lib/fake-plugin.h) accepts
 * type "fake". */
static const struct volume_ops padding_ops = {
	.can_support = never,
	.get_volume_name = padding_get_volume_name,
};

/* Enough plugins, with long enough names, that building the list takes a while. */
#define FAKE(n)                                                                 \
	{                                                                       \
		.name = "fake-plugin-with-a-long-name-" #n, .ops = &padding_ops \
	}
static const struct volume_plugin fakes[] = { FAKE(0), FAKE(1), FAKE(2), FAKE(3),
					      FAKE(4), FAKE(5), FAKE(6) };
static const struct volume_plugin *const table[] = { &fakes[0], &fakes[1],	  &fakes[2],
						     &fakes[3], &fakes[4],	  &fakes[5],
						     &fakes[6], &fake_plugin_bare };
static const char expected[] = "fake-plugin-with-a-long-name-0, fake-plugin-with-a-long-name-1, "
			       "fake-plugin-with-a-long-name-2, fake-plugin-with-a-long-name-3, "
			       "fake-plugin-with-a-long-name-4, fake-plugin-with-a-long-name-5, "
			       "fake-plugin-with-a-long-name-6, fake";

static pthread_barrier_t barrier;

static void *call_names(void *arg)
{
	char *seen = arg;

	pthread_barrier_wait(&barrier);
	snprintf(seen, 512, "%s", plugin_names());
	return NULL;
}

/* In a child: N_THREADS first callers at once.  Exit 0 when all saw expected. */
static int race_once(bool set_table)
{
	static char seen[N_THREADS][512];
	pthread_t th[N_THREADS];
	int bad = 0;

	if (set_table)
		plugin_registry_set(table, sizeof(table) / sizeof(table[0]));
	pthread_barrier_init(&barrier, NULL, N_THREADS);
	for (int i = 0; i < N_THREADS; i++)
		pthread_create(&th[i], NULL, call_names, seen[i]);
	for (int i = 0; i < N_THREADS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < N_THREADS; i++)
		if (strcmp(seen[i], set_table ? expected : "local, nfs, rbd") != 0) {
			fprintf(stderr, "thread %d saw \"%s\"\n", i, seen[i]);
			bad = 1;
		}
	return bad;
}

static void run_races(bool set_table)
{
	int failed = 0;

	for (int round = 0; round < N_ROUNDS; round++) {
		int status;
		pid_t pid = fork();

		assert_true(pid >= 0);
		if (pid == 0)
			_exit(race_once(set_table));
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		failed += WEXITSTATUS(status) != 0;
	}
	assert_int_equal(failed, 0);
}

static void test_names_concurrent_first_callers_builtin(void **state)
{
	run_races(false);
}

static void test_names_concurrent_first_callers_test_table(void **state)
{
	run_races(true);
}

static void test_names_follow_the_table(void **state)
{
	assert_string_equal(plugin_names(), "local, nfs, rbd");
	plugin_registry_set(table, sizeof(table) / sizeof(table[0]));
	assert_string_equal(plugin_names(), expected);
	plugin_registry_set(NULL, 0);
	assert_string_equal(plugin_names(), "local, nfs, rbd");
}

static void test_fake_plugin_and_absent_ops(void **state)
{
	struct volume_spec *s = volume_spec_new("fake");
	const struct volume_plugin *p = NULL;
	struct volume_spec *built = NULL;
	struct error_info err = { 0 };
	unsigned long long cap = 0;

	plugin_registry_set(table, sizeof(table) / sizeof(table[0]));
	assert_int_equal(plugin_find_for_spec(s, &p, &err), 0);
	assert_ptr_equal(p, &fake_plugin_bare);
	assert_ptr_equal(plugin_find_by_name("fake"), &fake_plugin_bare);
	assert_null(plugin_find_by_name("local"));
	/* No validate: valid.  No device table: not staged.  Absent ops answer the same way. */
	assert_int_equal(plugin_validate(p, s, &err), 0);
	assert_false(plugin_uses_device(p, s));
	assert_false(plugin_has_attach(p));
	assert_false(plugin_has_detach(p));
	assert_false(plugin_has_check_health(p));
	assert_false(plugin_has_construct_spec(p));
	assert_false(plugin_has_expand(p));
	assert_false(plugin_has_block(p));
	assert_int_equal(plugin_detach(p, s, &(struct device_attachment){ 0 }, &err), 0);
	assert_int_equal(plugin_construct_spec(p, "fake:1", "/x", &built, &err), -EOPNOTSUPP);
	assert_null(built);
	assert_int_equal(plugin_check_health(p, s, "/x", &err), -EOPNOTSUPP);
	err_clear(&err);
	assert_int_equal(plugin_expand(p, s, NULL, "/x", 0, &cap, &err), -EOPNOTSUPP);
	assert_non_null(strstr(err_msg(&err), "fake"));
	/* An unknown type names every plugin there is. */
	volume_spec_unref(s);
	s = volume_spec_new("nope");
	err_clear(&err);
	assert_int_equal(plugin_find_for_spec(s, &p, &err), -EINVAL);
	assert_non_null(strstr(err_msg(&err), expected));
	volume_spec_unref(s);
	plugin_registry_set(NULL, 0);
}

static void test_wrappers_count_operations(void **state)
{
	const struct volume_plugin *p;
	struct error_info err = { 0 };
	char *text;

	plugin_registry_set(NULL, 0);
	p = plugin_find_by_name("local");
	assert_non_null(p);
	metrics_reset();
	/* Unmounting what is not mounted: a real, harmless call through the wrapper. */
	(void)plugin_unmount_device(p, "/nonexistent/volagent-test", &err);
	text = metrics_render();
	assert_non_null(strstr(text, "volagent_operations_started_total{plugin=\"local\","
				     "operation=\"unmount_device\"} 1"));
	free(text);
}

/* What a plugin declares (enum plugin_flags): local's volumes are paths of this node only;
 * nfs and rbd reach storage other nodes reach too; a plugin that declares nothing is none. */
static void test_declared_flags(void **state)
{
	plugin_registry_set(NULL, 0);
	assert_true(plugin_is_node_local(plugin_find_by_name("local")));
	assert_false(plugin_is_node_local(plugin_find_by_name("nfs")));
	assert_false(plugin_is_node_local(plugin_find_by_name("rbd")));
	assert_false(plugin_is_node_local(&fake_plugin_bare));
	assert_false(plugin_is_node_local(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names_concurrent_first_callers_builtin),
		cmocka_unit_test(test_names_concurrent_first_callers_test_table),
		cmocka_unit_test(test_names_follow_the_table),
		cmocka_unit_test(test_fake_plugin_and_absent_ops),
		cmocka_unit_test(test_wrappers_count_operations),
		cmocka_unit_test(test_declared_flags),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
