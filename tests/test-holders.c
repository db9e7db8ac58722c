/* test-holders.c - who holds a volume: processes started here (and ended here, by PID) with
 * their cwd, an open file and a mapping in a pod's volume, and a mount stacked below its
 * target.  NodeUnpublishVolume and NodeUnstageVolume answer busy naming the PIDs and the
 * mount, `volagent status --holders` (by path and by volume) finds the same, and both calls
 * succeed once the holders are gone.  Real ext4 on a loop device through the real gRPC client;
 * runs as root in a private mount namespace. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "csi-calls.h"
#include "csi-env.h"
#include "testlib.h"

#define WAIT_MS 20000

/* The holders this test started: ended by the teardown too when an assertion failed. */
static pid_t holders[2];

static int setup(void **state)
{
	*state = csi_env_new("holders");
	return 0;
}

static void end_holder(pid_t *pid)
{
	if (*pid <= 0)
		return;
	kill(*pid, SIGKILL);
	waitpid(*pid, NULL, 0);
	*pid = 0;
}

static int teardown(void **state)
{
	for (size_t i = 0; i < 2; i++)
		end_holder(&holders[i]);
	csi_env_free(*state);
	return 0;
}

/* A process with its cwd in dir; with files, also an open file and a mapping (of another
 * file, its fd closed) in it.  Returns its PID once it holds them. */
static pid_t start_holder(const char *dir, bool files)
{
	int ready[2];
	char c;
	pid_t pid;

	assert_int_equal(pipe(ready), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(ready[0]);
		if (chdir(dir) < 0)
			_exit(1);
		if (files) {
			int fd = open("open-file", O_CREAT | O_RDWR, 0644);
			int mfd = open("mapped-file", O_CREAT | O_RDWR, 0644);
			void *p;

			if (fd < 0 || mfd < 0 || ftruncate(mfd, 4096) < 0)
				_exit(1);
			p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, mfd, 0);
			if (p == MAP_FAILED)
				_exit(1);
			close(mfd);
		}
		if (write(ready[1], "x", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(ready[1]);
	assert_int_equal(read(ready[0], &c, 1), 1);
	close(ready[0]);
	return pid;
}

/* Calls until the answer is OK (the operation's backoff may answer the old error first). */
static void call_until_ok(struct csi_env *e, const char *call)
{
	for (int i = 0; i < 100; i++) {
		char *out = csi_env_call(e, call);
		bool ok = strncmp(csi_line(out, 0), "OK", 2) == 0;

		free(out);
		if (ok)
			return;
		usleep(200 * 1000);
	}
	fail_msg("never OK: %s", call);
}

static void assert_has(const char *text, const char *want)
{
	if (!strstr(text, want))
		fail_msg("\"%s\" does not name \"%s\"", text, want);
}

/* `volagent status --holders what` names both texts. */
static void assert_holders(struct csi_env *e, const char *what, const char *a, const char *b)
{
	char *out = NULL;

	assert_int_equal(test_volagent((const char *const[]){ "status", "--state-dir", e->f->state,
							      "--holders", what, NULL },
				       &out),
			 0);
	assert_has(out, a);
	assert_has(out, b);
	free(out);
}

static void test_busy_names_holders(void **state)
{
	struct csi_env *e = *state;
	const char *dev = fixture_add_loop(e->f, 64 << 20);
	char t[700], stg[700], ctx[200], calls[4096] = "", sub[800], pidtext[64], *out = NULL;

	assert_non_null(dev);
	csi_env_target(e, "pod-a", "pv-h", t);
	csi_env_staging(e, "vol-h", stg);
	csi_env_start(e);
	csi_local_ctx(dev, ctx);
	csi_calls_stage(calls, sizeof(calls), "vol-h", stg, CSI_CAP_EXT4, ctx, NULL);
	csi_calls_publish(calls, sizeof(calls), "vol-h", stg, t, CSI_CAP_EXT4, ctx, NULL);
	csi_env_call_ok(e, calls, 2);

	/* A process in the pod's volume, and a mount below its target. */
	holders[0] = start_holder(t, true);
	snprintf(sub, sizeof(sub), "%s/sub", t);
	assert_int_equal(mkdir(sub, 0755), 0);
	assert_int_equal(mount("tmpfs", sub, "tmpfs", 0, "size=1m"), 0);

	calls[0] = '\0';
	csi_calls_unpublish(calls, sizeof(calls), "vol-h", t);
	out = csi_env_call(e, calls);
	assert_line(out, 0, "ERR FAILED_PRECONDITION");
	snprintf(pidtext, sizeof(pidtext), "pid %d (", (int)holders[0]);
	assert_line(out, 0, pidtext);
	assert_line(out, 0, "cwd .");
	assert_line(out, 0, " ./open-file");
	assert_line(out, 0, "; fd ");
	assert_line(out, 0, "mmap ./mapped-file");
	assert_line(out, 0, "mount tmpfs on ./sub (mounted below it)");
	free(out);
	/* The log says the same. */
	assert_true(fixture_wait_log(e->f, pidtext, WAIT_MS));
	assert_true(test_is_mountpoint(t));

	/* status --holders, by path and by volume id, finds them too. */
	assert_holders(e, t, pidtext, "mmap ");
	assert_holders(e, t, pidtext, "(mounted below it)");
	assert_holders(e, "vol-h", pidtext, "fd ");

	/* Gone, the unpublish goes through. */
	end_holder(&holders[0]);
	assert_int_equal(umount(sub), 0);
	call_until_ok(e, calls);
	assert_false(test_is_mountpoint(t));

	/* A process in the staging mount: the unstage is busy and names it. */
	holders[1] = start_holder(stg, false);
	calls[0] = '\0';
	csi_calls_unstage(calls, sizeof(calls), "vol-h", stg);
	out = csi_env_call(e, calls);
	snprintf(pidtext, sizeof(pidtext), "pid %d (", (int)holders[1]);
	assert_line(out, 0, "ERR FAILED_PRECONDITION");
	assert_line(out, 0, pidtext);
	free(out);
	assert_holders(e, "vol-h", pidtext, "cwd .");
	end_holder(&holders[1]);
	call_until_ok(e, calls);
	assert_false(test_is_mountpoint(stg));
	assert_int_equal(fixture_stop(e->f, SIGTERM), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_busy_names_holders, setup, teardown),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
