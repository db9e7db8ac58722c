/* log.c - logfmt lines on stderr: ts, level, msg, then the caller's key=value pairs. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <errno.h>

#include "log.h"
#include "macro.h"

static enum log_level current_level = LOG_LVL_INFO;
static char debug_subsystems[256];
static bool debug_all;

static const char *const level_names[] = {
	[LOG_LVL_DEBUG] = "debug",
	[LOG_LVL_INFO] = "info",
	[LOG_LVL_WARNING] = "warning",
	[LOG_LVL_ERROR] = "error",
	[LOG_LVL_CRIT] = "crit",
};

int log_set_level_name(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(level_names); i++)
		if (streq(name, level_names[i]) && i != LOG_LVL_CRIT) {
			current_level = (enum log_level)i;
			return 0;
		}
	return -EINVAL;
}

void log_set_level(enum log_level level)
{
	current_level = level;
}

enum log_level log_get_level(void)
{
	return current_level;
}

void log_init_from_env(void)
{
	const char *e = getenv("VOLAGENT_DEBUG");

	if (!e || !*e)
		return;
	if (streq(e, "all") || streq(e, "1")) {
		debug_all = true;
		return;
	}
	snprintf(debug_subsystems, sizeof(debug_subsystems), ",%s,", e);
}

bool log_debug_enabled(const char *subsys)
{
	char key[64];

	if (current_level <= LOG_LVL_DEBUG || debug_all)
		return true;
	if (!debug_subsystems[0] || !subsys)
		return false;
	snprintf(key, sizeof(key), ",%s,", subsys);
	return strstr(debug_subsystems, key) != NULL;
}

const char *log_fmt_int(char *buf, long long v)
{
	snprintf(buf, 24, "%lld", v);
	return buf;
}

/* Appends s to the line, quoted when logfmt needs it. */
static void put_value(char *line, size_t size, size_t *len, const char *s)
{
	bool quote = !*s;

	for (const char *p = s; *p && !quote; p++)
		if (*p == ' ' || *p == '"' || *p == '=' || *p == '\\' || (unsigned char)*p < 0x20)
			quote = true;
	if (!quote) {
		*len += (size_t)snprintf(line + *len, *len < size ? size - *len : 0, "%s", s);
		return;
	}
	if (*len < size)
		line[(*len)++] = '"';
	for (const char *p = s; *p && *len + 4 < size; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '"' || c == '\\') {
			line[(*len)++] = '\\';
			line[(*len)++] = (char)c;
		} else if (c == '\n') {
			line[(*len)++] = '\\';
			line[(*len)++] = 'n';
		} else if (c < 0x20) {
			line[(*len)++] = '?';
		} else {
			line[(*len)++] = (char)c;
		}
	}
	if (*len < size)
		line[(*len)++] = '"';
}

void log_event(enum log_level level, const char *subsys, const char *msg, ...)
{
	char line[4096];
	size_t len = 0;
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int saved_errno = errno;

	if (level < current_level && !(level == LOG_LVL_DEBUG && log_debug_enabled(subsys)))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	len = strftime(line, sizeof(line), "ts=%Y-%m-%dT%H:%M:%S", &tm);
	len += (size_t)snprintf(line + len, sizeof(line) - len, ".%03ldZ level=%s msg=",
				ts.tv_nsec / 1000000, level_names[level]);
	put_value(line, sizeof(line) - 2, &len, msg);
	if (subsys) {
		len += (size_t)snprintf(line + len, sizeof(line) - len, " subsys=");
		put_value(line, sizeof(line) - 2, &len, subsys);
	}
	va_start(ap, msg);
	for (;;) {
		const char *key = va_arg(ap, const char *);
		const char *value;

		if (!key)
			break;
		value = va_arg(ap, const char *);
		if (!value)
			continue; /* absent fields are left out, not logged empty */
		if (len + 2 >= sizeof(line) - 2)
			break;
		len += (size_t)snprintf(line + len, sizeof(line) - len, " %s=", key);
		put_value(line, sizeof(line) - 2, &len, value);
	}
	va_end(ap);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	/* One write per line: lines from several threads never interleave. */
	(void)!write(STDERR_FILENO, line, len);
	errno = saved_errno;
}
