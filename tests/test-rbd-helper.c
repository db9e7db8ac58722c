/* test-rbd-helper.c - `volagent rbd-helper` and the daemon's side of it (rbd-cluster.c),
 * against a real cluster: its answers (check, watchers with a real watcher, blocklist, the
 * errors a user can act on), a bad request named by field, a helper past its deadline and a
 * helper that crashes (both forced through VOLAGENT_RBD_HELPER_FAULT, a switch of the test build
 * build/volagent-test only:
 * a hang or crash of librados cannot be produced on demand), and, through the whole agent,
 * that such a failure leaves the daemon alive, the volume is retried and mounts, and the
 * daemon never maps librbd or librados; and an agent killed while an attach looks for its
 * own client among the image's watchers (the helper hung there on purpose) is followed by
 * one that adopts the mapping from its record.  Run by tests/rbd/run.sh; root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "check-util.h"
#include "macro.h"
#include "process.h"
#include "rbd-cluster.h"
#include "rbd/rbd-testlib.h"
#include "testlib.h"

#define WAIT_MS 60000
#define FAULT_ENV "VOLAGENT_RBD_HELPER_FAULT"

static int image_seq;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double time_scale(void)
{
	const char *s = getenv("TEST_TIME_SCALE");

	return s && atof(s) > 0 ? atof(s) : 1.0;
}

static struct rbd_cluster *connect_as(const char *key, uint64_t timeout_ms)
{
	struct rbd_cluster *c = NULL;

	assert_int_equal(rbd_cluster_connect(&(struct rbd_credentials){ .monitors = rt.mon,
									.user = "admin",
									.key = key },
					     timeout_ms, &c, NULL),
			 0);
	return c;
}

static void new_image(char *name, size_t len)
{
	snprintf(name, len, "helper%d-%d", (int)getpid(), image_seq++);
	assert_int_equal(rt_create_image(name, 16), 0);
}

/* The answers, for real: a watcher the test holds is listed, fencing works, errors name
 * the reason and never the key. */
