/* hashmap.h - a string-keyed hash table (open addressing: no allocation per entry).
 *
 * The map does not own keys or values: a key must stay valid while its entry is stored, which
 * is natural when the key is a field of the value (dsw_volume->name).  Removing the entry the
 * iterator just returned is allowed; any other change during iteration is not. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hashmap;

struct hashmap_iter {
	size_t bucket;
	void *next;
	bool started;
	uint32_t hash; /* the hash of the key hashmap_iterate returned last (for *_hashed) */
};

#define HASHMAP_ITER_INIT ((struct hashmap_iter){ 0 })

struct hashmap *hashmap_new(void);
/* Frees the table, not the keys or values.  Accepts NULL; returns NULL. */
struct hashmap *hashmap_free(struct hashmap *h);
/* Frees the table and each value with free_value (keys that a value owns go with it).
 * Accepts NULL; returns NULL. */
struct hashmap *hashmap_free_values(struct hashmap *h, void (*free_value)(void *value));
/* Removes every entry, keeping the table's size (for maps refilled over and over) unless it
 * is large (then its memory is freed).  A map whose last entry is removed is cleared. */
void hashmap_clear(struct hashmap *h);
/* Returns 0, -EEXIST when key is present, -ENOMEM. */
int hashmap_put(struct hashmap *h, const char *key, void *value);
void *hashmap_get(const struct hashmap *h, const char *key);
/* Gives the entry of key a new key (equal to key: the same string, kept elsewhere) and
 * value, e.g. when the value that held the key goes.  Returns 0, or -ENOENT when key is
 * absent. */
int hashmap_replace(struct hashmap *h, const char *key, const char *new_key, void *value);
/* Makes room for n entries in all without growing again.  Returns 0 or -ENOMEM. */
int hashmap_reserve(struct hashmap *h, size_t n);
/* Removes key and returns its value, or NULL when absent. */
void *hashmap_remove(struct hashmap *h, const char *key);
/* The same with the key's hash computed once by the caller (hashmap_hash), for long keys
 * looked up in several maps: hash must be hashmap_hash(key). */
uint32_t hashmap_hash(const char *key);
int hashmap_put_hashed(struct hashmap *h, const char *key, uint32_t hash, void *value);
void *hashmap_get_hashed(const struct hashmap *h, const char *key, uint32_t hash);
void *hashmap_remove_hashed(struct hashmap *h, const char *key, uint32_t hash);
size_t hashmap_size(const struct hashmap *h);
/* Returns true and the next entry, or false at the end. */
bool hashmap_iterate(const struct hashmap *h, struct hashmap_iter *it, void **ret_value,
		     const char **ret_key);
