/* log.c - logfmt lines on stderr: ts, level, msg, then the caller's key=value pairs.  When
 * stderr is the journal (systemd's JOURNAL_STREAM names it), each event goes to journald
 * instead as one entry with its pairs as fields (VOLUME=, POD=, ...), so that
 * `journalctl -u volagent VOLUME=data` finds a volume's lines.
 *
 * A thread may buffer its stderr lines (log_buffer_start): a loop that logs many lines per
 * turn then writes them with one write(2) per turn (log_flush) instead of one per line. */
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <errno.h>

#include <systemd/sd-journal.h>

#include "file-util.h"
#include "log.h"
#include "macro.h"

static enum log_level current_level = LOG_LVL_INFO;
static char debug_subsystems[256];
static bool debug_all;
static bool to_journal;

#define MAX_PAIRS 32

static const char *const level_names[] = {
	[LOG_LVL_DEBUG] = "debug", [LOG_LVL_INFO] = "info", [LOG_LVL_WARNING] = "warning",
	[LOG_LVL_ERROR] = "error", [LOG_LVL_CRIT] = "crit",
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

/* systemd sets JOURNAL_STREAM=<dev>:<ino> of the stream it connected stderr to; a stderr
 * redirected since (a shell, a test) no longer matches and keeps the logfmt lines. */
static bool stderr_is_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
		return false;
	if (fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void log_init_from_env(void)
{
	const char *e = getenv("VOLAGENT_DEBUG");

	to_journal = stderr_is_journal();
	debug_all = false;
	debug_subsystems[0] = '\0';
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

/* MESSAGE=, PRIORITY= and the others journald gives a meaning to are not ours to set from
 * a pair: a pair with such a name becomes VOLAGENT_<NAME>. */
static const char *const reserved_fields[] = {
	"MESSAGE",
	"MESSAGE_ID",
	"PRIORITY",
	"CODE_FILE",
	"CODE_LINE",
	"CODE_FUNC",
	"ERRNO",
	"SYSLOG_FACILITY",
	"SYSLOG_IDENTIFIER",
	"SYSLOG_PID",
	"SYSLOG_TIMESTAMP",
	"SYSLOG_RAW",
	"DOCUMENTATION",
	"TID",
	"UNIT",
	"USER_UNIT",
	"INVOCATION_ID",
	"SUBSYS",
};

/* The journal field for a pair's key: upper case, [A-Z0-9_], not starting with '_' or a
 * digit, at most 64 characters ("volume" -> VOLUME, "root_dir" -> ROOT_DIR). */
static void field_name(const char *key, char *buf, size_t size)
{
	size_t n = 0;

	for (const char *p = key; *p && n + 1 < size; p++)
		buf[n++] = isalnum((unsigned char)*p) ? (char)toupper((unsigned char)*p) : '_';
	buf[n] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(reserved_fields); i++)
		if (streq(buf, reserved_fields[i]))
			goto prefix;
	if (n > 0 && buf[0] != '_' && !isdigit((unsigned char)buf[0]))
		return;
prefix:
	memmove(buf + 9, buf, size - 9 > n + 1 ? n + 1 : size - 9);
	memcpy(buf, "VOLAGENT_", 9);
	buf[size - 1] = '\0';
}

/* One journal entry: MESSAGE= is msg with the pairs in logfmt (what `journalctl` shows),
 * and each pair is a field of its own.  Returns 0, or -errno when the entry was not sent. */
static int send_journal(enum log_level level, const char *subsys, const char *msg,
			const char *const *keys, const char *const *values, size_t n)
{
	static const int priorities[] = {
		[LOG_LVL_DEBUG] = 7, [LOG_LVL_INFO] = 6, [LOG_LVL_WARNING] = 4,
		[LOG_LVL_ERROR] = 3, [LOG_LVL_CRIT] = 2,
	};
	struct iovec iov[MAX_PAIRS + 4];
	char *fields[MAX_PAIRS + 4] = { 0 };
	char message[4096], prio[16], name[80];
	size_t len = 0, k = 0;
	int r = 0;

	len = (size_t)snprintf(message, sizeof(message), "MESSAGE=");
	put_value(message, sizeof(message) - 1, &len, msg);
	for (size_t i = 0; i < n && len + 2 < sizeof(message) - 1; i++) {
		len += (size_t)snprintf(message + len, sizeof(message) - len, " %s=", keys[i]);
		put_value(message, sizeof(message) - 1, &len, values[i]);
	}
	if (len > sizeof(message) - 1)
		len = sizeof(message) - 1;
	iov[k++] = (struct iovec){ message, len };
	snprintf(prio, sizeof(prio), "PRIORITY=%d", priorities[level]);
	iov[k++] = (struct iovec){ prio, strlen(prio) };
	iov[k++] = (struct iovec){ "SYSLOG_IDENTIFIER=volagent", 26 };
	if (subsys && (fields[k] = strdup_printf("SUBSYS=%s", subsys)))
		iov[k] = (struct iovec){ fields[k], strlen(fields[k]) }, k++;
	for (size_t i = 0; i < n; i++) {
		field_name(keys[i], name, sizeof(name) - 16);
		if (!(fields[k] = strdup_printf("%s=%s", name, values[i]))) {
			r = -ENOMEM;
			goto out;
		}
		iov[k] = (struct iovec){ fields[k], strlen(fields[k]) };
		k++;
	}
	r = sd_journal_sendv(iov, (int)k);
out:
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
		free(fields[i]);
	return r;
}

/* The calling thread's buffered lines (NULL: not buffering).  At most PIPE_BUF bytes: one
 * write of that size to a pipe is atomic, so a flush never interleaves with another thread's
 * lines (a regular file's writes are atomic anyway). */
#define LOG_BUFFER_SIZE 4096
struct log_buffer {
	size_t len;
	char data[LOG_BUFFER_SIZE];
};
static __thread struct log_buffer *tbuf;

void log_flush(void)
{
	if (!tbuf || !tbuf->len)
		return;
	(void)fd_write_all(STDERR_FILENO, tbuf->data, tbuf->len);
	tbuf->len = 0;
}

/* A child forked by a buffering thread starts with a copy of the buffer: what it logs must not
 * write the parent's lines a second time. */
static void drop_buffer_in_child(void)
{
	tbuf = NULL; /* the copy goes with the child's exec or exit */
}

static void register_fork_handler(void)
{
	(void)pthread_atfork(NULL, NULL, drop_buffer_in_child);
}

int log_buffer_start(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	if (tbuf)
		return 0;
	pthread_once(&once, register_fork_handler);
	tbuf = malloc(sizeof(*tbuf));
	if (!tbuf)
		return -ENOMEM;
	tbuf->len = 0;
	return 0;
}

void log_buffer_stop(void)
{
	log_flush();
	free(tbuf);
	tbuf = NULL;
}

/* Adds a line to the thread's buffer; a warning or worse goes out at once, with what was
 * buffered before it (in order). */
static void buffer_line(enum log_level level, const char *line, size_t len)
{
	if (tbuf->len + len > sizeof(tbuf->data))
		log_flush();
	memcpy(tbuf->data + tbuf->len, line, len);
	tbuf->len += len;
	if (level >= LOG_LVL_WARNING)
		log_flush();
}

static __thread time_t stamp_sec;
static __thread char stamp[32];
static __thread size_t stamp_len;

static void write_stderr(enum log_level level, const char *subsys, const char *msg,
			 const char *const *keys, const char *const *values, size_t n)
{
	char line[4096];
	size_t len = 0;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	/* The date and time to the second, formatted once a second per thread (gmtime_r takes
	 * glibc's time zone lock). */
	if (ts.tv_sec != stamp_sec || !stamp_len) {
		struct tm tm;

		gmtime_r(&ts.tv_sec, &tm);
		stamp_len = strftime(stamp, sizeof(stamp), "ts=%Y-%m-%dT%H:%M:%S", &tm);
		stamp_sec = ts.tv_sec;
	}
	memcpy(line, stamp, stamp_len);
	len = stamp_len;
	len += (size_t)snprintf(line + len, sizeof(line) - len,
				".%03ldZ level=%s msg=", ts.tv_nsec / 1000000, level_names[level]);
	put_value(line, sizeof(line) - 2, &len, msg);
	if (subsys) {
		len += (size_t)snprintf(line + len, sizeof(line) - len, " subsys=");
		put_value(line, sizeof(line) - 2, &len, subsys);
	}
	for (size_t i = 0; i < n; i++) {
		if (len + 2 >= sizeof(line) - 2)
			break;
		len += (size_t)snprintf(line + len, sizeof(line) - len, " %s=", keys[i]);
		put_value(line, sizeof(line) - 2, &len, values[i]);
	}
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	if (tbuf) {
		buffer_line(level, line, len);
		return;
	}
	/* One write per line: lines from several threads never interleave. */
	(void)!write(STDERR_FILENO, line, len);
}

void log_event(enum log_level level, const char *subsys, const char *msg, ...)
{
	const char *keys[MAX_PAIRS], *values[MAX_PAIRS];
	size_t n = 0;
	va_list ap;
	int saved_errno = errno;

	if (level < current_level && !(level == LOG_LVL_DEBUG && log_debug_enabled(subsys)))
		return;
	va_start(ap, msg);
	for (;;) {
		const char *key = va_arg(ap, const char *);
		const char *value;

		if (!key)
			break;
		value = va_arg(ap, const char *);
		if (!value)
			continue; /* absent fields are left out, not logged empty */
		if (n < MAX_PAIRS) {
			keys[n] = key;
			values[n++] = value;
		}
	}
	va_end(ap);
	/* A refused entry (too big, out of memory) still goes somewhere.  An absent journald is
	 * not reported by sd_journal_sendv: its stderr stream would be gone too. */
	if (!to_journal || send_journal(level, subsys, msg, keys, values, n) < 0)
		write_stderr(level, subsys, msg, keys, values, n);
	errno = saved_errno;
}
