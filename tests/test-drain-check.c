/* test-drain-check.c - may this node be drained, and lost stages.  A real ext4 volume on a
 * loop device staged and published through the real gRPC client: `volagent drain-check` exits
 * 1 listing it while it is published, and while it is staged only; 0 when nothing is left;
 * --wait waits for the unstage; volagent_volumes_on_node says the same count.  Staged with no
 * pod for longer than a short --stale-stage-after, it is shown as lost in status, the metric
 * and once in the log, and stays staged.  Runs as root in a private mount namespace. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "csi-calls.h"
#include "csi-env.h"
#include "testlib.h"

#define WAIT_MS 20000

static int setup(void **state)
{
	*state = csi_env_new("drain");
	return 0;
}

/* `volagent drain-check --state-dir S [extra]`: its exit code, its output in *ret_out. */
static int drain_check(struct csi_env *e, const char *extra, char **ret_out)
{
	const char *args[6] = { "drain-check", "--state-dir", e->f->state };
	size_t n = 3;

	if (extra) {
		args[n++] = "--wait";
		args[n++] = extra;
	}
	args[n] = NULL;
	return test_volagent(args, ret_out);
}

static void assert_has(const char *text, const char *want)
{
	if (!strstr(text, want))
		fail_msg("\"%s\" does not have \"%s\"", text, want);
}

/* The value of metric name in the agent's /metrics, or -1. */
static long long metric(struct csi_env *e, const char *name)
{
	char sock[700], *out = NULL, *p;
	long long v = -1;

	snprintf(sock, sizeof(sock), "%s/metrics.sock", e->f->state);
	if (test_run_capture((const char *const[]){ "curl", "-s", "--unix-socket", sock,
						    "http://agent/metrics", NULL },
			     &out) != 0)
		return -1;
	for (p = out; (p = strstr(p, name)); p++)
		if ((p == out || p[-1] == '\n') && p[strlen(name)] == ' ') {
			v = atoll(p + strlen(name) + 1);
			break;
		}
	free(out);
	return v;
}

struct metric_wait {
	struct csi_env *e;
	const char *name;
	long long want;
};

static bool metric_is(void *arg)
{
	struct metric_wait *w = arg;

	return metric(w->e, w->name) == w->want;
}

static void wait_metric(struct csi_env *e, const char *name, long long want)
{
	struct metric_wait w = { e, name, want };

	if (!test_wait_until(metric_is, &w, WAIT_MS))
		fail_msg("%s is %lld, wanted %lld", name, metric(e, name), want);
}

static void test_drain_check_and_lost_stage(void **state)
{
	struct csi_env *e = *state;
	const char *dev = fixture_add_loop(e->f, 64 << 20);
	char t[700], stg[700], ctx[200], calls[4096] = "", *out = NULL;
	pid_t waiter;
	int status;

	assert_non_null(dev);
	assert_int_equal(test_write_file(e->f->config, "{\"stale-stage-after\": \"2s\", "
						       "\"resync-interval\": \"500ms\"}\n"),
			 0);
	csi_env_target(e, "pod-a", "pv-d", t);
	csi_env_staging(e, "vol-d", stg);
	csi_env_start(e);

	/* Nothing on the node. */
	assert_int_equal(drain_check(e, NULL, &out), 0);
	assert_has(out, "it may be drained");
	free(out);
	wait_metric(e, "volagent_volumes_on_node", 0);

	/* Published. */
	csi_local_ctx(dev, ctx);
	csi_calls_stage(calls, sizeof(calls), "vol-d", stg, CSI_CAP_EXT4, ctx, NULL);
	csi_calls_publish(calls, sizeof(calls), "vol-d", stg, t, CSI_CAP_EXT4, ctx, NULL);
	csi_env_call_ok(e, calls, 2);
	assert_int_equal(drain_check(e, NULL, &out), 1);
	assert_has(out, "1 volume(s) still on this node");
	assert_has(out, "csi:vol-d");
	assert_has(out, "published for pod pod-a at ");
	assert_has(out, "staged at ");
	free(out);
	wait_metric(e, "volagent_volumes_on_node", 1);

	/* Staged only: still not drained; after the threshold, a lost stage, logged once. */
	calls[0] = '\0';
	csi_calls_unpublish(calls, sizeof(calls), "vol-d", t);
	csi_env_call_ok(e, calls, 1);
	assert_int_equal(drain_check(e, "1", &out), 1);
	assert_has(out, "staged at ");
	assert_true(strstr(out, "published for pod") == NULL);
	free(out);
	assert_true(fixture_wait_count(e->f, "stale_stages", 1, WAIT_MS));
	wait_metric(e, "volagent_stale_stages", 1);
	assert_true(fixture_wait_log(e->f, "volume staged with no pod publishing it", WAIT_MS));
	/* Several passes later (resync every 500 ms): still once, and still staged. */
	usleep(1500 * 1000);
	assert_int_equal(fixture_log_count(e->f, "volume staged with no pod publishing it"), 1);
	assert_true(test_is_mountpoint(stg));
	assert_int_equal(drain_check(e, NULL, &out), 1);
	assert_has(out, "kubelet may have lost track of it");
	free(out);

	/* drain-check --wait returns 0 once kubelet unstages it. */
	waiter = fork();
	assert_true(waiter >= 0);
	if (waiter == 0) {
		if (!freopen("/dev/null", "w", stdout))
			_exit(127);
		execl(test_volagent_bin(), "volagent", "drain-check", "--state-dir", e->f->state,
		      "--wait", "60", (char *)NULL);
		_exit(127);
	}
	usleep(300 * 1000);
	assert_int_equal(waitpid(waiter, &status, WNOHANG), 0); /* still waiting */
	calls[0] = '\0';
	csi_calls_unstage(calls, sizeof(calls), "vol-d", stg);
	csi_env_call_ok(e, calls, 1);
	assert_int_equal(waitpid(waiter, &status, 0), waiter);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_true(fixture_wait_log(e->f, "lost stage is published or unstaged again", WAIT_MS));
	wait_metric(e, "volagent_volumes_on_node", 0);
	wait_metric(e, "volagent_stale_stages", 0);
	assert_int_equal(drain_check(e, NULL, &out), 0);
	free(out);
	assert_int_equal(fixture_stop(e->f, SIGTERM), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_drain_check_and_lost_stage, setup,
						csi_env_teardown),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
