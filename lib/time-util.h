/* time-util.h - the monotonic clock in the units the agent counts in: deadlines, timeouts
 * and backoff delays are milliseconds (or microseconds) on CLOCK_MONOTONIC, which no wall
 * clock step moves; and the durations the configuration is written in. */
#pragma once

#include <stdint.h>

/* Now on CLOCK_MONOTONIC, in milliseconds. */
uint64_t now_ms(void);

/* Now on CLOCK_MONOTONIC, in microseconds. */
uint64_t now_us(void);

/* "500ms", "30s", "2m", "1h" -> milliseconds.  Returns 0 or -EINVAL (also for a negative
 * value, a missing or unknown unit, and overflow). */
int parse_duration_ms(const char *s, uint64_t *ret_ms);
