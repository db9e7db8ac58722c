/* backoff.c - see backoff.h. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backoff.h"
#include "hashmap.h"
#include "macro.h"

struct backoff {
	struct hashmap *entries;
	uint64_t initial_ms;
	uint64_t max_ms;
};

struct backoff *backoff_new(uint64_t initial_ms, uint64_t max_ms)
{
	struct backoff *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->entries = hashmap_new();
	if (!b->entries) {
		free(b);
		return NULL;
	}
	b->initial_ms = initial_ms;
	b->max_ms = max_ms < initial_ms ? initial_ms : max_ms;
	return b;
}

static void entry_free(void *p)
{
	struct backoff_entry *e = p;

	free(e->key);
	free(e->last_error);
	free(e);
}

struct backoff *backoff_free(struct backoff *b)
{
	if (!b)
		return NULL;
	hashmap_free_values(b->entries, entry_free);
	free(b);
	return NULL;
}

bool backoff_ready(const struct backoff *b, const char *key, uint64_t now)
{
	const struct backoff_entry *e = hashmap_get(b->entries, key);

	return !e || now >= e->next_try_ms;
}

bool backoff_failed(struct backoff *b, const char *key, uint64_t now, const char *error)
{
	struct backoff_entry *e = hashmap_get(b->entries, key);
	bool changed;

	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e || !(e->key = strdup(key)) || hashmap_put(b->entries, e->key, e) < 0) {
			if (e)
				entry_free(e);
			return true;
		}
	}
	changed = !streq_ptr(e->last_error, error);
	if (changed) {
		free(e->last_error);
		e->last_error = strdup(error);
	}
	e->failures++;
	e->due_reported = false;
	e->delay_ms = e->delay_ms ? e->delay_ms * 2 : b->initial_ms;
	if (e->delay_ms > b->max_ms)
		e->delay_ms = b->max_ms;
	e->next_try_ms = now + e->delay_ms;
	e->last_error_ms = now;
	return changed;
}

bool backoff_succeeded(struct backoff *b, const char *key)
{
	struct backoff_entry *e = hashmap_remove(b->entries, key);

	if (!e)
		return false;
	entry_free(e);
	return true;
}

void backoff_forget(struct backoff *b, const char *key)
{
	backoff_succeeded(b, key);
}

const struct backoff_entry *backoff_get(const struct backoff *b, const char *key)
{
	return hashmap_get(b->entries, key);
}

uint64_t backoff_next_deadline(const struct backoff *b)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	uint64_t min = UINT64_MAX;
	void *v;

	while (hashmap_iterate(b->entries, &it, &v, NULL)) {
		const struct backoff_entry *e = v;
		if (!e->due_reported && e->next_try_ms < min)
			min = e->next_try_ms;
	}
	return min;
}

void backoff_take_due(struct backoff *b, uint64_t now, void (*fn)(void *userdata, const char *key),
		      void *userdata)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	void *v;

	while (hashmap_iterate(b->entries, &it, &v, NULL)) {
		struct backoff_entry *e = v;
		if (e->due_reported || now < e->next_try_ms)
			continue;
		e->due_reported = true;
		fn(userdata, e->key);
	}
}

unsigned backoff_count(const struct backoff *b)
{
	return (unsigned)hashmap_size(b->entries);
}
