/* backoff.h - exponential backoff per failed operation key (kubelet's: 500 ms, doubling, capped
 * at about two minutes), with the last failure's reason kept for status and logging.
 *
 * Times are milliseconds on CLOCK_MONOTONIC, passed in by the caller so tests need no clock. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct backoff_entry {
	char *key;
	unsigned failures;
	uint64_t delay_ms;
	uint64_t next_try_ms;
	char *last_error;
	uint64_t last_error_ms;
	bool due_reported; /* backoff_take_due() reported its delay over */
};

struct backoff;

struct backoff *backoff_new(uint64_t initial_ms, uint64_t max_ms);
struct backoff *backoff_free(struct backoff *b);
/* Whether key may be tried at now_ms (it has no failure, or its delay has passed). */
bool backoff_ready(const struct backoff *b, const char *key, uint64_t now_ms);
/* Records a failure and doubles the delay.  Returns true when error differs from the previous
 * failure's (the caller logs it then, and not on every retry). */
bool backoff_failed(struct backoff *b, const char *key, uint64_t now_ms, const char *error);
/* Forgets key.  Returns true when it had failed before (the caller may log the recovery). */
bool backoff_succeeded(struct backoff *b, const char *key);
/* Forgets key without it counting as a recovery (the work is no longer wanted). */
void backoff_forget(struct backoff *b, const char *key);
const struct backoff_entry *backoff_get(const struct backoff *b, const char *key);
/* The earliest next_try_ms of the entries not yet reported due, or UINT64_MAX. */
uint64_t backoff_next_deadline(const struct backoff *b);
/* Calls fn(key) once for each entry whose delay is over at now_ms (until it fails again), so
 * the caller can retry exactly those keys. */
void backoff_take_due(struct backoff *b, uint64_t now_ms,
		      void (*fn)(void *userdata, const char *key), void *userdata);
unsigned backoff_count(const struct backoff *b);
