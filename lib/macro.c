/* macro.c - strdup_printf, the one helper of macro.h that is no inline. */
#include <stdarg.h>
#include <stdio.h>

#include "macro.h"

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
