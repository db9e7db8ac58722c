/* test-csi-owner.c - a `volagent run --csi` touches only what is its own: NodeUnpublishVolume
 * and NodeUnstageVolume of a volume it does not know, at a path that holds someone else's
 * mount (a pod's secret tmpfs, another driver's staging mount), answer OK as for a volume not
 * published or staged there and leave that mount alone; a mount of its own whose journal was
 * lost is still released when kubelet's record (vol_data.json) names this driver and volume;
 * a target or staging path in a kubelet dir other than pods/ and plugins/ is refused.
 * Real agent, real gRPC client, real tmpfs, loop device and ext4; root, private mount
 * namespace. */
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
#include "file-check.h"
#include "testlib.h"

#define OTHER_DRIVER "other.csi.example.com"

static int setup(void **state)
{
	*state = csi_env_new("csiowner");
	return 0;
}

/* A tmpfs at dir (made), holding a file "token"; the mount's ID. */
static int foreign_tmpfs(const char *dir)
{
	char file[800];

	assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", dir, NULL }), 0);
	assert_int_equal(mount("tmpfs", dir, "tmpfs", 0, "size=1m"), 0);
	snprintf(file, sizeof(file), "%s/token", dir);
	assert_int_equal(test_write_file(file, "secret-token\n"), 0);
	return test_mount_id(dir);
}

static void assert_untouched(const char *dir, int id)
{
	char file[800], *s;

	assert_true(test_is_mountpoint(dir));
	assert_int_equal(test_mount_id(dir), id);
	snprintf(file, sizeof(file), "%s/token", dir);
	s = test_read_file(file);
	assert_non_null(s);
	assert_string_equal(s, "secret-token\n");
	free(s);
}

/* Runs the two calls, each answered OK, and fails the test unless the mount at dir (of mount
 * ID id) stays untouched while a wrongly adopted mount would have had the time a pass takes
 * to go. */
static void calls_leave_alone(struct csi_env *e, const char *calls, const char *dir, int id)
{
	csi_env_call_ok(e, calls, 2);
	assert_false(fixture_wait_unmounted(dir, 1000));
	assert_untouched(dir, id);
}

/* Unpublish of an unknown volume at a pod's secret tmpfs, and at another driver's CSI
 * target whose record names that driver: OK, both stay mounted with their files. */
static void test_unpublish_unknown_leaves_foreign_mounts(void **state)
{
	struct csi_env *e = *state;
	char secret[700], other[700], parent[700], calls[4096] = "";
	int id_secret, id_other;

	snprintf(secret, sizeof(secret), "%s/pods/uid-1/volumes/kubernetes.io~secret/tok",
		 e->kubelet);
	id_secret = foreign_tmpfs(secret);
	csi_env_target(e, "uid-2", "pv-other", other);
	id_other = foreign_tmpfs(other);
	snprintf(parent, sizeof(parent), "%s/pods/uid-2/volumes/kubernetes.io~csi/pv-other",
		 e->kubelet);
	csi_write_kubelet_record(parent, OTHER_DRIVER, "vol-other");
	csi_env_start(e);

	csi_calls_unpublish(calls, sizeof(calls), "ghost", secret);
	csi_calls_unpublish(calls, sizeof(calls), "vol-other", other);
	calls_leave_alone(e, calls, secret, id_secret);
	assert_untouched(other, id_other);
	assert_true(fixture_wait_log(e->f, "leaving it alone", 5000));
	assert_int_equal(fixture_stop(e->f, SIGTERM), 0);
	assert_untouched(secret, id_secret);
	assert_int_equal(umount(secret), 0);
	assert_int_equal(umount(other), 0);
}

/* Unstage of an unknown volume at another driver's staging mount: OK, it stays. */
static void test_unstage_unknown_leaves_other_driver(void **state)
{
	struct csi_env *e = *state;
	char stg[700], dir[700], calls[4096] = "";
	int id;

	snprintf(dir, sizeof(dir), "%s/plugins/kubernetes.io/csi/" OTHER_DRIVER "/0a1b2c",
		 e->kubelet);
	snprintf(stg, sizeof(stg), "%s/globalmount", dir);
	id = foreign_tmpfs(stg);
	csi_write_kubelet_record(dir, OTHER_DRIVER, "vol-x");
	csi_env_start(e);

	csi_calls_unstage(calls, sizeof(calls), "ghost", stg);
	csi_calls_unstage(calls, sizeof(calls), "vol-x", stg);
	calls_leave_alone(e, calls, stg, id);
	assert_int_equal(fixture_stop(e->f, SIGTERM), 0);
	assert_int_equal(umount(stg), 0);
}

