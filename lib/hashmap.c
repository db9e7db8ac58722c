/* hashmap.c - see hashmap.h.  FNV-1a hashing; open addressing with linear probing over a
 * power-of-two array of (key, value) slots and a parallel array of the keys' hashes, so an
 * entry costs no allocation of its own (20 bytes a slot, at most 3/4 of them in use).  A
 * removed entry leaves a tombstone (so a probe goes on past it, and an iterator may remove
 * the entry it just returned); tombstones go when the array is rebuilt. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "hashmap.h"

struct slot {
	const char *key; /* NULL: empty, or a tombstone when value is TOMBSTONE */
	void *value;
};

struct hashmap {
	struct slot *slots;
	uint32_t *hashes;
	size_t cap; /* a power of two, 2^bits */
	unsigned bits;
	size_t size; /* entries */
	size_t used; /* entries and tombstones */
};

static char tombstone;
#define TOMBSTONE ((void *)&tombstone)
#define INITIAL_BITS 4
#define SHRINK_BITS 10 /* an emptied map of more slots shrinks back */

/* The first slot to probe: the high bits of a multiplicative (Fibonacci) mix, as FNV-1a's low
 * bits hardly differ between keys that differ in one character before a common tail
 * ("pods/<uid>/volumes/..."), which would make long probe runs. */
static size_t home(uint32_t hash, unsigned bits)
{
	return (size_t)((hash * 2654435769u) >> (32 - bits));
}

uint32_t hashmap_hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 16777619u;
	}
	return h;
}

static int alloc_arrays(size_t cap, struct slot **ret_slots, uint32_t **ret_hashes)
{
	struct slot *slots = calloc(cap, sizeof(*slots));
	uint32_t *hashes = malloc(cap * sizeof(*hashes));

	if (!slots || !hashes) {
		free(slots);
		free(hashes);
		return -ENOMEM;
	}
	*ret_slots = slots;
	*ret_hashes = hashes;
	return 0;
}

struct hashmap *hashmap_new(void)
{
	struct hashmap *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	if (alloc_arrays((size_t)1 << INITIAL_BITS, &h->slots, &h->hashes) < 0) {
		free(h);
		return NULL;
	}
	h->cap = (size_t)1 << INITIAL_BITS;
	h->bits = INITIAL_BITS;
	return h;
}

void hashmap_clear(struct hashmap *h)
{
	struct slot *slots;
	uint32_t *hashes;

	/* A big array goes back to the heap (a burst of work leaves no 20 bytes per slot behind
	 * in a map that is mostly empty); a small one is kept for the next refill. */
	if (h->bits > SHRINK_BITS &&
	    alloc_arrays((size_t)1 << INITIAL_BITS, &slots, &hashes) == 0) {
		free(h->slots);
		free(h->hashes);
		h->slots = slots;
		h->hashes = hashes;
		h->bits = INITIAL_BITS;
		h->cap = (size_t)1 << INITIAL_BITS;
	} else {
		memset(h->slots, 0, h->cap * sizeof(*h->slots));
	}
	h->size = h->used = 0;
}