static void test_answers(void **state)
{
	_cleanup_rbd_cluster_ struct rbd_cluster *c = connect_as(rt.key, 20000);
	_cleanup_rbd_cluster_ struct rbd_cluster *bad = NULL;
	struct error_info err = { 0 };
	struct rbd_watcher *w = NULL;
	rbd_image_t held;
	char image[64];
	size_t n = 99;

	new_image(image, sizeof(image));
	assert_int_equal(rbd_cluster_check(c, &err), 0);
	assert_int_equal(rbd_cluster_watchers(c, rt.pool, image, &w, &n, &err), 0);
	assert_int_equal(n, 0);
	free(w);

	held = rt_hold(image);
	assert_non_null(held);
	assert_int_equal(rbd_cluster_watchers(c, rt.pool, image, &w, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(rt_watchers(image), 1);
	assert_non_null(strchr(w[0].addr, '/'));
	assert_true(w[0].id > 0);
	print_message("watcher: client.%lld at %s\n", (long long)w[0].id, w[0].addr);
	free(w);
	rbd_close(held);

	/* An address nobody uses, for a second: needs the osd blocklist cap, admin has it. */
	assert_int_equal(rbd_cluster_blocklist(c, "127.0.0.1:0/4242", 1), 0);

	err_clear(&err);
	assert_int_equal(rbd_cluster_watchers(c, rt.pool, "no-such-image", &w, &n, &err), -ENOENT);
	print_message("missing image: %s\n", err.msg);
	assert_non_null(strstr(err.msg, "image \"no-such-image\" does not exist in pool"));
	err_clear(&err);
	assert_int_equal(rbd_cluster_watchers(c, "no-such-pool", image, &w, &n, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "pool \"no-such-pool\" does not exist"));

	/* A key the monitors refuse: -EACCES, the key not in the message. */
	bad = connect_as("AQBYCANrUIBsGBAAxS3FZP1dXO7jUpppFtv51g==", 3000);
	err_clear(&err);
	assert_int_equal(rbd_cluster_check(bad, &err), -EACCES);
	print_message("wrong key: %s\n", err.msg);
	assert_non_null(strstr(err.msg, "authentication as client.admin"));
	assert_null(strstr(err.msg, "AQBYCANrUIBs"));
}

/* The helper itself: a bad request is refused with exit 2 and names the field; the key goes
 * on stdin, so its command line holds none. */
static void test_bad_request(void **state)
{
	const char *argv[] = { test_volagent_bin(), "rbd-helper", "watchers", NULL };
	const char *req = "{\"monitors\":\"127.0.0.1:9\",\"user\":\"admin\",\"timeout_ms\":1000,"
			  "\"image\":\"x\"}";
	struct process_options opts = { .timeout_ms = 10000,
					.stdin_data = req,
					.stdin_len = strlen(req) };
	char out[4096];

	assert_int_equal(process_run(argv, &opts, out, sizeof(out)), 2);
	print_message("%s", out);
	assert_non_null(strstr(out, "\"ok\":false"));
	assert_non_null(strstr(out, "request: pool: required for watchers"));

	opts.stdin_data = "[1]";
	opts.stdin_len = 3;
	assert_int_equal(process_run(argv, &opts, out, sizeof(out)), 2);
	assert_non_null(strstr(out, "request: not a JSON object"));

	argv[2] = "format";
	assert_int_equal(process_run(argv, &opts, out, sizeof(out)), 2);
	assert_non_null(strstr(out, "unknown operation"));
}

/* A helper that hangs (forced) is killed at its deadline: -ETIMEDOUT, named, no process
 * left behind. */
static void test_deadline(void **state)
{
	_cleanup_rbd_cluster_ struct rbd_cluster *c = connect_as(rt.key, 1000);
	struct error_info err = { 0 };
	double t0, took;

	setenv(FAULT_ENV, "hang", 1);
	t0 = now_s();
	assert_int_equal(rbd_cluster_check(c, &err), -ETIMEDOUT);
	took = now_s() - t0;
	unsetenv(FAULT_ENV);
	print_message("after %.1fs: %s\n", took, err.msg);
	assert_non_null(strstr(err.msg, "rbd-helper check ran past its deadline of 6.0s"));
	assert_true(took >= 5.9 &&
		    took < 6.0 + (PROCESS_KILL_GRACE_MS / 1000.0 + 2) * time_scale());
	assert_int_equal(process_stuck_count(), 0);
	/* The next call works. */
	assert_int_equal(rbd_cluster_check(c, &err), 0);
}

/* A helper that crashes (forced abort) fails the call with -EIO, named. */
static void test_crash(void **state)
{
	_cleanup_rbd_cluster_ struct rbd_cluster *c = connect_as(rt.key, 20000);
	struct error_info err = { 0 };
	struct rbd_watcher *w = NULL;
	size_t n = 0;

	setenv(FAULT_ENV, "abort", 1);
	assert_int_equal(rbd_cluster_watchers(c, rt.pool, "any", &w, &n, &err), -EIO);
	unsetenv(FAULT_ENV);
	print_message("%s\n", err.msg);
	assert_non_null(strstr(err.msg, "rbd-helper watchers crashed (signal 6"));
}

/* A failed assertion skips the test's own unsetenv: no later test may inherit the fault. */
static int unset_fault(void **state)
{
	unsetenv(FAULT_ENV);
	return 0;
}

/* --- through the agent --- */

struct agent_ctx {
	struct agent_fixture *f;
	char keyfile[600];
	char image[64];
	char run_dir[600];
	char fault_file[600];
};

static int agent_setup(void **state)
{
	struct agent_ctx *c = calloc(1, sizeof(*c));

	c->f = fixture_new("rbdh");
	snprintf(c->keyfile, sizeof(c->keyfile), "%s/admin.key", c->f->dir);
	snprintf(c->run_dir, sizeof(c->run_dir), "%s/rbd", c->f->state);
	snprintf(c->fault_file, sizeof(c->fault_file), "%s/fault-once", c->f->dir);
	test_write_file(c->keyfile, rt.key);
	new_image(c->image, sizeof(c->image));
	*state = c;
	return 0;
}

static int agent_teardown(void **state)
{
	struct agent_ctx *c = *state;
	char cmd[1400];
	const char *argv[] = { "sh", "-c", cmd, NULL };

	unsetenv(FAULT_ENV);
	if (c->f->agent.pid > 0)
		fixture_stop(c->f, SIGTERM);
	snprintf(cmd, sizeof(cmd),
		 "awk -v d=%s/ 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r | "
		 "xargs -r -n1 umount -l; losetup -nl -O NAME,BACK-FILE | awk -v p=%s/ "
		 "'index($2, p) == 1 {print $1}' | xargs -r -n1 losetup -d",
		 c->f->root, c->run_dir);
	test_run(argv);
	rt_fuse_kill(c->run_dir, SIGTERM);
	usleep(300 * 1000);
	rt_fuse_kill(c->run_dir, SIGKILL);
	assert_false(test_agent_log_contains(&c->f->agent, rt.key));
	fixture_free(c->f);
	free(c);
	return 0;
}

static bool nothing_left_pred(void *run_dir)
{
	char why[700];

	return rt_nothing_left(run_dir, why, sizeof(why));
}

/* Pod uid with one rbd volume "data" of c's image, and the agent started with extra and the
 * fault switch (FAULT_ENV) env, which only this agent gets; the pod's volume dir into dir
 * (>= 600 bytes). */
static void start_with_fault(struct agent_ctx *c, const char *uid, const char *const extra[],
			     const char *env, char *dir)
{
	char spec[2048], name[128];

	setenv(FAULT_ENV, env, 1);
	snprintf(spec, sizeof(spec),
		 "{\"pod\": {\"uid\": \"%s\"}, \"volumes\": [{\"name\": \"data\", \"rbd\": "
		 "{\"monitors\": [\"%s\"], \"pool\": \"%s\", \"image\": \"%s\", \"user\": "
		 "\"admin\", \"secretFile\": \"%s\"}}]}",
		 uid, rt.mon, rt.pool, c->image, c->keyfile);
	snprintf(name, sizeof(name), "%s.json", uid);
	assert_int_equal(fixture_write_pod(c->f, name, spec), 0);
	assert_int_equal(fixture_start(c->f, extra), 0);
	unsetenv(FAULT_ENV); /* the agent has its copy */
	snprintf(dir, 600, "%s/pods/%s/volumes/kubernetes.io~rbd/data", c->f->root, uid);
}

/* The first helper run fails as fault says; the volume is retried and mounts, the daemon
 * lives and never maps the Ceph libraries. */
static void agent_fault_then_mount(struct agent_ctx *c, const char *fault, const char *error)
{
	const char *extra[] = { "--rbd-timeout",
				"2s",
				"--rbd-attach-methods",
				"fuse",
				"--backoff-max",
				"2s",
				"--log-level",
				"debug",
				NULL };
	char env[700], dir[600];

	snprintf(env, sizeof(env), "%s:%s", fault, c->fault_file);
	start_with_fault(c, "pod-h", extra, env, dir);
	/* The failure is on the device's operation and is healed by the retry at once: the
	 * log keeps it. */
	assert_true(fixture_wait_log(c->f, error, WAIT_MS));
	assert_int_equal(kill(c->f->agent.pid, 0), 0);
	assert_true(fixture_wait_mounted(dir, WAIT_MS));
	assert_true(fixture_wait_pod_state(c->f, dir, "mounted", -1, WAIT_MS));
	assert_int_equal(kill(c->f->agent.pid, 0), 0);
	assert_int_equal(rt_watchers(c->image), 1);
	assert_false(test_maps_have(c->f->agent.pid, "librbd"));
	assert_false(test_maps_have(c->f->agent.pid, "librados"));
	assert_false(test_maps_have(c->f->agent.pid, "libceph-common"));

	assert_int_equal(fixture_remove_pod(c->f, "pod-h.json"), 0);
	assert_true(fixture_wait_mount_count(c->f, 0, WAIT_MS));
	assert_true(rt_wait_no_watchers(c->image, WAIT_MS));
	/* The record goes after the helper has exited: wait for it, then say what is left. */
	assert_true(fixture_wait_log(c->f, "device unmounted", WAIT_MS));
	(void)test_wait_until(nothing_left_pred, c->run_dir, 10000);
	rt_assert_nothing_left(c->run_dir);
	assert_false(test_maps_have(c->f->agent.pid, "librbd"));
}

/* The fault file has n bytes: the nth watchers run has begun (hang@watchers#n). */
struct fault_count {
	const char *file;
	long n;
};

static bool fault_reached(void *arg)
{
	const struct fault_count *fc = arg;
	struct stat st;

	return stat(fc->file, &st) == 0 && st.st_size >= fc->n;
}

/* The text of the one rbd record (<run_dir>/<volume>.rec) into a new string; NULL if none. */
static char *read_record(const char *run_dir)
{
	DIR *d = opendir(run_dir);
	struct dirent *de;
	char *text = NULL, path[1400];

	while (d && !text && (de = readdir(d))) {
		size_t len = strlen(de->d_name);
		if (len > 4 && streq(de->d_name + len - 4, ".rec")) {
			snprintf(path, sizeof(path), "%s/%s", run_dir, de->d_name);
			text = test_read_file(path);
		}
	}
	if (d)
		closedir(d);
	return text;
}

/* Killed in the window between the map and its full record (issue 45 item 4): the attach's
 * second watchers run, the poll for its own client, hangs (the forced fault), so the agent is
 * SIGKILLed there, with the image mapped (rbd-fuse and its loop device) and the plugin's
 * record holding the device but no client yet.  The next agent adopts that mapping from the
 * record (the same rbd-fuse, no second map, one watcher) and mounts; the pod removed, nothing
 * is left.  Before the record was written with the device at once, the next agent found a
 * record without one: it released the mapping and made a new one (krbd: it could not find it
 * to release, and its own leaked client then blocked every read-write attach). */
static void test_agent_killed_in_client_poll(void **state)
{
	struct agent_ctx *c = *state;
	const char *extra[] = {
		"--rbd-timeout", "30s", "--rbd-attach-methods", "fuse", "--backoff-max", "2s", NULL
	};
	char env[700], dir[600], *rec;
	int pids[4], pid;

	snprintf(env, sizeof(env), "hang@watchers#2:%s", c->fault_file);
	start_with_fault(c, "pod-k", extra, env, dir); /* the next agent runs without it */
	assert_true(
		test_wait_until(fault_reached, &(struct fault_count){ c->fault_file, 2 }, WAIT_MS));
	/* The poll hangs: mapped, recorded with its device, not mounted. */
	rec = read_record(c->run_dir);
	assert_non_null(rec);
	assert_non_null(strstr(rec, "device=/dev/loop"));
	assert_null(strstr(rec, "client="));
	free(rec);
	assert_false(test_is_mountpoint(dir));
	assert_int_equal(rt_fuse_pids(c->run_dir, pids, 4), 1);
	pid = pids[0];
	assert_int_equal(rt_loops_under(c->run_dir), 1);
	assert_int_equal(fixture_stop(c->f, SIGKILL), 128 + SIGKILL);

	assert_int_equal(fixture_start(c->f, extra), 0);
	assert_true(fixture_wait_mounted(dir, WAIT_MS));
	assert_true(fixture_wait_pod_state(c->f, dir, "mounted", -1, WAIT_MS));
	/* Adopted: the same rbd-fuse and loop device, one client on the image. */
	assert_int_equal(rt_fuse_pids(c->run_dir, pids, 4), 1);
	assert_int_equal(pids[0], pid);
	assert_int_equal(rt_loops_under(c->run_dir), 1);
	assert_int_equal(rt_watchers(c->image), 1);

	assert_int_equal(fixture_remove_pod(c->f, "pod-k.json"), 0);
	assert_true(fixture_wait_mount_count(c->f, 0, WAIT_MS));
	assert_true(rt_wait_no_watchers(c->image, WAIT_MS));
	assert_true(fixture_wait_log(c->f, "device unmounted", WAIT_MS));
	(void)test_wait_until(nothing_left_pred, c->run_dir, 10000);
	rt_assert_nothing_left(c->run_dir);
}

static void test_agent_helper_crash(void **state)
{
	agent_fault_then_mount(*state, "abort", "rbd-helper watchers crashed (signal 6");
}

static void test_agent_helper_deadline(void **state)
{
	agent_fault_then_mount(*state, "hang", "rbd-helper watchers ran past its deadline of 7.0s");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_answers),
		cmocka_unit_test(test_bad_request),
		cmocka_unit_test_teardown(test_deadline, unset_fault),
		cmocka_unit_test_teardown(test_crash, unset_fault),
		cmocka_unit_test_setup_teardown(test_agent_helper_crash, agent_setup,
						agent_teardown),
		cmocka_unit_test_setup_teardown(test_agent_helper_deadline, agent_setup,
						agent_teardown),
		cmocka_unit_test_setup_teardown(test_agent_killed_in_client_poll, agent_setup,
						agent_teardown),
	};

	rt_init();
	/* The agent with the forced-failure seam, for the daemon's runs too (fixture_start). */
	setenv("VOLAGENT_BIN", test_volagent_test_bin(), 1);
	rbd_cluster_set_helper(test_volagent_bin());
	test_enter_private_mountns();
	return cmocka_run_group_tests_name("rbd helper", tests, NULL, NULL);
}
