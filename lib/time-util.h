/* time-util.h - the monotonic clock in the units the agent counts in: deadlines, timeouts
 * and backoff delays are milliseconds (or microseconds) on CLOCK_MONOTONIC, which no wall
 * clock step moves. */
#pragma once

#include <stdint.h>

/* Now on CLOCK_MONOTONIC, in milliseconds. */
uint64_t now_ms(void);

/* Now on CLOCK_MONOTONIC, in microseconds. */
uint64_t now_us(void);
