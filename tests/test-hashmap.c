/* test-hashmap.c - put, get, remove while iterating (the iterator giving each key's hash), growth
 * past many buckets, lookups with a hash computed once, an entry given a new key string, room
 * made ahead. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"

static void test_basic(void **state)
{
	struct hashmap *h = hashmap_new();
	int a = 1, b = 2;

	assert_int_equal(hashmap_put(h, "a", &a), 0);
	assert_int_equal(hashmap_put(h, "a", &b), -EEXIST);
	assert_int_equal(hashmap_put(h, "b", &b), 0);
	assert_ptr_equal(hashmap_get(h, "a"), &a);
	assert_ptr_equal(hashmap_get(h, "b"), &b);
	assert_null(hashmap_get(h, "c"));
	assert_int_equal(hashmap_size(h), 2);
	assert_ptr_equal(hashmap_remove(h, "a"), &a);
	assert_null(hashmap_remove(h, "a"));
	assert_int_equal(hashmap_size(h), 1);
	hashmap_clear(h);
	assert_int_equal(hashmap_size(h), 0);
	assert_null(hashmap_get(h, "b"));
	assert_int_equal(hashmap_put(h, "b", &a), 0); /* usable again */
	assert_ptr_equal(hashmap_get(h, "b"), &a);
	hashmap_free(h);
	assert_null(hashmap_free(NULL));
}

static void test_many_and_remove_while_iterating(void **state)
{
	enum {
		N = 20000
	};
	struct hashmap *h = hashmap_new();
	char(*keys)[16] = calloc(N, 16);
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	const char *key;
	size_t seen = 0;
	void *v;

	for (int i = 0; i < N; i++) {
		snprintf(keys[i], 16, "k%d", i);
		assert_int_equal(hashmap_put(h, keys[i], keys[i]), 0);
	}
	assert_int_equal(hashmap_size(h), N);
	for (int i = 0; i < N; i += 997)
		assert_ptr_equal(hashmap_get(h, keys[i]), keys[i]);
	/* Remove every even key during iteration; each entry is seen exactly once. */
	while (hashmap_iterate(h, &it, &v, &key)) {
		assert_ptr_equal(v, key);
		assert_int_equal(it.hash, hashmap_hash(key)); /* for the *_hashed lookups */
		seen++;
		if (atoi(key + 1) % 2 == 0)
			assert_ptr_equal(hashmap_remove(h, key), v);
	}
	assert_int_equal(seen, N);
	assert_int_equal(hashmap_size(h), N / 2);
	assert_null(hashmap_get(h, "k0"));
	assert_non_null(hashmap_get(h, "k1"));
	hashmap_free(h);
	free(keys);
}

static int n_freed;

static void count_free(void *value)
{
	n_freed++;
	free(value);
}

/* Every value goes to the free function once; a NULL map is fine. */
static void test_free_values(void **state)
{
	struct hashmap *h = hashmap_new();
	char key[16];

	assert_non_null(h);
	for (int i = 0; i < 100; i++) {
		char *v;

		snprintf(key, sizeof(key), "k%d", i);
		v = strdup(key); /* its own key, as the agent's maps hold them */
		assert_non_null(v);
		assert_int_equal(hashmap_put(h, v, v), 0);
	}
	n_freed = 0;
	assert_null(hashmap_free_values(h, count_free));
	assert_int_equal(n_freed, 100);
	assert_null(hashmap_free_values(NULL, count_free));
	assert_int_equal(n_freed, 100);
}

/* A key hashed once works in several maps, past growth, and the same as the plain calls. */
static void test_hashed(void **state)
{
	struct hashmap *h1 = hashmap_new(), *h2 = hashmap_new();
	const char *key = "/var/lib/volagent/pods/u1/volumes/kubernetes.io~local/data";
	uint32_t hash = hashmap_hash(key);
	char keys[300][16];
	int a = 1, b = 2;

	assert_int_equal(hashmap_put_hashed(h1, key, hash, &a), 0);
	assert_int_equal(hashmap_put_hashed(h1, key, hash, &b), -EEXIST);
	assert_int_equal(hashmap_put(h2, key, &b), 0);
	for (int i = 0; i < 300; i++) { /* grows past the first bucket count */
		snprintf(keys[i], sizeof(keys[i]), "k%d", i);
		assert_int_equal(hashmap_put(h1, keys[i], keys[i]), 0);
	}
	assert_ptr_equal(hashmap_get(h1, key), &a);
	assert_ptr_equal(hashmap_get_hashed(h1, key, hash), &a);
	assert_ptr_equal(hashmap_get_hashed(h2, key, hash), &b);
	assert_ptr_equal(hashmap_get_hashed(h1, "k7", hashmap_hash("k7")), keys[7]);
	assert_null(hashmap_get_hashed(h1, "nope", hashmap_hash("nope")));
	assert_ptr_equal(hashmap_remove_hashed(h1, key, hash), &a);
	assert_null(hashmap_get(h1, key));
	assert_null(hashmap_remove_hashed(h1, key, hash));
	assert_int_equal(hashmap_size(h1), 300);
	hashmap_free(h1);
	hashmap_free(h2);
}

