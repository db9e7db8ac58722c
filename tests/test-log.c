/* test-log.c - logfmt quoting and levels of log.c, checked on a captured stderr; and the
 * journal output (JOURNAL_STREAM) received on a real datagram socket bound at journald's
 * path, /run/systemd/journal/socket, in a private mount namespace with its own /run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <cmocka.h>

#include "log.h"
#include "error.h"

static char *capture(void (*fn)(void))
{
	char path[] = "/tmp/volagent-logtest-XXXXXX";
	int fd = mkstemp(path), saved = dup(2);
	static char buf[8192];
	ssize_t n;

	unlink(path);
	dup2(fd, 2);
	fn();
	dup2(saved, 2);
	close(saved);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	close(fd);
	return buf;
}

static void emit_quoted(void)
{
	log_info("volume mounted", "target", "/var/lib/a b", "quote", "say \"hi\"", "plain", "x");
}

static void test_quoting(void **state)
{
	char *out = capture(emit_quoted);

	assert_non_null(strstr(out, "level=info msg=\"volume mounted\""));
	assert_non_null(strstr(out, " target=\"/var/lib/a b\""));
	assert_non_null(strstr(out, " quote=\"say \\\"hi\\\"\""));
	assert_non_null(strstr(out, " plain=x\n"));
}

static void emit_debug(void)
{
	log_debug("reconcile", "hidden");
	log_info("shown", "n", LOG_INT(42));
}

static void test_levels(void **state)
{
	char *out;

	log_set_level(LOG_LVL_INFO);
	out = capture(emit_debug);
	assert_null(strstr(out, "hidden"));
	assert_non_null(strstr(out, "msg=shown n=42"));
	assert_int_equal(log_set_level_name("warning"), 0);
	assert_int_equal(log_get_level(), LOG_LVL_WARNING);
	assert_int_equal(log_set_level_name("loud"), -EINVAL);
	log_set_level(LOG_LVL_INFO);
}

static void test_error_info(void **state)
{
	struct error_info e = { 0 };

	assert_string_equal(err_msg(&e), "no error");
	assert_int_equal(err_set(&e, -ENOENT, "path %s", "/x"), -ENOENT);
	assert_int_equal(err_prefix(&e, "volume %s", "data"), -ENOENT);
	assert_string_equal(err_msg(&e), "volume data: path /x");
	err_clear(&e);
	e.code = -EIO;
	assert_string_equal(err_msg(&e), strerror(EIO));
}

/* stderr on a temp file for the buffering tests; what reached it so far is read back with
 * stderr_so_far(). */
static int stderr_fd = -1, saved_stderr = -1;

static void stderr_to_file(void)
{
	char path[] = "/tmp/volagent-logtest-XXXXXX";

	stderr_fd = mkstemp(path);
	assert_true(stderr_fd >= 0);
	unlink(path);
	saved_stderr = dup(2);
	dup2(stderr_fd, 2);
}

