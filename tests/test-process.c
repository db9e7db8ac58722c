/* test-process.c - the process runner (lib/process.c) with real children: exit codes and
 * signals, output capture and its bound, stdin, a missing program, the deadline killing a
 * `sleep`, a child that ignores SIGTERM escalated to SIGKILL, a helper that leaves a daemon
 * holding the output pipe, function children and their results; and after each case no child
 * of ours is left, not even a zombie. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fs-probe.h"
#include "process.h"
#include "time-util.h"

static long scale(void)
{
	const char *s = getenv("TEST_TIME_SCALE");
	long v = s ? atol(s) : 1;

	return v > 0 ? v : 1;
}

/* No child of this process is left, running or zombie. */
static void assert_no_children(void)
{
	int status;

	assert_int_equal(waitpid(-1, &status, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
}

static bool group_gone(pid_t pgid, long timeout_ms)
{
	uint64_t end = now_ms() + (uint64_t)timeout_ms;

	while (kill(-pgid, 0) == 0 || errno != ESRCH) {
		if (now_ms() >= end)
			return false;
		usleep(10 * 1000);
	}
	return true;
}

static int teardown(void **state)
{
	assert_no_children();
	return 0;
}

static void test_exit_codes_and_output(void **state)
{
	char out[256];

	assert_int_equal(process_run((const char *const[]){ "true", NULL }, NULL, out, sizeof(out)),
			 0);
	assert_string_equal(out, "");
	assert_int_equal(process_run((const char *const[]){ "sh", "-c",
							    "echo out; echo err >&2; "
							    "exit 3",
							    NULL },
				     NULL, out, sizeof(out)),
			 3);
	assert_string_equal(out, "out\nerr\n");
	/* Killed by a signal: 128 + N, as a shell says it. */
	assert_int_equal(process_run((const char *const[]){ "sh", "-c", "kill -9 $$", NULL }, NULL,
				     NULL, 0),
			 128 + SIGKILL);
}

static void test_missing_program(void **state)
{
	char out[64] = "x";
	struct process p;
	struct error_info err = { 0 };

	assert_int_equal(process_run((const char *const[]){ "volagent-no-such-program", NULL },
				     NULL, out, sizeof(out)),
			 -ENOENT);
	assert_string_equal(out, "");
	assert_int_equal(process_start(&p,
				       (const char *const[]){ "volagent-no-such-program", NULL },
				       NULL, &err),
			 -ENOENT);
	assert_non_null(strstr(err_msg(&err), "volagent-no-such-program: not found"));
	process_done(&p);
	/* Found but not executable. */
	assert_int_equal(process_run((const char *const[]){ "/etc/passwd", NULL }, NULL, NULL, 0),
			 -EACCES);
}

static void test_output_is_bounded_and_stdin_is_fed(void **state)
{
	struct process_options o = { .output_max = 100 };
	char out[4096];
	static char input[300000]; /* more than a pipe holds: written while it reads */

	/* 200 KB of output, 100 bytes kept; the child is not blocked on a full pipe. */
	assert_int_equal(process_run((const char *const[]){ "sh", "-c",
							    "head -c 200000 /dev/zero | tr "
							    "'\\0' a",
							    NULL },
				     &o, out, sizeof(out)),
			 0);
	assert_int_equal(strlen(out), 100);
	memset(input, 'b', sizeof(input));
	o = (struct process_options){ .stdin_data = input, .stdin_len = sizeof(input) };
	assert_int_equal(process_run((const char *const[]){ "wc", "-c", NULL }, &o, out,
				     sizeof(out)),
			 0);
	assert_int_equal(atol(out), (long)sizeof(input));
	/* Without stdin data, stdin is /dev/null: cat ends at once. */
	assert_int_equal(process_run((const char *const[]){ "cat", NULL }, NULL, out, sizeof(out)),
			 0);
	assert_string_equal(out, "");
}

static void test_deadline_kills_sleep(void **state)
{
	struct process_options o = { .timeout_ms = 200 * scale() };
	char out[64];
	uint64_t t0 = now_ms();

	assert_int_equal(process_run((const char *const[]){ "sh", "-c", "echo going; exec sleep 30",
							    NULL },
				     &o, out, sizeof(out)),
			 -ETIMEDOUT);
	assert_true(now_ms() - t0 < 5000 * (uint64_t)scale());
	assert_string_equal(out, "going\n"); /* what it said before the deadline is kept */
}

/* Starts `sh -c script` in p. */
static void start_sh(struct process *p, const struct process_options *o, const char *script)
{
	assert_int_equal(process_start(p, (const char *const[]){ "sh", "-c", script, NULL }, o,
				       NULL),
			 0);
}

static void test_sigterm_ignored_escalates_to_sigkill(void **state)
{
	struct process_options o = { .timeout_ms = 100 * scale(), .kill_grace_ms = 300 };
	struct process p;
	uint64_t t0;
	pid_t pid;

	/* An ignored signal stays ignored across exec: neither sh nor its sleep takes SIGTERM. */
	start_sh(&p, &o, "trap '' TERM; echo ready; sleep 30; echo survived");
	pid = p.pid;
	assert_int_equal(process_wait(&p, o.timeout_ms), 0);
	t0 = now_ms();
	process_stop(&p);
	assert_true(p.done);
	assert_true(now_ms() - t0 >= 300); /* the grace was given */
	assert_true(WIFSIGNALED(p.wait_status));
	assert_int_equal(WTERMSIG(p.wait_status), SIGKILL);
	assert_int_equal(process_exit_code(&p), 128 + SIGKILL);
	assert_non_null(strstr(p.output, "ready"));
	assert_null(strstr(p.output, "survived"));
	/* The whole group is gone, the sleep too (once init has reaped it). */
	assert_true(group_gone(pid, 2000 * scale()));
	process_done(&p);
}

static void test_sigterm_is_enough_for_most(void **state)
{
	struct process_options o = { .timeout_ms = 100 * scale(), .kill_grace_ms = 10000 };
	struct process p;
	uint64_t t0;

	assert_int_equal(process_start(&p, (const char *const[]){ "sleep", "30", NULL }, &o, NULL),
			 0);
	assert_int_equal(process_wait(&p, o.timeout_ms), 0);
	t0 = now_ms();
	process_stop(&p);
	assert_true(now_ms() - t0 < 5000); /* it did not wait out the 10 s grace */
	assert_int_equal(WTERMSIG(p.wait_status), SIGTERM);
	process_done(&p);
}

static void test_daemon_keeping_the_pipe(void **state)
{
	/* Like rbd-nbd: the helper exits, a daemon it started keeps our stdout open. */
	struct process_options o = { .timeout_ms = 10000 * scale() };
	struct process p;
	uint64_t t0 = now_ms();
	pid_t pgid;

	start_sh(&p, &o, "sleep 30 & echo mapped /dev/x");
	pgid = p.pid;
	assert_int_equal(process_wait(&p, o.timeout_ms), 1);
	assert_true(now_ms() - t0 < 5000);
	assert_int_equal(process_exit_code(&p), 0);
	assert_string_equal(p.output, "mapped /dev/x\n");
	process_done(&p);
	/* The daemon is not our child (it was sh's): end it by its group. */
	assert_int_equal(kill(-pgid, SIGKILL), 0);
}

struct fn_result {
	int answer;
	char text[32];
};

static int fn_ok(void *arg, void *result, struct error_info *err)
{
	struct fn_result *res = result;

	printf("child says hi\n");
	fflush(stdout);
	res->answer = *(int *)arg * 2;
	snprintf(res->text, sizeof(res->text), "pid %d", (int)getpid());
	return 0;
}

static int fn_fails(void *arg, void *result, struct error_info *err)
{
	return err_set(err, -EACCES, "access denied by server while mounting %s", (char *)arg);
}

static int fn_hangs(void *arg, void *result, struct error_info *err)
{
	pause();
	return 0;
}

/* Dies without a result (SIGKILL: cmocka's handlers for SIGSEGV are inherited). */
static int fn_crashes(void *arg, void *result, struct error_info *err)
{
	raise(SIGKILL);
	return 0;
}

static void test_function_children(void **state)
{
	struct process_options o = { .timeout_ms = 5000 * scale(), .kill_at_once = true };
	struct fn_result res = { 0 };
	struct error_info err = { 0 };
	char out[128];
	int in = 21;
	uint64_t t0;

	assert_int_equal(process_run_fn(fn_ok, &in, &res, sizeof(res), &o, &err, out, sizeof(out)),
			 0);
	assert_int_equal(res.answer, 42);
	assert_true(strncmp(res.text, "pid ", 4) == 0 && atoi(res.text + 4) != (int)getpid());
	assert_string_equal(out, "child says hi\n");

	assert_int_equal(process_run_fn(fn_fails, "srv:/x", NULL, 0, &o, &err, NULL, 0), -EACCES);
	assert_string_equal(err_msg(&err), "access denied by server while mounting srv:/x");

	err_clear(&err);
	assert_int_equal(process_run_fn(fn_crashes, NULL, NULL, 0, &o, &err, NULL, 0), -EIO);
	assert_non_null(strstr(err_msg(&err), "killed by signal"));

	o.timeout_ms = 100 * scale();
	t0 = now_ms();
	err_clear(&err);
	assert_int_equal(process_run_fn(fn_hangs, NULL, NULL, 0, &o, &err, NULL, 0), -ETIMEDOUT);
	assert_true(now_ms() - t0 < 3000 * (uint64_t)scale());
	assert_int_equal(err.code, 0); /* the caller says what it waited for */
	assert_int_equal(process_stuck_count(), 0);
}

/* fs_probe runs its statx/statfs in a function child: the result comes back whole. */
static void test_fs_probe_through_the_runner(void **state)
{
	struct fs_probe_result res;
	struct stat st;

	assert_int_equal(fs_probe("/proc", 5000 * (int)scale(), &res), 0);
	assert_int_equal(res.error, 0);
	assert_true(res.mount_root);
	assert_int_equal(res.fs_type, 0x9fa0); /* PROC_SUPER_MAGIC */
	assert_int_equal(stat("/proc", &st), 0);
	assert_true(res.dev == st.st_dev);
	assert_int_equal(fs_probe("/", 5000 * (int)scale(), &res), 0);
	assert_true(res.bytes_total > 0 && res.inodes_total > 0);
	assert_int_equal(fs_probe("/nonexistent/volagent", 5000 * (int)scale(), &res), 0);
	assert_int_equal(res.error, -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_exit_codes_and_output, teardown),
		cmocka_unit_test_teardown(test_missing_program, teardown),
		cmocka_unit_test_teardown(test_output_is_bounded_and_stdin_is_fed, teardown),
		cmocka_unit_test_teardown(test_deadline_kills_sleep, teardown),
		cmocka_unit_test_teardown(test_sigterm_ignored_escalates_to_sigkill, teardown),
		cmocka_unit_test_teardown(test_sigterm_is_enough_for_most, teardown),
		cmocka_unit_test_teardown(test_daemon_keeping_the_pipe, teardown),
		cmocka_unit_test_teardown(test_function_children, teardown),
		cmocka_unit_test_teardown(test_fs_probe_through_the_runner, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
