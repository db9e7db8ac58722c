/* test-journal-trust.c - a journal is trusted no further than what the agent would have
 * written: crafted entries (a `local` device entry whose mount_path names a file outside the
 * agent's dirs, one naming an outside tmpfs, an `rbd` entry whose FUSE dir and loop device
 * the agent never made, a CSI target at another pod's secret tmpfs) are refused with a log
 * line across a restart, and nothing they name is removed, unmounted or detached.  A real
 * agent, real tmpfs mounts and a real loop device; root, private mount namespace. */
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
#include "fixture-case.h"
#include "desired-state.h"
#include "loop-device.h"
#include "macro.h"
#include "outside-env.h"
#include "testlib.h"

#define WAIT_MS 10000

OUTSIDE_ENV_SETUP_TEARDOWN("jtrust")

/* A tmpfs at dir (made) with a file "data"; its mount ID. */
static int victim_tmpfs(const char *dir)
{
	char file[800];

	assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", dir, NULL }), 0);
	assert_int_equal(mount("tmpfs", dir, "tmpfs", 0, "size=1m"), 0);
	snprintf(file, sizeof(file), "%s/data", dir);
	assert_int_equal(test_write_file(file, "host data\n"), 0);
	return test_mount_id(dir);
}

static void assert_victim(const char *dir, int id)
{
	char file[800];

	assert_true(test_is_mountpoint(dir));
	assert_int_equal(test_mount_id(dir), id);
	snprintf(file, sizeof(file), "%s/data", dir);
	assert_int_equal(access(file, F_OK), 0);
}

/* Starts the agent, lets its first passes run, and stops it (SIGTERM). */
static void run_agent(struct outside_env *e, const char *const args[])
{
	assert_int_equal(fixture_start(e->f, args), 0);
	assert_true(fixture_wait_log(e->f, "startup reconstruction complete", WAIT_MS));
	/* The first passes would have acted on an accepted entry by now. */
	usleep(1500 * 1000);
	assert_int_equal(fixture_stop(e->f, SIGTERM), 0);
}

/* The agent logged n refusals. */
static void assert_refused(struct outside_env *e, int n)
{
	assert_int_equal(fixture_log_count(e->f, "entry refused, leaving what it names alone"), n);
}

/* `local` device entries whose mount_path names an outside file, and an outside tmpfs. */
static void test_local_entries_outside_refused(void **state)
{
	struct outside_env *e = *state;
	char file_dir[700], file[800], tmpfs[700], devices[4096];
	int id;

	snprintf(file_dir, sizeof(file_dir), "%s/files", e->outside);
	mkdir(file_dir, 0755);
	snprintf(file, sizeof(file), "%s/precious", file_dir);
	assert_int_equal(test_write_file(file, "keep me\n"), 0);
	snprintf(tmpfs, sizeof(tmpfs), "%s/tmpfs", e->outside);
	id = victim_tmpfs(tmpfs);
	snprintf(devices, sizeof(devices),
		 "[{\"volume\": \"local:/dev/sdz\", \"plugin\": \"local\", \"mount_path\": \"%s\", "
		 "\"device\": \"/dev/sdz\", \"attached\": true, \"read_only\": false, \"meta\": {}},"
		 " {\"volume\": \"local:/dev/sdy\", \"plugin\": \"local\", \"mount_path\": \"%s\", "
		 "\"device\": \"/dev/sdy\", \"attached\": true, \"read_only\": false, "
		 "\"meta\": {}}]",
		 file, tmpfs);
	outside_env_write_journal(e, devices, NULL);
	run_agent(e, NULL);
	assert_int_equal(access(file, F_OK), 0);
	assert_victim(tmpfs, id);
	assert_refused(e, 2);
	assert_true(fixture_wait_log(e->f, "is not " /* the computed path */, 1));
	assert_int_equal(umount(tmpfs), 0);
}

/* An `rbd` entry at its own mount path, but with a FUSE dir outside the agent's state dir and
 * a loop device the agent never made: the loop device stays attached. */
static void test_rbd_entry_foreign_loop_refused(void **state)
{
	struct outside_env *e = *state;
	const char *loop = fixture_add_loop(e->f, 8 << 20);
	char img[700], fuse[700], back[4096], devices[8192];
	_cleanup_free_ char *mp = NULL;
	struct stat st;

	assert_non_null(loop);
	snprintf(img, sizeof(img), "%s/disk0.img", e->f->dir);
	snprintf(fuse, sizeof(fuse), "%s/fuse", e->outside); /* empty: rmdir would take it */
	mkdir(fuse, 0755);
	mp = dsw_device_mount_dir(e->f->root, "rbd", "rbd:pool/img");
	assert_non_null(mp);
	snprintf(devices, sizeof(devices),
		 "[{\"volume\": \"rbd:pool/img\", \"plugin\": \"rbd\", \"mount_path\": \"%s\", "
		 "\"device\": \"%s\", \"attached\": true, \"read_only\": false, \"meta\": "
		 "{\"method\": \"fuse\", \"pool\": \"pool\", \"image\": \"img\", \"monitors\": "
		 "\"192.0.2.1\", \"user\": \"admin\", \"fuse_dir\": \"%s\", \"image_file\": "
		 "\"%s\", \"loop\": \"%s\"}}]",
		 mp, loop, fuse, img, loop);
	outside_env_write_journal(e, devices, NULL);
	run_agent(e, NULL);
	assert_int_equal(rbd_loop_backing_file(loop, back, sizeof(back)), 0);
	assert_string_equal(back, img);
	assert_int_equal(stat(fuse, &st), 0);
	assert_refused(e, 1);
	assert_true(fixture_wait_log(e->f, "meta.fuse_dir", 1));
}

/* A CSI entry whose target is another pod's secret tmpfs (below the kubelet root, in pods/):
 * refused, and the tmpfs is neither unmounted nor replaced by a bind. */
static void test_csi_target_at_secret_refused(void **state)
{
	struct outside_env *e = *state;
	char src[700], secret[800], csi[4096];
	int id;

	snprintf(src, sizeof(src), "%s/src", e->outside);
	mkdir(src, 0755);
	snprintf(secret, sizeof(secret), "%s/pods/u2/volumes/kubernetes.io~secret/tok",
		 e->csi.kubelet);
	id = victim_tmpfs(secret);
	snprintf(csi, sizeof(csi),
		 "[{\"volume_id\": \"v\", \"staged\": false, \"spec\": {\"type\": \"local\", "
		 "\"attrs\": {\"path\": \"%s\"}, \"mount_options\": [], \"read_only\": false}, "
		 "\"targets\": [{\"target\": \"%s\", \"pod_uid\": \"csi\", \"name\": \"%s\", "
		 "\"read_only\": false, \"fingerprint\": \"x\"}]}]",
		 src, secret, secret);
	outside_env_write_journal(e, "[]", csi);
	run_agent(e, (const char *const[]){ "--csi", "--kubelet-root-dir", e->csi.kubelet,
					    "--device-inventory", "false", NULL });
	assert_victim(secret, id);
	assert_refused(e, 1);
	assert_true(fixture_wait_log(e->f, "another volume plugin's dir", 1));
	assert_int_equal(umount(secret), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		FIXTURE_CASE(test_local_entries_outside_refused),
		FIXTURE_CASE(test_rbd_entry_foreign_loop_refused),
		FIXTURE_CASE(test_csi_target_at_secret_refused),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