struct hashmap *hashmap_free(struct hashmap *h)
{
	if (!h)
		return NULL;
	free(h->slots);
	free(h->hashes);
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

/* The slot of key, or -1. */
static ssize_t find(const struct hashmap *h, const char *key, uint32_t hash)
{
	size_t mask = h->cap - 1;

	for (size_t i = home(hash, h->bits);; i = (i + 1) & mask) {
		const struct slot *s = &h->slots[i];

		if (!s->key) {
			if (s->value != TOMBSTONE)
				return -1;
		} else if (h->hashes[i] == hash && (s->key == key || strcmp(s->key, key) == 0)) {
			return (ssize_t)i;
		}
	}
}

/* Rebuilds the array at 2^bits slots (dropping the tombstones).  Returns 0 or -ENOMEM. */
static int rebuild(struct hashmap *h, unsigned bits)
{
	size_t cap = (size_t)1 << bits;
	struct slot *slots;
	uint32_t *hashes;

	if (alloc_arrays(cap, &slots, &hashes) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < h->cap; i++) {
		size_t j;

		if (!h->slots[i].key)
			continue;
		for (j = home(h->hashes[i], bits); slots[j].key; j = (j + 1) & (cap - 1))
			;
		slots[j] = h->slots[i];
		hashes[j] = h->hashes[i];
	}
	free(h->slots);
	free(h->hashes);
	h->slots = slots;
	h->hashes = hashes;
	h->cap = cap;
	h->bits = bits;
	h->used = h->size;
	return 0;
}

int hashmap_put(struct hashmap *h, const char *key, void *value)
{
	return hashmap_put_hashed(h, key, hashmap_hash(key), value);
}

int hashmap_put_hashed(struct hashmap *h, const char *key, uint32_t hash, void *value)
{
	size_t mask, i, slot = SIZE_MAX;

	if ((h->used + 1) * 4 > h->cap * 3) {
		/* Full of entries: twice the size; mostly tombstones: the same size. */
		unsigned bits = (h->size + 1) * 2 > h->cap ? h->bits + 1 : h->bits;

		if (rebuild(h, bits) < 0 && h->used + 1 >= h->cap)
			return -ENOMEM; /* else go on with a fuller array */
	}
	/* One probe both looks for key and finds where it goes (the first tombstone on the
	 * way, else the empty slot that ends the run). */
	mask = h->cap - 1;
	for (i = home(hash, h->bits);; i = (i + 1) & mask) {
		const struct slot *s = &h->slots[i];

		if (!s->key) {
			if (slot == SIZE_MAX)
				slot = i;
			if (s->value != TOMBSTONE)
				break;
		} else if (h->hashes[i] == hash && (s->key == key || strcmp(s->key, key) == 0)) {
			return -EEXIST;
		}
	}
	if (h->slots[slot].value != TOMBSTONE)
		h->used++;
	h->slots[slot].key = key;
	h->slots[slot].value = value;
	h->hashes[slot] = hash;
	h->size++;
	return 0;
}

int hashmap_replace(struct hashmap *h, const char *key, const char *new_key, void *value)
{
	ssize_t i = h->size ? find(h, key, hashmap_hash(key)) : -1;

	if (i < 0)
		return -ENOENT;
	h->slots[i].key = new_key;
	h->slots[i].value = value;
	return 0;
}

int hashmap_reserve(struct hashmap *h, size_t n)
{
	unsigned bits = h->bits;

	while ((n + 1) * 4 > ((size_t)1 << bits) * 3)
		bits++;
	return bits > h->bits ? rebuild(h, bits) : 0;
}

void *hashmap_get(const struct hashmap *h, const char *key)
{
	return hashmap_get_hashed(h, key, hashmap_hash(key));
}

void *hashmap_get_hashed(const struct hashmap *h, const char *key, uint32_t hash)
{
	ssize_t i = h->size ? find(h, key, hash) : -1;

	return i >= 0 ? h->slots[i].value : NULL;
}

void *hashmap_remove(struct hashmap *h, const char *key)
{
	return hashmap_remove_hashed(h, key, hashmap_hash(key));
}

void *hashmap_remove_hashed(struct hashmap *h, const char *key, uint32_t hash)
{
	ssize_t i = h->size ? find(h, key, hash) : -1;
	void *v;

	if (i < 0)
		return NULL;
	v = h->slots[i].value;
	h->slots[i].key = NULL;
	h->slots[i].value = TOMBSTONE;
	h->size--;
	if (h->size == 0)
		hashmap_clear(h); /* no tombstone outlives the last entry */
	return v;
}

size_t hashmap_size(const struct hashmap *h)
{
	return h ? h->size : 0;
}

bool hashmap_iterate(const struct hashmap *h, struct hashmap_iter *it, void **ret_value,
		     const char **ret_key)
{
	if (!h || h->size == 0)
		return false; /* also: a map emptied after growing is not walked */
	if (!it->started) {
		it->started = true;
		it->bucket = 0;
	}
	for (; it->bucket < h->cap; it->bucket++) {
		const struct slot *s = &h->slots[it->bucket];

		if (!s->key)
			continue;
		it->hash = h->hashes[it->bucket];
		it->bucket++; /* past this one before returning it, so it may be removed */
		if (ret_value)
			*ret_value = s->value;
		if (ret_key)
			*ret_key = s->key;
		return true;
	}
	return false;
}
