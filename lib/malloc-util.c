/* malloc-util.c - making room in the calling thread's malloc arena before a burst of small
 * allocations (see malloc-util.h for why). */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "malloc-util.h"

/* Below glibc's mmap threshold, so each block comes from the arena: the default 128 KiB, and
 * the 64 KiB the CSI server fixes it at (csi_server_start). */
#define RESERVE_BLOCK (60 * 1024)
/* A thread's arena heap holds at most 64 MiB; more would only open a second heap. */
#define RESERVE_MAX (48 * 1024 * 1024)
/* The most malloc puts between two blocks made one after the other (its chunk header). */
#define BLOCK_GAP 64

/* Faults in the pages of [lo, hi) in one system call rather than one fault per page on
 * first use.  Only what lies inside the range: the whole pages. */
static void populate(uintptr_t lo, uintptr_t hi, uintptr_t page)
{
	lo = (lo + page - 1) & ~(page - 1);
	hi &= ~(page - 1);
	if (hi > lo)
		(void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE); /* best effort */
}

void malloc_reserve(size_t bytes)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = 0, hi = 0;
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
	/* The pages are faulted in again, in runs of adjacent blocks: the trim left them mapped
	 * and writable.  MADV_POPULATE_WRITE changes no byte, so a run that is not mapped any
	 * more (an arena's extra heap, unmapped once empty) at worst fails or populates a page
	 * someone else mapped there meanwhile. */
	for (size_t i = 0; i < n; i++) {
		uintptr_t b = (uintptr_t)blocks[i];

		if (!b)
			continue;
		if (hi && b >= hi && b - hi <= BLOCK_GAP) {
			hi = b + RESERVE_BLOCK;
			continue;
		}
		if (hi)
			populate(lo, hi, page);
		lo = b;
		hi = b + RESERVE_BLOCK;
	}
	if (hi)
		populate(lo, hi, page);
	free(blocks);
}
