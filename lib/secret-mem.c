/* secret-mem.c - see secret-mem.h.  The mapping's length is kept just before the memory. */
#include <string.h>
#include <sys/mman.h>

#include "secret-mem.h"

void *secret_mem_alloc(size_t size)
{
	size_t total = size + sizeof(size_t);
	size_t *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	(void)madvise(p, total, MADV_DONTDUMP);
	*p = total;
	return p + 1;
}

void secret_mem_free(void *mem)
{
	size_t *p = mem ? (size_t *)mem - 1 : NULL;

	if (!p)
		return;
	explicit_bzero(mem, *p - sizeof(size_t));
	munmap(p, *p);
}
