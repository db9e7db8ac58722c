/* test-csi-failures.c - kubelet's final-or-uncertain rule, each failure produced for real on a
 * real `volagent run --csi` through the real gRPC client (tests/csi/csi_client.py).  Kubelet
 * (csi_client.go isFinalError) treats CANCELLED, DEADLINE_EXCEEDED, UNAVAILABLE,
 * RESOURCE_EXHAUSTED and ABORTED as "still uncertain, keep calling" and every other code as
 * final: it removes the target dir and forgets the attempt.  So a final code must leave nothing
 * of the attempt at the staging or target path, and a step still running must answer a
 * non-final code that the repeated call then joins.  Cases:
 *   - a call's deadline shorter than mkfs of a 4 TiB blank device: ABORTED or
 *     DEADLINE_EXCEEDED, the stage goes on, the repeat with kubelet's deadline joins it (one
 *     filesystem, one mount);
 *   - a device held open O_EXCL by another: FAILED_PRECONDITION, nothing mounted; once
 *     released, the same call succeeds;
 *   - a mount the kernel refuses (an unknown mount option): final, nothing mounted;
 *   - a device that vanished (its loop device detached before the stage): final, nothing
 *     mounted at the staging path;
 *   - the target dir cannot be made (a full filesystem: a tmpfs out of inodes under the pod
 *     dir): RESOURCE_EXHAUSTED, nothing made; once there is room, the same call succeeds.
 * No injection: every failure is the kernel's or the tool's own.  Root, private mount
 * namespace; the fixture stops the agent and detaches its loop devices even on failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "csi-env.h"
#include "testlib.h"

static int setup(void **state)
{
	*state = csi_env_new("csifail");
	return 0;
}

/* The calls through the client with a deadline of timeout (seconds), as "0.3". */
static char *call_with_timeout(struct csi_env *e, const char *timeout, const char *calls)
{
	char input[700], *out = NULL;
	const char *argv[] = { "/usr/bin/python3",
			       "tests/csi/csi_client.py",
			       "--socket",
			       e->sock,
			       "--stub-dir",
			       e->stubs,
			       "--timeout",
			       timeout,
			       "--input",
			       input,
			       NULL };

	snprintf(input, sizeof(input), "%s/calls-timeout.txt", e->f->dir);
	assert_int_equal(test_write_file(input, calls), 0);
	assert_int_equal(test_run_capture(argv, &out), 0);
	if (getenv("VERBOSE"))
		fprintf(stderr, "%s", out);
	return out;
}

/* Whether an answer line carries one of the codes kubelet does not take as final. */
static bool non_final(const char *line)
{
	static const char *const codes[] = { "ERR CANCELLED", "ERR DEADLINE_EXCEEDED",
					     "ERR UNAVAILABLE", "ERR RESOURCE_EXHAUSTED",
					     "ERR ABORTED" };

	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (strncmp(line, codes[i], strlen(codes[i])) == 0)
			return true;
	return false;
}

/* Whether an answer line is an error kubelet takes as final. */
static bool final_error(const char *line)
{
	return strncmp(line, "ERR ", 4) == 0 && !non_final(line);
}

static char *stage_call(char *buf, size_t size, const char *id, const char *stg, const char *dev,
			const char *extra)
{
	snprintf(buf, size,
		 "Node/NodeStageVolume {\"volume_id\": \"%s\", \"staging_target_path\": \"%s\", "
		 "\"volume_capability\": " CSI_CAP_EXT4
		 ", \"volume_context\": {\"type\": \"local\", "
		 "\"path\": \"%s\"%s}}\n",
		 id, stg, dev, extra);
	return buf;
}

static void unstage(struct csi_env *e, const char *id, const char *stg)
{
	char calls[1024];

	snprintf(calls, sizeof(calls),
		 "Node/NodeUnstageVolume {\"volume_id\": \"%s\", \"staging_target_path\": "
		 "\"%s\"}\n",
		 id, stg);
	csi_env_call_ok(e, calls, 1);
}

/* A deadline shorter than the stage's mkfs: a non-final code while mkfs runs, and the repeat
 * with kubelet's own deadline joins the stage in progress: one filesystem, one mount. */
static void test_deadline_shorter_than_mkfs(void **state)
{
	struct csi_env *e = *state;
	/* mkfs.ext4 of 4 TiB takes 0.5-1 s here (its 1 GiB journal: 1.1 GB of the sparse image
	 * is written), a 2 GiB one 20 ms: too fast to outlast any deadline. */
	const char *dev = fixture_add_loop(e->f, 4LL << 40);
	char stg[700], calls[2048], *out;
	long off;

	assert_non_null(dev);
	csi_env_staging(e, "slow", stg);
	csi_env_start(e);
	off = fixture_log_size(e->f);
	stage_call(calls, sizeof(calls), "slow", stg, dev, "");
	out = call_with_timeout(e, "0.25", calls);
	if (!non_final(csi_line(out, 0)))
		fail_msg("a stage past its deadline must answer a non-final code, got: %s",
			 csi_line(out, 0));
	free(out);
	csi_env_call_ok(e, calls, 1);
	assert_true(test_is_mountpoint(stg));
	assert_int_equal(test_count_mounts_under(e->kubelet), 1);
	assert_true(fixture_wait_log_after(e->f, off, "msg=\"device mounted\"", 1000));
	assert_int_equal(fixture_log_count(e->f, "msg=\"device mounted\""), 1);
	unstage(e, "slow", stg);
	csi_env_stop_clean(e);
}

