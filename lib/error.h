/* error.h - a message buffer that travels with a negative errno out of library-like code.
 *
 * Plugins and mount helpers do not log; they return -errno and, where a user needs to know
 * more than strerror says, fill a struct error_info that the boundary (a reconcile pass, a
 * gRPC handler, main) logs once. */
#pragma once

#include <stddef.h>

struct error_info {
	int code; /* negative errno, 0 when unset */
	char msg[512];
};

/* Records code and a formatted message; returns code so callers can `return err_set(...)`.
 * err may be NULL. */
int err_set(struct error_info *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Prefixes the existing message with context: "mount_device /dev/loop3: <old msg>". */
int err_prefix(struct error_info *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void err_clear(struct error_info *err);
/* The message, or strerror(code) when no message was set. */
const char *err_msg(const struct error_info *err);
