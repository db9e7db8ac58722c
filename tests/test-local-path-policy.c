/* test-local-path-policy.c - the paths a `local` volume may expose (local-path-policy.h): the
 * host's root, /proc, /sys, a directory in /dev, a proc filesystem mounted elsewhere, the
 * agent's own root and state dirs and the kubelet dir are refused for pod spec files and
 * through CSI, naming local.path and the reason, and nothing is mounted; with
 * --local-path-prefix only paths below a prefix pass; a block device under /dev and an
 * ordinary directory still work.  Real agent, real binds, a real loop device and proc mount;
 * root, private mount namespace. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "csi-calls.h"
#include "csi-env.h"
#include "macro.h"
#include "testlib.h"

#define WAIT_MS 10000

static int setup(void **state)
{
	*state = csi_env_new("lpolicy");
	return 0;
}

/* Pod spec files: each refused path is a rejected file naming volumes[0].local.path and the
 * reason; the good directory is mounted. */
static void test_pod_specs_refused(void **state)
{
	struct csi_env *e = *state;
	struct agent_fixture *f = e->f;
	const char *good = fixture_make_source(f, "good", "ok");
	char procdir[600], devdir[600], d[512];
	const struct {
		const char *uid, *path, *why;
	} bad[] = {
		{ "root", "/", "is the host's root directory" },
		{ "proc", "/proc/sys/kernel", "in /proc, a pseudo-filesystem" },
		{ "sys", "/sys", "in /sys, a pseudo-filesystem" },
		{ "dev", "/dev", "in /dev, a pseudo-filesystem" },
		{ "state", f->state, "the agent's state dir" },
		{ "rootdir", f->root, "the agent's root dir" },
		{ "parent", f->dir, "holds or is in the agent's" },
		{ "kubelet", e->kubelet, "the kubelet dir" },
	};

	snprintf(procdir, sizeof(procdir), "%s/p", f->dir);
	mkdir(procdir, 0755);
	assert_int_equal(mount("proc", procdir, "proc", 0, NULL), 0);
	snprintf(devdir, sizeof(devdir), "/dev/volagent-test-%d", (int)getpid());
	mkdir(devdir, 0755);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		assert_int_equal(fixture_write_local_pod(f, bad[i].uid, "v", bad[i].path), 0);
	assert_int_equal(fixture_write_local_pod(f, "procmount", "v", procdir), 0);
	assert_int_equal(fixture_write_local_pod(f, "devdir", "v", devdir), 0);
	assert_int_equal(fixture_write_local_pod(f, "good", "v", good), 0);
	assert_int_equal(fixture_start(f, (const char *const[]){ "--kubelet-root-dir", e->kubelet,
								 "--device-inventory", "false",
								 NULL }),
			 0);
	assert_true(fixture_wait_mounted(fixture_pod_dir(f, "good", "v", d), WAIT_MS));
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		char name[64];

		snprintf(name, sizeof(name), "%s.json", bad[i].uid);
		if (fixture_log_find(f, "rejected pod spec file", name) < 0 ||
		    fixture_log_find(f, name, bad[i].why) < 0)
			fail_msg("%s: no rejection saying \"%s\"", bad[i].path, bad[i].why);
	}
	assert_true(fixture_wait_log(f, "field=volumes[0].local.path", WAIT_MS));
	/* Only at set-up can a proc mount elsewhere, or a directory in /dev, be seen. */
	assert_true(fixture_wait_pod_error(f, fixture_pod_dir(f, "procmount", "v", d),
					   "is on proc, a pseudo-filesystem", WAIT_MS));
	assert_true(fixture_wait_pod_error(f, fixture_pod_dir(f, "devdir", "v", d),
					   "is a directory in /dev", WAIT_MS));
	assert_int_equal(test_count_mounts_under(f->root), 1);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
	assert_int_equal(umount(procdir), 0);
	assert_int_equal(rmdir(devdir), 0);
}

/* --local-path-prefix: below it passes, elsewhere is refused; a block device under /dev is
 * still a local volume (formatted and mounted). */
static void test_prefix_allowlist(void **state)
{
	struct csi_env *e = *state;
	struct agent_fixture *f = e->f;
	const char *in, *out, *dev = fixture_add_loop(f, 32 << 20);
	char prefix[600], d[512];

	assert_non_null(dev);
	snprintf(prefix, sizeof(prefix), "%s/disks", f->dir);
	mkdir(prefix, 0755);
	in = fixture_make_source(f, "disks/a", "in");
	out = fixture_make_source(f, "elsewhere", "out");
	assert_int_equal(fixture_write_local_pod(f, "in", "v", in), 0);
	assert_int_equal(fixture_write_local_pod(f, "out", "v", out), 0);
	assert_int_equal(fixture_write_local_pod(f, "blk", "v", dev), 0);
	assert_int_equal(fixture_start(f, (const char *const[]){ "--local-path-prefix", "/mnt/x",
								 "--local-path-prefix", prefix,
								 "--device-inventory", "false",
								 NULL }),
			 0);
	assert_true(fixture_wait_mounted(fixture_pod_dir(f, "in", "v", d), WAIT_MS));
	assert_true(fixture_wait_mounted(fixture_pod_dir(f, "blk", "v", d), WAIT_MS));
	assert_true(fixture_wait_log(f, "is not below a --local-path-prefix", WAIT_MS));
	assert_true(fixture_log_find(f, "rejected pod spec file", "out.json") >= 0);
	assert_int_equal(test_count_mounts_under(f->root), 3); /* in, blk and blk's device */
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

/* Through CSI: path=/ (which exposed kubelet's client key) and the kubelet dir are
 * INVALID_ARGUMENT naming volume_context.path. */
static void test_csi_refused(void **state)
{
	struct csi_env *e = *state;
	char t1[700], stg[700], calls[4096] = "";

	csi_env_target(e, "pod-a", "pv", t1);
	csi_env_staging(e, "r", stg);
	csi_env_start(e);
	csi_calls_publish_local(calls, sizeof(calls), "r", stg, t1, CSI_CAP_MOUNT, "/");
	csi_calls_publish_local(calls, sizeof(calls), "k", stg, t1, CSI_CAP_MOUNT, e->kubelet);
	CSI_CALL_WANT(e, calls, { 0, "ERR INVALID_ARGUMENT" },
		      { 0, "path: / is the host's root directory" }, { 1, "ERR INVALID_ARGUMENT" },
		      { 1, "the kubelet dir" });
	assert_false(test_is_mountpoint(t1));
	assert_int_equal(fixture_stop(e->f, SIGTERM), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_pod_specs_refused, setup, csi_env_teardown),
		cmocka_unit_test_setup_teardown(test_prefix_allowlist, setup, csi_env_teardown),
		cmocka_unit_test_setup_teardown(test_csi_refused, setup, csi_env_teardown),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
