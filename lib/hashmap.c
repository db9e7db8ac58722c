/* hashmap.c - see hashmap.h.  FNV-1a hashing, power-of-two bucket count, grows at load 1. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"

struct entry {
	struct entry *next;
	const char *key;
	void *value;
	uint32_t hash;
};

struct hashmap {
	struct entry **buckets;
	size_t n_buckets;
	size_t size;
};

uint32_t hashmap_hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 16777619u;
	}
	return h;
}

struct hashmap *hashmap_new(void)
{
	struct hashmap *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->n_buckets = 64;
	h->buckets = calloc(h->n_buckets, sizeof(*h->buckets));
	if (!h->buckets) {
		free(h);
		return NULL;
	}
	return h;
}

void hashmap_clear(struct hashmap *h)
{
	for (size_t i = 0; i < h->n_buckets; i++) {
		for (struct entry *e = h->buckets[i], *n; e; e = n) {
			n = e->next;
			free(e);
		}
		h->buckets[i] = NULL;
	}
	h->size = 0;
}

struct hashmap *hashmap_free(struct hashmap *h)
{
	if (!h)
		return NULL;
	hashmap_clear(h);
	free(h->buckets);
	free(h);
	return NULL;
}

struct hashmap *hashmap_free_values(struct hashmap *h, void (*free_value)(void *value))
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	void *v;

	while (h && hashmap_iterate(h, &it, &v, NULL))
		free_value(v);
	return hashmap_free(h);
}

static struct entry *find(const struct hashmap *h, const char *key, uint32_t hash)
{
	for (struct entry *e = h->buckets[hash & (h->n_buckets - 1)]; e; e = e->next)
		if (e->hash == hash && strcmp(e->key, key) == 0)
			return e;
	return NULL;
}

static void grow(struct hashmap *h)
{
	size_t n = h->n_buckets * 2;
	struct entry **b = calloc(n, sizeof(*b));

	if (!b)
		return; /* keep working with longer chains */
	for (size_t i = 0; i < h->n_buckets; i++)
		for (struct entry *e = h->buckets[i], *next; e; e = next) {
			next = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
		}
	free(h->buckets);
	h->buckets = b;
	h->n_buckets = n;
}

int hashmap_put(struct hashmap *h, const char *key, void *value)
{
	return hashmap_put_hashed(h, key, hashmap_hash(key), value);
}

int hashmap_put_hashed(struct hashmap *h, const char *key, uint32_t hash, void *value)
{
	struct entry *e;

	if (find(h, key, hash))
		return -EEXIST;
	e = malloc(sizeof(*e));
	if (!e)
		return -ENOMEM;
	if (h->size >= h->n_buckets)
		grow(h);
	e->key = key;
	e->value = value;
	e->hash = hash;
	e->next = h->buckets[hash & (h->n_buckets - 1)];
	h->buckets[hash & (h->n_buckets - 1)] = e;
	h->size++;
	return 0;
}

void *hashmap_get(const struct hashmap *h, const char *key)
{
	return hashmap_get_hashed(h, key, hashmap_hash(key));
}

void *hashmap_get_hashed(const struct hashmap *h, const char *key, uint32_t hash)
{
	struct entry *e = find(h, key, hash);

	return e ? e->value : NULL;
}

void *hashmap_remove(struct hashmap *h, const char *key)
{
	return hashmap_remove_hashed(h, key, hashmap_hash(key));
}

void *hashmap_remove_hashed(struct hashmap *h, const char *key, uint32_t hash)
{
	struct entry **pp = &h->buckets[hash & (h->n_buckets - 1)];

	for (; *pp; pp = &(*pp)->next) {
		struct entry *e = *pp;
		if (e->hash == hash && strcmp(e->key, key) == 0) {
			void *v = e->value;
			*pp = e->next;
			free(e);
			h->size--;
			return v;
		}
	}
	return NULL;
}

size_t hashmap_size(const struct hashmap *h)
{
	return h ? h->size : 0;
}

bool hashmap_iterate(const struct hashmap *h, struct hashmap_iter *it, void **ret_value,
		     const char **ret_key)
{
	struct entry *e;

	if (!h || h->size == 0)
		return false; /* a map emptied after growing: no walk over its empty buckets */
	if (!it->started) {
		it->started = true;
		it->bucket = 0;
		it->next = h->buckets[0];
	}
	while (!it->next) {
		if (++it->bucket >= h->n_buckets)
			return false;
		it->next = h->buckets[it->bucket];
	}
	e = it->next;
	it->next = e->next; /* taken before returning e, so e may be removed */
	if (ret_value)
		*ret_value = e->value;
	if (ret_key)
		*ret_key = e->key;
	return true;
}
