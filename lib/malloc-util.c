/* malloc-util.c - making room in the calling thread's malloc arena before a burst of small
 * allocations (see malloc-util.h for why). */
#include <stdlib.h>

#include "malloc-util.h"

/* Below glibc's default mmap threshold (128 KiB), so each block comes from the arena. */
#define RESERVE_BLOCK (120 * 1024)
/* A thread's arena heap holds at most 64 MiB; more would only open a second heap. */
#define RESERVE_MAX (48 * 1024 * 1024)

void malloc_reserve(size_t bytes)
{
	size_t n;
	void **blocks;

	if (bytes > RESERVE_MAX)
		bytes = RESERVE_MAX;
	n = bytes / RESERVE_BLOCK;
	if (n == 0)
		return;
	blocks = calloc(n, sizeof(*blocks));
	if (!blocks)
		return;
	for (size_t i = 0; i < n; i++)
		blocks[i] = malloc(RESERVE_BLOCK);
	/* In the order they were made: each merges with the free one before it and only the
	 * last reaches the top of the arena, so the arena is trimmed once, not once per block
	 * (a trim drops the pages but keeps them writable). */
	for (size_t i = 0; i < n; i++)
		free(blocks[i]);
	free(blocks);
}
