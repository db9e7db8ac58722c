/* time-util.c - see time-util.h. */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "macro.h"
#include "time-util.h"

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

int parse_duration_ms(const char *s, uint64_t *ret_ms)
{
	char *end;
	unsigned long long v;
	uint64_t mult;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	if (streq(end, "ms"))
		mult = 1;
	else if (streq(end, "s"))
		mult = 1000;
	else if (streq(end, "m"))
		mult = 60 * 1000;
	else if (streq(end, "h"))
		mult = 3600 * 1000;
	else
		return -EINVAL;
	if (v > UINT64_MAX / mult)
		return -EINVAL;
	*ret_ms = v * mult;
	return 0;
}