/* Entries removed leave tombstones that a probe goes past: a small map that sees many
 * different keys come and go (the in-flight maps) keeps finding, adding and missing keys,
 * with every slot used at some point. */
static void test_churn(void **state)
{
	enum {
		LIVE = 8,
		ROUNDS = 20000
	};
	struct hashmap *h = hashmap_new();
	static char keys[ROUNDS][16];
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	int seen = 0;
	void *v;

	assert_non_null(h);
	for (int i = 0; i < ROUNDS; i++) {
		snprintf(keys[i], sizeof(keys[i]), "op%d", i);
		assert_int_equal(hashmap_put(h, keys[i], keys[i]), 0);
		if (i >= LIVE)
			assert_ptr_equal(hashmap_remove(h, keys[i - LIVE]), keys[i - LIVE]);
		assert_null(hashmap_get(h, "absent"));
		/* A live key is found past the tombstones before it: no second entry. */
		assert_int_equal(hashmap_put(h, keys[i], keys[i]), -EEXIST);
		assert_int_equal(hashmap_size(h), i >= LIVE ? LIVE : i + 1);
	}
	for (int i = ROUNDS - LIVE; i < ROUNDS; i++)
		assert_ptr_equal(hashmap_get(h, keys[i]), keys[i]);
	assert_null(hashmap_get(h, keys[ROUNDS - LIVE - 1]));
	/* Every entry removed while iterating: each seen once, the map empty and usable. */
	while (hashmap_iterate(h, &it, &v, NULL)) {
		assert_ptr_equal(hashmap_remove(h, v), v);
		seen++;
	}
	assert_int_equal(seen, LIVE);
	assert_int_equal(hashmap_size(h), 0);
	assert_int_equal(hashmap_put(h, keys[0], keys[0]), 0);
	assert_ptr_equal(hashmap_get(h, keys[0]), keys[0]);
	hashmap_free(h);
}

/* An entry keyed by one value's string is re-keyed by another's equal string, as the actual
 * state's index does when the value holding the key goes. */
static void test_replace(void **state)
{
	struct hashmap *h = hashmap_new();
	char *k1 = strdup("volume-a"), *k2 = strdup("volume-a");
	int a = 1, b = 2;

	assert_int_equal(hashmap_put(h, k1, &a), 0);
	assert_int_equal(hashmap_replace(h, "volume-a", k2, &b), 0);
	free(k1); /* the old key string may go now */
	assert_ptr_equal(hashmap_get(h, "volume-a"), &b);
	assert_int_equal(hashmap_size(h), 1);
	assert_int_equal(hashmap_replace(h, "volume-b", k2, &a), -ENOENT);
	assert_ptr_equal(hashmap_remove(h, "volume-a"), &b);
	free(k2);
	hashmap_free(h);
}

/* A map given room ahead takes the entries in and finds each; a smaller reserve changes
 * nothing. */
static void test_reserve(void **state)
{
	enum {
		N = 5000
	};
	struct hashmap *h = hashmap_new();
	static char keys[N][16];

	assert_int_equal(hashmap_reserve(h, N), 0);
	assert_int_equal(hashmap_reserve(h, 10), 0); /* never shrinks */
	for (int i = 0; i < N; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%d", i);
		assert_int_equal(hashmap_put(h, keys[i], keys[i]), 0);
	}
	assert_int_equal(hashmap_size(h), N);
	for (int i = 0; i < N; i++)
		assert_ptr_equal(hashmap_get(h, keys[i]), keys[i]);
	assert_int_equal(hashmap_reserve(h, N / 2), 0);
	for (int i = 0; i < N; i++)
		assert_ptr_equal(hashmap_get(h, keys[i]), keys[i]);
	hashmap_free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_basic),
		cmocka_unit_test(test_many_and_remove_while_iterating),
		cmocka_unit_test(test_free_values),
		cmocka_unit_test(test_hashed),
		cmocka_unit_test(test_churn),
		cmocka_unit_test(test_replace),
		cmocka_unit_test(test_reserve),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
