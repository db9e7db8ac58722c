/* malloc-util.h - making room in the calling thread's malloc arena before a burst of small
 * allocations. */
#pragma once

#include <stddef.h>

/* Grows the calling thread's malloc arena by about bytes in a few large steps, gives the
 * memory back to the arena (not to the kernel's address space) and faults its pages in with
 * one madvise(MADV_POPULATE_WRITE) per run: the small allocations that follow find the arena
 * writable and its pages present.  glibc grows the arena of a thread other than the main one
 * a page at a time, one mprotect() per page, and each new page costs a page fault on first
 * use; both cost far more than a page's worth of small objects (under a hypervisor most of
 * all).  For the main thread it does nothing useful (its arena is trimmed with brk).  Best
 * effort: nothing happens when bytes is 0 or memory is short, and allocations work as before
 * either way. */
void malloc_reserve(size_t bytes);
