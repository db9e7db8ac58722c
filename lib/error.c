/* error.c - see error.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

int err_set(struct error_info *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return code;
}

int err_prefix(struct error_info *err, const char *fmt, ...)
{
	char prefix[256], old[sizeof(err->msg)];
	va_list ap;

	if (!err)
		return 0;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	snprintf(old, sizeof(old), "%s", err_msg(err));
	if (snprintf(err->msg, sizeof(err->msg), "%s: %s", prefix, old) >= (int)sizeof(err->msg))
		err->msg[sizeof(err->msg) - 1] = '\0'; /* truncated, still terminated */
	return err->code;
}

void err_clear(struct error_info *err)
{
	if (!err)
		return;
	err->code = 0;
	err->msg[0] = '\0';
}

const char *err_msg(const struct error_info *err)
{
	if (err->msg[0])
		return err->msg;
	return err->code ? strerror(-err->code) : "no error";
}