/* A device another holds open O_EXCL (as a mounted filesystem or a device mapper target
 * does): final, nothing mounted; released, the same call succeeds.  A mount the kernel
 * refuses (an unknown option): final, nothing mounted. */
static void test_busy_device_and_refused_mount(void **state)
{
	struct csi_env *e = *state;
	const char *dev = fixture_add_loop(e->f, 64 << 20);
	char stg[700], calls[2048], *out;
	int held;

	assert_non_null(dev);
	assert_int_equal(test_run((const char *const[]){ "mkfs.ext4", "-q", dev, NULL }), 0);
	csi_env_staging(e, "busy", stg);
	csi_env_start(e);
	held = open(dev, O_RDONLY | O_EXCL | O_CLOEXEC);
	assert_true(held >= 0);
	stage_call(calls, sizeof(calls), "busy", stg, dev, "");
	out = csi_env_call(e, calls);
	if (!final_error(csi_line(out, 0)))
		fail_msg("a stage of a busy device must fail with a final code, got: %s",
			 csi_line(out, 0));
	free(out);
	assert_false(test_is_mountpoint(stg));
	assert_int_equal(test_count_mounts_under(e->kubelet), 0);
	close(held);
	csi_env_call_ok(e, calls, 1);
	assert_true(test_is_mountpoint(stg));
	unstage(e, "busy", stg);

	stage_call(calls, sizeof(calls), "badopt", stg, dev,
		   ", \"mountOptions\": \"no_such_option_here\"");
	out = csi_env_call(e, calls);
	if (!final_error(csi_line(out, 0)))
		fail_msg("a mount the kernel refuses must fail with a final code, got: %s",
			 csi_line(out, 0));
	free(out);
	assert_false(test_is_mountpoint(stg));
	csi_env_stop_clean(e);
}

/* A device gone before the stage (its loop device detached: the node stays, with no backing
 * file): final, nothing at the staging path. */
static void test_vanished_device(void **state)
{
	struct csi_env *e = *state;
	const char *dev = fixture_add_loop(e->f, 64 << 20);
	char stg[700], calls[2048], *out;

	assert_non_null(dev);
	assert_int_equal(test_run((const char *const[]){ "mkfs.ext4", "-q", dev, NULL }), 0);
	csi_env_staging(e, "gone", stg);
	csi_env_start(e);
	assert_int_equal(test_loop_detach(dev), 0);
	/* Detached once no other process has it open (a prober may, for a moment). */
	assert_true(test_wait_until(test_loop_unbound, (void *)dev, 10000));
	stage_call(calls, sizeof(calls), "gone", stg, dev, "");
	out = csi_env_call(e, calls);
	if (!final_error(csi_line(out, 0)))
		fail_msg("a stage of a vanished device must fail with a final code, got: %s",
			 csi_line(out, 0));
	free(out);
	assert_false(test_is_mountpoint(stg));
	csi_env_stop_clean(e);
}

/* The target dir cannot be made: the pod dir's filesystem is full (a tmpfs out of inodes).
 * RESOURCE_EXHAUSTED (kubelet keeps calling), nothing made; with room again, the same call
 * succeeds. */
static void test_full_filesystem_at_target(void **state)
{
	struct csi_env *e = *state;
	char src[600], pod[700], parent[800], target[900], calls[4096], *out;

	snprintf(src, sizeof(src), "%s/src", e->f->dir);
	assert_int_equal(mkdir(src, 0755), 0);
	snprintf(pod, sizeof(pod), "%s/pods/pod-full", e->kubelet);
	assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", pod, NULL }), 0);
	/* The root and the three dirs kubelet makes take the 4 inodes. */
	assert_int_equal(mount("tmpfs", pod, "tmpfs", 0, "size=64k,nr_inodes=4"), 0);
	snprintf(parent, sizeof(parent), "%s/volumes/kubernetes.io~csi/pv-full", pod);
	assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", parent, NULL }), 0);
	snprintf(target, sizeof(target), "%s/mount", parent);
	assert_true(mkdir(target, 0750) < 0 && errno == ENOSPC);
	csi_env_start(e);
	snprintf(calls, sizeof(calls),
		 "Node/NodePublishVolume {\"volume_id\": \"full\", \"target_path\": \"%s\", "
		 "\"staging_target_path\": \"%s/plugins/x/globalmount\", \"volume_capability\": " CSI_CAP_MOUNT
		 ", \"volume_context\": {\"type\": \"local\", \"path\": \"%s\"}}\n",
		 target, e->kubelet, src);
	out = csi_env_call(e, calls);
	assert_line(out, 0, "ERR RESOURCE_EXHAUSTED");
	free(out);
	assert_true(access(target, F_OK) < 0 && errno == ENOENT);

	assert_int_equal(mount(NULL, pod, NULL, MS_REMOUNT, "size=64k,nr_inodes=16"), 0);
	csi_env_call_ok(e, calls, 1);
	assert_true(test_is_mountpoint(target));
	snprintf(calls, sizeof(calls),
		 "Node/NodeUnpublishVolume {\"volume_id\": \"full\", \"target_path\": \"%s\"}\n",
		 target);
	csi_env_call_ok(e, calls, 1);
	assert_int_equal(fixture_stop(e->f, SIGTERM), 0);
	assert_int_equal(umount2(pod, 0), 0);
}

/* Each case on its own agent and kubelet dir. */
#define CSI_FAILURE_TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, csi_env_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		CSI_FAILURE_TEST(test_deadline_shorter_than_mkfs),
		CSI_FAILURE_TEST(test_busy_device_and_refused_mount),
		CSI_FAILURE_TEST(test_vanished_device),
		CSI_FAILURE_TEST(test_full_filesystem_at_target),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
