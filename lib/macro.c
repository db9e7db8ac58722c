/* macro.c - allocation helpers declared in macro.h. */
#include <stdarg.h>
#include <stdio.h>

#include "macro.h"
#include "log.h"

void *xmalloc0(size_t size)
{
	void *p = calloc(1, size ? size : 1);
	if (!p) {
		log_crit("out of memory");
		abort();
	}
	return p;
}

char *xstrdup(const char *s)
{
	char *p;

	if (!s)
		return NULL;
	p = strdup(s);
	if (!p) {
		log_crit("out of memory");
		abort();
	}
	return p;
}

char *strdup_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&s, fmt, ap);
	va_end(ap);
	return r < 0 ? NULL : s;
}