static const char *stderr_so_far(void)
{
	static char buf[65536];
	ssize_t n = pread(stderr_fd, buf, sizeof(buf) - 1, 0);

	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static void stderr_restore(void)
{
	dup2(saved_stderr, 2);
	close(saved_stderr);
	close(stderr_fd);
}

/* Both lines are in out, first before second. */
static void assert_lines_in_order(const char *out, const char *first, const char *second)
{
	const char *a = strstr(out, first), *b = strstr(out, second);

	assert_non_null(a);
	assert_non_null(b);
	assert_true(a < b);
}

/* A buffering thread's lines reach stderr at log_flush(), in order; a warning takes what was
 * buffered before it along at once; log_buffer_stop() writes the rest. */
static void test_buffered_lines_flushed_in_order(void **state)
{
	stderr_to_file();
	assert_int_equal(log_buffer_start(), 0);
	log_info("first", "n", LOG_INT(1));
	log_info("second", "n", LOG_INT(2));
	assert_string_equal(stderr_so_far(), "");
	log_flush();
	assert_lines_in_order(stderr_so_far(), "msg=first n=1\n", "msg=second n=2\n");

	log_info("before-warning");
	assert_null(strstr(stderr_so_far(), "before-warning"));
	log_warning("the-warning");
	assert_lines_in_order(stderr_so_far(), "msg=before-warning\n",
			      "level=warning msg=the-warning\n");
	log_error("the-error");
	assert_non_null(strstr(stderr_so_far(), "level=error msg=the-error\n"));

	log_info("last");
	assert_null(strstr(stderr_so_far(), "msg=last"));
	log_buffer_stop();
	assert_non_null(strstr(stderr_so_far(), "msg=last\n"));
	/* Not buffering any more: written at once. */
	log_info("unbuffered");
	assert_non_null(strstr(stderr_so_far(), "msg=unbuffered\n"));
	stderr_restore();
}

/* A full buffer is written before the line that does not fit: whole lines, in order, none
 * lost. */
static void test_buffer_full_written_whole_lines(void **state)
{
	char want[64], pad[200];
	const char *out, *prev = NULL;
	size_t len;

	memset(pad, 'x', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = '\0';
	stderr_to_file();
	assert_int_equal(log_buffer_start(), 0);
	for (int i = 0; i < 100; i++)
		log_info("line", "i", LOG_INT(i), "pad", pad);
	/* 100 lines of ~270 bytes do not fit: some went out, each whole. */
	out = stderr_so_far();
	len = strlen(out);
	assert_true(len > 0);
	assert_true(len < 100 * 270);
	assert_int_equal(out[len - 1], '\n');
	log_buffer_stop();
	out = stderr_so_far();
	for (int i = 0; i < 100; i++) {
		const char *p;

		snprintf(want, sizeof(want), "msg=line i=%d pad=", i);
		p = strstr(out, want);
		assert_non_null(p);
		assert_true(!prev || p > prev);
		prev = p;
	}
	stderr_restore();
}

static void *log_other(void *arg)
{
	log_info("from-other-thread");
	return NULL;
}

/* Buffering is per thread: another thread's lines are written at once meanwhile. */
static void test_buffer_is_per_thread(void **state)
{
	pthread_t t;

	stderr_to_file();
	assert_int_equal(log_buffer_start(), 0);
	log_info("from-this-thread");
	assert_int_equal(pthread_create(&t, NULL, log_other, NULL), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_non_null(strstr(stderr_so_far(), "msg=from-other-thread\n"));
	assert_null(strstr(stderr_so_far(), "from-this-thread"));
	log_buffer_stop();
	assert_non_null(strstr(stderr_so_far(), "msg=from-this-thread\n"));
	stderr_restore();
}

static size_t count_of(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* A child forked by a buffering thread (a helper that logs before its exec) writes its own
 * lines only: the parent's buffered line is written once, by the parent. */
static void test_forked_child_does_not_repeat_the_buffer(void **state)
{
	int status;
	pid_t pid;

	stderr_to_file();
	assert_int_equal(log_buffer_start(), 0);
	log_info("parent-buffered");
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		log_warning("child-warning"); /* a warning is written at once */
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(count_of(stderr_so_far(), "msg=child-warning\n"), 1);
	assert_int_equal(count_of(stderr_so_far(), "parent-buffered"), 0);
	log_buffer_stop();
	assert_int_equal(count_of(stderr_so_far(), "msg=parent-buffered\n"), 1);
	stderr_restore();
}

#define JOURNAL_SOCKET "/run/systemd/journal/socket"

/* A stand-in journald: a datagram socket at journald's path, in a mount namespace of this
 * test's own (a tmpfs on /run), so that the host's /run is not touched.  -1: not root. */
static int journal_listen(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = JOURNAL_SOCKET };
	struct timeval tv = { .tv_sec = 5 };
	static int fd = -1;

	if (fd >= 0)
		return fd;
	if (geteuid() != 0 || unshare(CLONE_NEWNS) < 0)
		return -1;
	assert_int_equal(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	assert_int_equal(mount("tmpfs", "/run", "tmpfs", 0, "mode=0755"), 0);
	assert_int_equal(mkdir("/run/systemd", 0755), 0);
	assert_int_equal(mkdir("/run/systemd/journal", 0755), 0);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	return fd;
}

/* Runs fn with stderr on a temp file and JOURNAL_STREAM naming that file (match) or another
 * one; returns what reached stderr. */
static char *with_journal_stream(void (*fn)(void), bool match)
{
	char path[] = "/tmp/volagent-logtest-XXXXXX", env[64];
	int fd = mkstemp(path), saved = dup(2);
	static char buf[8192];
	struct stat st;
	ssize_t n;

	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(fstat(fd, &st), 0);
	snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino + (match ? 0 : 1));
	setenv("JOURNAL_STREAM", env, 1);
	dup2(fd, 2);
	log_init_from_env();
	fn();
	dup2(saved, 2);
	close(saved);
	unsetenv("JOURNAL_STREAM");
	log_init_from_env();
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	close(fd);
	return buf;
}

static void emit_volume(void)
{
	log_warning("volume mount failed", "volume", "data", "pod", "p-1", "target", "/var/a b",
		    "error", "mount: no such device", "message", "not the MESSAGE", "root-dir",
		    "/r", "absent", NULL, "9lives", "x");
}

static void test_journal_fields(void **state)
{
	int fd = journal_listen();
	char msg[8192], *out;
	ssize_t n;

	if (fd < 0)
		skip(); /* needs root for the namespace */
	out = with_journal_stream(emit_volume, true);
	assert_string_equal(out, ""); /* nothing on stderr: it went to the journal */
	n = recv(fd, msg, sizeof(msg) - 1, 0);
	assert_true(n > 0);
	msg[n] = '\0';
	/* One entry, in journald's native format: FIELD=value lines. */
	assert_non_null(strstr(msg, "MESSAGE=\"volume mount failed\" volume=data pod=p-1 "
				    "target=\"/var/a b\" error=\"mount: no such device\" "
				    "message=\"not the MESSAGE\" root-dir=/r 9lives=x\n"));
	assert_non_null(strstr(msg, "\nPRIORITY=4\n"));
	assert_non_null(strstr(msg, "\nSYSLOG_IDENTIFIER=volagent\n"));
	assert_non_null(strstr(msg, "\nVOLUME=data\n"));
	assert_non_null(strstr(msg, "\nPOD=p-1\n"));
	assert_non_null(strstr(msg, "\nTARGET=/var/a b\n"));
	assert_non_null(strstr(msg, "\nERROR=mount: no such device\n"));
	/* Names journald gives a meaning to, or that it would refuse, are renamed. */
	assert_non_null(strstr(msg, "\nVOLAGENT_MESSAGE=not the MESSAGE\n"));
	assert_non_null(strstr(msg, "\nROOT_DIR=/r\n"));
	assert_non_null(strstr(msg, "\nVOLAGENT_9LIVES=x\n"));
	assert_null(strstr(msg, "ABSENT"));
}

static void emit_info(void)
{
	log_info("volume mounted", "volume", "v");
	log_debug("reconcile", "hidden");
}

static void test_journal_stream_mismatch(void **state)
{
	int fd = journal_listen();
	char msg[256];
	char *out;

	if (fd < 0)
		skip();
	/* stderr was redirected since systemd started us: logfmt on stderr, as before. */
	out = with_journal_stream(emit_info, false);
	assert_non_null(strstr(out, "level=info msg=\"volume mounted\" volume=v\n"));
	assert_int_equal(recv(fd, msg, sizeof(msg), MSG_DONTWAIT), -1);
	assert_int_equal(errno, EAGAIN);
	/* A matching stream but the priority filter still applies: no debug entry. */
	out = with_journal_stream(emit_info, true);
	assert_string_equal(out, "");
	assert_true(recv(fd, msg, sizeof(msg), 0) > 0);
	assert_int_equal(recv(fd, msg, sizeof(msg), MSG_DONTWAIT), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quoting),
		cmocka_unit_test(test_levels),
		cmocka_unit_test(test_error_info),
		cmocka_unit_test(test_buffered_lines_flushed_in_order),
		cmocka_unit_test(test_buffer_full_written_whole_lines),
		cmocka_unit_test(test_buffer_is_per_thread),
		cmocka_unit_test(test_forked_child_does_not_repeat_the_buffer),
		cmocka_unit_test(test_journal_fields),
		cmocka_unit_test(test_journal_stream_mismatch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
