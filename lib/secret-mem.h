/* secret-mem.h - memory for secrets (a Ceph key, a CSI request's `secrets`): pages of their
 * own, marked MADV_DONTDUMP so that a core dump of the daemon never holds them, and wiped
 * when freed.  Each allocation is at least one page: for the few secrets a volume has. */
#pragma once

#include <stddef.h>

/* size bytes, zeroed, left out of core dumps.  Returns NULL on ENOMEM. */
void *secret_mem_alloc(size_t size);

/* Wipes and unmaps what secret_mem_alloc returned.  Accepts NULL. */
void secret_mem_free(void *p);