/* The agent's own staging mount and target, with the journal lost in a crash: kubelet's
 * records name this driver and the volume, so unpublish and unstage release both. */
static void test_lost_journal_own_mounts_released(void **state)
{
	struct csi_env *e = *state;
	const char *dev = fixture_add_loop(e->f, 32 << 20);
	char t1[700], stg[700], parent[700], journal[700], calls[8192] = "";

	assert_non_null(dev);
	csi_env_target(e, "pod-a", "pv-own", t1);
	csi_env_staging(e, "own", stg);
	snprintf(parent, sizeof(parent), "%s/pods/pod-a/volumes/kubernetes.io~csi/pv-own",
		 e->kubelet);
	csi_write_kubelet_record(parent, "csi.volagent.io", "own");
	snprintf(parent, sizeof(parent), "%s/plugins/kubernetes.io/csi/csi.volagent.io/own",
		 e->kubelet);
	csi_write_kubelet_record(parent, "csi.volagent.io", "own");
	csi_env_start(e);
	csi_calls_stage_local(calls, sizeof(calls), "own", stg, CSI_CAP_EXT4, dev);
	csi_calls_publish_local(calls, sizeof(calls), "own", stg, t1, CSI_CAP_EXT4, dev);
	csi_env_call_ok(e, calls, 2);
	assert_true(test_is_mountpoint(stg));
	assert_true(test_is_mountpoint(t1));
	assert_int_equal(fixture_stop(e->f, SIGKILL), 128 + SIGKILL);
	snprintf(journal, sizeof(journal), "%s/journal.json", e->f->state);
	(void)unlink(journal);

	csi_env_start(e);
	calls[0] = '\0';
	csi_calls_unpublish(calls, sizeof(calls), "own", t1);
	csi_calls_unstage(calls, sizeof(calls), "own", stg);
	csi_env_call_ok(e, calls, 2);
	assert_false(test_is_mountpoint(t1));
	assert_false(test_is_mountpoint(stg));
	csi_env_stop_clean(e);
}

/* A publish over kubelet's pki dir (a dir below the kubelet root, but not one it gives CSI
 * drivers) and a stage in its plugins_registry are refused; nothing is mounted there. */
static void test_publish_outside_csi_dirs_refused(void **state)
{
	struct csi_env *e = *state;
	char src[600], pki[700], key[800], stg[700], reg[700], calls[8192] = "";

	snprintf(src, sizeof(src), "%s/src", e->f->dir);
	mkdir(src, 0755);
	snprintf(pki, sizeof(pki), "%s/pki", e->kubelet);
	mkdir(pki, 0700);
	snprintf(key, sizeof(key), "%s/kubelet-client-current.pem", pki);
	assert_int_equal(test_write_file(key, "client key\n"), 0);
	snprintf(reg, sizeof(reg), "%s/plugins_registry/x", e->kubelet);
	assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", reg, NULL }), 0);
	csi_env_staging(e, "v", stg);
	csi_env_start(e);
	csi_calls_publish_local(calls, sizeof(calls), "v", stg, pki, CSI_CAP_MOUNT, src);
	csi_calls_stage_local(calls, sizeof(calls), "v", reg, CSI_CAP_MOUNT, src);
	csi_calls_unpublish(calls, sizeof(calls), "v", pki);
	CSI_CALL_WANT(e, calls, { 0, "ERR INVALID_ARGUMENT target_path" }, { 0, "is not in" },
		      { 1, "ERR INVALID_ARGUMENT staging_target_path" },
		      { 2, "ERR INVALID_ARGUMENT target_path" });
	assert_false(test_is_mountpoint(pki));
	assert_false(test_is_mountpoint(reg));
	assert_file_text(key, NULL, "client key\n");
	assert_int_equal(fixture_stop(e->f, SIGTERM), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_unpublish_unknown_leaves_foreign_mounts, setup,
						csi_env_teardown),
		cmocka_unit_test_setup_teardown(test_unstage_unknown_leaves_other_driver, setup,
						csi_env_teardown),
		cmocka_unit_test_setup_teardown(test_lost_journal_own_mounts_released, setup,
						csi_env_teardown),
		cmocka_unit_test_setup_teardown(test_publish_outside_csi_dirs_refused, setup,
						csi_env_teardown),
	};

	if (access("/usr/bin/python3", X_OK) < 0 ||
	    test_run((const char *const[]){ "/usr/bin/python3", "-c", "import grpc, grpc_tools",
					    NULL }) != 0) {
		fprintf(stderr, "skipped: needs Debian's python3-grpcio and python3-grpc-tools\n");
		return 77;
	}
	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
