/* malloc-util.h - making room in the calling thread's malloc arena before a burst of small
 * allocations. */
#pragma once

#include <stddef.h>

/* Grows the calling thread's malloc arena by about bytes in a few large steps, then gives
 * the memory back to the arena (not to the kernel's address space): the small allocations
 * that follow find the arena already writable.  glibc grows the arena of a thread other than
 * the main one a page at a time, one mprotect() per page, and a page's worth of small
 * objects costs far less than that system call.  Best effort: nothing happens when bytes is
 * 0 or memory is short, and allocations work as before either way. */
void malloc_reserve(size_t bytes);
