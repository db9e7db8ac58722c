/* log.h - one line per event, in logfmt (key=value), to stderr.
 *
 *   log_info("volume mounted", "volume", name, "pod", uid, "target", dir);
 *
 * Keys and values are strings, in pairs; numbers go through LOG_INT(); a pair whose value is
 * NULL is left out.  Values are quoted and
 * escaped as logfmt requires, so paths with spaces or quotes stay one field.  Never pass a
 * secret: nothing here can tell one from a path.
 *
 * VOLAGENT_DEBUG=reconcile,executor,... (or "all") turns on debug lines per subsystem, which
 * cost one flag test when off (libmount's LIBMOUNT_DEBUG does the same). */
#pragma once

#include <stdbool.h>

enum log_level {
	LOG_LVL_DEBUG,
	LOG_LVL_INFO,
	LOG_LVL_WARNING,
	LOG_LVL_ERROR,
	LOG_LVL_CRIT
};

/* Returns 0, or -EINVAL when name is not a level (debug, info, warning, error). */
int log_set_level_name(const char *name);
void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* Reads VOLAGENT_DEBUG; called once by main and by tests. */
void log_init_from_env(void);
bool log_debug_enabled(const char *subsys);

/* The key/value list ends at the first NULL key; the macros add that NULL. */
void log_event(enum log_level level, const char *subsys, const char *msg, ...);

#define log_debug(subsys, msg, ...)                                                         \
	do {                                                                                \
		if (log_debug_enabled(subsys))                                              \
			log_event(LOG_LVL_DEBUG, subsys, msg, ##__VA_ARGS__, (char *)NULL); \
	} while (0)
#define log_info(msg, ...) log_event(LOG_LVL_INFO, NULL, msg, ##__VA_ARGS__, (char *)NULL)
#define log_warning(msg, ...) log_event(LOG_LVL_WARNING, NULL, msg, ##__VA_ARGS__, (char *)NULL)
#define log_error(msg, ...) log_event(LOG_LVL_ERROR, NULL, msg, ##__VA_ARGS__, (char *)NULL)
#define log_crit(msg, ...) log_event(LOG_LVL_CRIT, NULL, msg, ##__VA_ARGS__, (char *)NULL)

/* Buffers the calling thread's stderr lines until log_flush(), so that a loop writes a turn's
 * lines at once: a warning or worse is written at once (with the lines before it), and a full
 * buffer too.  The journal (JOURNAL_STREAM) is not buffered.  The thread flushes before it
 * waits and calls log_buffer_stop() before it ends, so that no line is lost on a normal stop.
 * Returns: 0 on success, -ENOMEM (the thread's lines are then written one by one). */
int log_buffer_start(void);
/* Writes the calling thread's buffered lines, if any. */
void log_flush(void);
/* Flushes and stops buffering for the calling thread. */
void log_buffer_stop(void);

const char *log_fmt_int(char *buf, long long v);
#define LOG_INT(n) log_fmt_int((char[24]){ 0 }, (long long)(n))
