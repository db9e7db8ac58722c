/* test-malloc-util.c - malloc_reserve(): a thread's arena made writable in advance (the
 * mapping that holds the thread's small allocations is as large as asked and its pages are
 * present: allocating in it takes next to no page fault), and allocations
 * work as before around it, also for nothing or for more than an arena holds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "malloc-util.h"

#if defined(__SANITIZE_ADDRESS__)
#define REAL_MALLOC 0 /* the sanitizer's allocator has no arenas to look at */
#else
#define REAL_MALLOC 1
#endif

/* The size of the writable mapping of /proc/self/maps that holds p; 0 if none. */
static size_t writable_mapping_size(const void *p)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	size_t size = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3)
			continue;
		if ((uintptr_t)p >= lo && (uintptr_t)p < hi && perms[0] == 'r' && perms[1] == 'w')
			size = hi - lo;
	}
	fclose(f);
	return size;
}

struct probe {
	size_t reserve;
	size_t mapping;
	long faults; /* page faults while allocating, after the reserve */
	bool ok;
};

/* In a thread of its own (its own arena): reserve, then many small allocations. */
static void *probe_thread(void *arg)
{
	struct probe *pr = arg;
	enum {
		N = 20000
	};
	char **v = calloc(N, sizeof(*v));

	struct rusage r0, r1;

	malloc_reserve(pr->reserve);
	getrusage(RUSAGE_THREAD, &r0);
	pr->ok = v != NULL;
	for (int i = 0; pr->ok && i < N; i++) {
		v[i] = malloc(100);
		pr->ok = v[i] != NULL;
		if (pr->ok)
			memset(v[i], i & 0xff, 100);
	}
	getrusage(RUSAGE_THREAD, &r1);
	pr->faults = r1.ru_minflt - r0.ru_minflt;
	if (pr->ok)
		pr->mapping = writable_mapping_size(v[N - 1]);
	for (int i = 0; pr->ok && i < N; i++)
		pr->ok = (unsigned char)v[i][99] == (i & 0xff);
	for (int i = 0; v && i < N; i++)
		free(v[i]);
	free(v);
	return NULL;
}

static struct probe run_probe(size_t reserve)
{
	struct probe pr = { .reserve = reserve };
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, probe_thread, &pr), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	return pr;
}

static void test_reserve_makes_arena_writable(void **state)
{
	struct probe pr = run_probe(16 << 20);

	assert_true(pr.ok);
	if (!REAL_MALLOC)
		skip();
	/* 20,000 x 100 bytes is about 2.4 MiB; without the reserve the mapping is that large.
	 * Run first: no arena of an earlier thread of this test is left to be reused. */
	assert_true(pr.mapping >= 15 << 20);
	/* ... and its pages present: about 600 pages were allocated, with next to no fault. */
	assert_true(pr.faults < 60);
}

static void test_nothing_to_reserve(void **state)
{
	struct probe pr = run_probe(0);

	/* No upper bound: the thread may reuse the arena of the one before, already grown. */
	assert_true(pr.ok);
	if (!REAL_MALLOC)
		skip();
	assert_true(pr.mapping > 0);
}

static void test_more_than_an_arena_holds(void **state)
{
	struct probe pr = run_probe((size_t)1 << 40);

	assert_true(pr.ok);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reserve_makes_arena_writable),
		cmocka_unit_test(test_nothing_to_reserve),
		cmocka_unit_test(test_more_than_an_arena_holds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
