/* test-format-guard.c - what stands between a device and mkfs besides libblkid's probe
 * (issue 45 item 6), on real loop devices in a private mount namespace.
 *
 * A zeroed primary superblock: an ext4 filesystem whose first 64 KiB were zeroed probes blank
 * (libblkid reads the primary superblock only), but its block group 1 still holds a backup
 * superblock; the agent refuses to format it, names the backup and how to recover it, and
 * e2fsck from that backup brings the data back, which the agent then mounts.  Two volumes
 * naming one blank device by two paths, set up at the same moment, get one filesystem (the
 * probe-to-mkfs step is serialized per device number).  A volume's record of the filesystem it
 * carries (its UUID, journaled with the device): a device that probes blank is never formatted
 * again and one holding another filesystem is never mounted, by the agent itself across a
 * "reboot" too.  A device that does not read back cannot be produced on this kernel (no
 * dm-error); blkdev_check_blank's read of both ends is exercised on readable devices only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "blkdev.h"
#include "csi-calls.h"
#include "csi-env.h"
#include "device-fs.h"
#include "mount-util.h"
#include "plugin.h"
#include "testlib.h"

struct env {
	char *dir;
	char img[512];
	char dev[32];
	char link[512];
	char target[2][512];
	int parent_fd;
};

static int setup_size(void **state, long long size)
{
	struct env *e = calloc(1, sizeof(*e));
	struct stat st;

	e->dir = test_mkdtemp("format-guard");
	snprintf(e->img, sizeof(e->img), "%s/disk.img", e->dir);
	snprintf(e->link, sizeof(e->link), "%s/disk-node", e->dir);
	assert_int_equal(test_make_sparse(e->img, size), 0);
	assert_int_equal(test_loop_attach(e->img, e->dev), 0);
	for (int i = 0; i < 2; i++) {
		snprintf(e->target[i], sizeof(e->target[i]), "%s/mnt%d", e->dir, i);
		assert_int_equal(mkdir(e->target[i], 0755), 0);
	}
	/* A second node of the same device (another name for it, as a by-id link is). */
	assert_int_equal(stat(e->dev, &st), 0);
	assert_int_equal(mknod(e->link, S_IFBLK | 0600, st.st_rdev), 0);
	e->parent_fd = open(e->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(e->parent_fd >= 0);
	*state = e;
	return 0;
}

static int setup(void **state)
{
	return setup_size(state, 256LL << 20);
}

/* Also when a test failed half-way: every loop device it attached (the second one of
 * test_lock_is_per_device too) is detached. */
static int teardown(void **state)
{
	struct env *e = *state;

	for (int i = 0; i < 2; i++)
		while (test_is_mountpoint(e->target[i]))
			if (mnt_util_umount(e->target[i], 0, NULL) < 0)
				break;
	close(e->parent_fd);
	test_cleanup_loops_and_dir(e->dir);
	free(e);
	return 0;
}

/* The local plugin's mount of dev (by path) at target i of e, with the filesystem UUID the
 * volume's record names (NULL: none); the UUID mounted into ret_uuid (may be NULL). */
static int mount_recorded(struct env *e, const char *path, int i, const char *uuid, char *ret_uuid,
			  struct error_info *err)
{
	const struct volume_plugin *p = plugin_find_by_name("local");
	struct volume_spec *s = volume_spec_new("local");
	char name[8];
	int r;

	assert_non_null(p);
	assert_non_null(s);
	assert_int_equal(volume_spec_set(s, "path", path), 0);
	snprintf(name, sizeof(name), "mnt%d", i);
	r = plugin_mount_device(p, s, path, false,
				&(struct mount_target){ .path = e->target[i],
							.parent_fd = e->parent_fd,
							.name = name,
							.fs_uuid = uuid,
							.ret_fs_uuid = ret_uuid },
				err);
	volume_spec_unref(s);
	return r;
}

static int mount_local(struct env *e, const char *path, int i, struct error_info *err)
{
	return mount_recorded(e, path, i, NULL, NULL, err);
}

static void zero_start(const char *dev, size_t len)
{
	char *zero = calloc(1, len);
	int fd = open(dev, O_WRONLY | O_CLOEXEC);

	assert_non_null(zero);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, zero, len, 0), (ssize_t)len);
	assert_int_equal(fsync(fd), 0);
	close(fd);
	free(zero);
}

/* An ext4 filesystem with a file on it, made with block size bs, its first 64 KiB zeroed. */
static void ext4_with_zeroed_start(struct env *e, const char *bs)
{
	char file[600];

	assert_int_equal(test_run((const char *const[]){ "mkfs.ext4", "-q", "-F", "-b", bs, e->dev,
							 NULL }),
			 0);
	assert_int_equal(mount(e->dev, e->target[0], "ext4", 0, NULL), 0);
	snprintf(file, sizeof(file), "%s/data", e->target[0]);
	assert_int_equal(test_write_file(file, "written before the superblock was lost\n"), 0);
	assert_int_equal(mnt_util_umount(e->target[0], 0, NULL), 0);
	zero_start(e->dev, 64 * 1024);
}

static void refused_then_recovered(struct env *e, const char *bs, const char *backup_block)
{
	struct error_info err = { 0 };
	struct blkdev_probe probe;
	char file[600], *text;

	ext4_with_zeroed_start(e, bs);
	/* The premise: libblkid finds nothing. */
	assert_int_equal(blkdev_probe(e->dev, &probe, NULL), 0);
	assert_true(probe.blank);
	assert_int_equal(mount_local(e, e->dev, 0, &err), -EUCLEAN);
	assert_non_null(strstr(err.msg, "backup superblock"));
	assert_non_null(strstr(err.msg, backup_block));
	assert_false(test_is_mountpoint(e->target[0]));
	/* Nothing was written: e2fsck finds the filesystem through that backup, with the file. */
	assert_int_equal(blkdev_probe(e->dev, &probe, NULL), 0);
	assert_true(probe.blank);
	(void)test_run((const char *const[]){ "e2fsck", "-fy", "-b", backup_block, "-B", bs, e->dev,
					      NULL });
	assert_int_equal(blkdev_probe(e->dev, &probe, NULL), 0);
	assert_string_equal(probe.type, "ext4");
	memset(&err, 0, sizeof(err));
	assert_int_equal(mount_local(e, e->dev, 0, &err), 0);
	snprintf(file, sizeof(file), "%s/data", e->target[0]);
	text = test_read_file(file);
	assert_non_null(text);
	assert_string_equal(text, "written before the superblock was lost\n");
	free(text);
}

static void test_zeroed_superblock_4k_blocks(void **state)
{
	refused_then_recovered(*state, "4096", "32768");
}

static void test_zeroed_superblock_1k_blocks(void **state)
{
	refused_then_recovered(*state, "1024", "8193");
}

/* A device that was never formatted passes the last look and is formatted. */
static void test_blank_device_is_formatted(void **state)
{
	struct env *e = *state;
	struct error_info err = { 0 };
	struct blkdev_probe probe;

	assert_int_equal(blkdev_check_blank(e->dev, &err), 0);
	assert_int_equal(mount_local(e, e->dev, 0, &err), 0);
	assert_int_equal(blkdev_probe(e->dev, &probe, NULL), 0);
	assert_string_equal(probe.type, "ext4");
}

static void discard_all(const char *dev)
{
	assert_int_equal(test_run((const char *const[]){ "blkdiscard", "-f", dev, NULL }), 0);
}

/* The record of the filesystem a volume carries: the UUID of the one formatted is handed
 * back; the device then wiped whole (no backup superblock left for the last look to find)
 * is refused with that record, and nothing is written to it, while without the record it is
 * formatted again (what the record prevents); a device that holds another filesystem than
 * the recorded one is not mounted; the recorded one is. */
static void test_recorded_filesystem(void **state)
{
	struct env *e = *state;
	struct error_info err = { 0 };
	struct blkdev_probe probe;
	char made[MOUNT_TARGET_UUID_MAX] = "", again[MOUNT_TARGET_UUID_MAX] = "";
	char seen[64];

	assert_int_equal(mount_recorded(e, e->dev, 0, NULL, made, &err), 0);
	test_blkid_value(e->dev, "UUID", seen, sizeof(seen));
	assert_true(made[0] != '\0');
	assert_string_equal(made, seen);
	assert_int_equal(mnt_util_umount(e->target[0], 0, NULL), 0);

	discard_all(e->dev);
	assert_int_equal(mount_recorded(e, e->dev, 0, made, again, &err), -EUCLEAN);
	assert_non_null(strstr(err.msg, made));
	assert_non_null(strstr(err.msg, "refusing to format it again"));
	assert_string_equal(again, "");
	assert_false(test_is_mountpoint(e->target[0]));
	assert_int_equal(blkdev_probe(e->dev, &probe, NULL), 0);
	assert_true(probe.blank);

	/* Without the record the same blank device is formatted: a new filesystem. */
	memset(&err, 0, sizeof(err));
	assert_int_equal(mount_recorded(e, e->dev, 0, NULL, again, &err), 0);
	assert_true(again[0] != '\0');
	assert_string_not_equal(again, made);
	assert_int_equal(mnt_util_umount(e->target[0], 0, NULL), 0);

	/* Another filesystem than the recorded one: not mounted, both UUIDs named. */
	assert_int_equal(mount_recorded(e, e->dev, 0, made, NULL, &err), -ESTALE);
	assert_non_null(strstr(err.msg, made));
	assert_non_null(strstr(err.msg, again));
	assert_false(test_is_mountpoint(e->target[0]));

	/* The recorded one is mounted, and handed back. */
	memset(&err, 0, sizeof(err));
	assert_int_equal(mount_recorded(e, e->dev, 0, again, made, &err), 0);
	assert_string_equal(made, again);
	assert_true(test_is_mountpoint(e->target[0]));
}

/* --- the agent: the record journaled, kept across a "reboot" and failed set-ups ----------- */

#define WAIT_MS 20000 /* test_wait_until scales it by TEST_TIME_SCALE */

static int agent_setup(void **state)
{
	*state = fixture_new("format-record");
	return *state ? 0 : -1;
}

static int csi_setup(void **state)
{
	*state = csi_env_new("format-record-csi");
	return *state ? 0 : -1;
}

static int agent_teardown(void **state)
{
	fixture_free(*state);
	return 0;
}

/* The "fs_uuid" the journal holds for the device volume, into uuid ("" when none). */
static void journal_fs_uuid(struct agent_fixture *f, char *uuid, size_t size)
{
	char path[600];
	json_error_t jerr;
	json_t *root, *dev;
	size_t i;

	uuid[0] = '\0';
	snprintf(path, sizeof(path), "%s/journal.json", f->state);
	root = json_load_file(path, 0, &jerr);
	assert_non_null(root);
	json_array_foreach(json_object_get(root, "devices"), i, dev)
	{
		const char *u = json_string_value(json_object_get(dev, "fs_uuid"));
		if (u)
			snprintf(uuid, size, "%s", u);
	}
	json_decref(root);
}

/* The mount_device has failed a second time in a row. */
static bool second_failure(void *arg)
{
	return fixture_log_find(arg, "op=mount_device", "failures=2") >= 0;
}

static bool journal_has_no_record(void *arg)
{
	char uuid[MOUNT_TARGET_UUID_MAX];

	journal_fs_uuid(arg, uuid, sizeof(uuid));
	return uuid[0] == '\0';
}

/* The journal's boot id made another's: the next start takes it for an earlier boot. */
static void journal_of_earlier_boot(struct agent_fixture *f)
{
	char path[600], *j, *b;

	snprintf(path, sizeof(path), "%s/journal.json", f->state);
	j = test_read_file(path);
	assert_non_null(j);
	b = strstr(j, "\"boot_id\":\"");
	assert_non_null(b);
	memset(b + strlen("\"boot_id\":\""), '0', 8);
	assert_int_equal(test_write_file(path, j), 0);
	free(j);
}

/* A local block volume formatted by the agent: the journal records its filesystem's UUID.
 * Then a power cut as the format guard fears it: the agent killed, every mount gone, the
 * journal of an earlier boot, and the device reading blank (wiped whole).  The restarted
 * agent refuses to format it, again on its retry, naming the UUID, and keeps the record
 * (before the record it formatted the device at once).  The pod removed, the record goes
 * with the volume. */
static void test_agent_keeps_record_across_reboot(void **state)
{
	struct agent_fixture *f = *state;
	const char *dev = fixture_add_loop(f, 64 << 20);
	char target[512], uuid[MOUNT_TARGET_UUID_MAX], seen[64], kept[MOUNT_TARGET_UUID_MAX];
	struct blkdev_probe probe;
	long off;

	assert_non_null(dev);
	assert_int_equal(fixture_write_local_pod(f, "p1", "disk", dev), 0);
	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(fixture_wait_mounted(fixture_pod_dir(f, "p1", "disk", target), WAIT_MS));
	test_blkid_value(dev, "UUID", seen, sizeof(seen));
	assert_true(seen[0] != '\0');
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
	journal_fs_uuid(f, uuid, sizeof(uuid));
	assert_string_equal(uuid, seen);

	fixture_unmount_all(f);
	journal_of_earlier_boot(f);
	discard_all(dev);
	off = fixture_log_size(f);
	/* debug: a retry that fails the same way is logged there only. */
	assert_int_equal(fixture_start(f, (const char *const[]){ "--log-level", "debug", NULL }),
			 0);
	assert_true(fixture_wait_log_after(f, off, "journal is from an earlier boot", WAIT_MS));
	assert_true(fixture_wait_log_after(f, off, "refusing to format it again", WAIT_MS));
	/* And its retries (backoff from 0.5 s): refused again, not formatted. */
	assert_true(test_wait_until(second_failure, f, WAIT_MS));
	assert_int_equal(blkdev_probe(dev, &probe, NULL), 0);
	assert_true(probe.blank);
	assert_false(test_is_mountpoint(target));
	assert_true(fixture_log_find(f, "refusing to format it again", uuid) >= 0);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
	journal_fs_uuid(f, kept, sizeof(kept));
	assert_string_equal(kept, uuid);

	/* The pod gone: the volume is released and its record with it. */
	assert_int_equal(fixture_start(f, NULL), 0);
	assert_int_equal(fixture_remove_pod(f, "p1.json"), 0);
	assert_true(fixture_wait_ready(f, NULL, WAIT_MS));
	assert_true(test_wait_until(journal_has_no_record, f, WAIT_MS));
	assert_int_equal(blkdev_probe(dev, &probe, NULL), 0);
	assert_true(probe.blank);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

/* The same through CSI, where kubelet decides: a local block volume staged (formatted) by the
 * agent, then the power cut (every mount gone, the journal of an earlier boot, the device
 * wiped).  The restarted agent keeps the volume's record although nothing stages it yet (the
 * CSI entries of an earlier boot wait for kubelet); kubelet's NodeStageVolume is refused
 * FAILED_PRECONDITION naming the UUID, and so is its retry (the record outlives the failed
 * stage), the device stays blank; once kubelet unstages the volume, the record goes.  Before,
 * the first pass dropped the record with the device entry and the stage formatted the device. */
static void test_csi_record_across_reboot(void **state)
{
	struct csi_env *e = *state;
	const char *dev = fixture_add_loop(e->f, 64 << 20);
	char stg[700], calls[4096] = "", uuid[MOUNT_TARGET_UUID_MAX], *out;
	struct blkdev_probe probe;
	long off;

	assert_non_null(dev);
	csi_env_staging(e, "blk", stg);
	csi_calls_stage_local(calls, sizeof(calls), "blk", stg, CSI_CAP_MOUNT, dev);
	csi_env_start(e);
	csi_env_call_ok(e, calls, 1);
	assert_true(test_is_mountpoint(stg));
	assert_int_equal(fixture_stop(e->f, SIGTERM), 0);
	journal_fs_uuid(e->f, uuid, sizeof(uuid));
	assert_true(uuid[0] != '\0');

	fixture_unmount_all(e->f);
	(void)umount2(stg, MNT_DETACH); /* kubelet's dir is not under the fixture's root */
	journal_of_earlier_boot(e->f);
	discard_all(dev);
	off = fixture_log_size(e->f);
	csi_env_start(e);
	assert_true(fixture_wait_log_after(e->f, off, "journal is from an earlier boot", WAIT_MS));
	assert_true(fixture_wait_ready(e->f, NULL, WAIT_MS));
	for (int i = 0; i < 2; i++) {
		out = csi_env_call(e, calls);
		assert_line(out, 0, "ERR FAILED_PRECONDITION");
		assert_line(out, 0, "refusing to format it again");
		assert_line(out, 0, uuid);
		free(out);
	}
	assert_int_equal(blkdev_probe(dev, &probe, NULL), 0);
	assert_true(probe.blank);
	assert_false(test_is_mountpoint(stg));

	calls[0] = '\0';
	csi_calls_unstage(calls, sizeof(calls), "blk", stg);
	csi_env_call_ok(e, calls, 1);
	assert_true(test_wait_until(journal_has_no_record, e->f, WAIT_MS));
	csi_env_stop_clean(e);
}

struct racer {
	struct env *e;
	const char *path;
	int index;
	atomic_int *go;
	int rc;
	struct error_info err;
};

/* The step the local and rbd plugins share (device-fs.c), below the local plugin's path
 * policy (which takes device nodes under /dev only). */
static void *race_mount(void *arg)
{
	struct racer *r = arg;
	char name[8];

	snprintf(name, sizeof(name), "mnt%d", r->index);
	while (!atomic_load(r->go))
		;
	r->rc = device_fs_mount(r->path, NULL, "ext4", NULL, false,
				&(struct mount_target){ .path = r->e->target[r->index],
							.parent_fd = r->e->parent_fd,
							.name = name },
				&r->err);
	return NULL;
}

/* Two volumes name one blank device, by two device nodes, and are set up at once, five
 * times: each time one formats and mounts it, and the other finds it mounted and is refused
 * (a device in use is never handed out twice); never a second mkfs, never a mount refused
 * because the other was probing. */
static void test_two_paths_one_format(void **state)
{
	struct env *e = *state;

	for (int round = 0; round < 5; round++) {
		atomic_int go = 0;
		struct racer r[2] = { { .e = e, .path = e->dev, .index = 0, .go = &go },
				      { .e = e, .path = e->link, .index = 1, .go = &go } };
		pthread_t t[2];
		char uuid[64], uuid_after[64];
		int won = -1;

		for (int i = 0; i < 2; i++)
			assert_int_equal(pthread_create(&t[i], NULL, race_mount, &r[i]), 0);
		atomic_store(&go, 1);
		for (int i = 0; i < 2; i++)
			assert_int_equal(pthread_join(t[i], NULL), 0);
		for (int i = 0; i < 2; i++) {
			if (r[i].rc == 0) {
				assert_int_equal(won, -1); /* not both */
				won = i;
			} else {
				if (r[i].rc != -EBUSY || !strstr(r[i].err.msg, "is mounted at"))
					print_error("round %d, mount %d: %d %s\n", round, i,
						    r[i].rc, r[i].err.msg);
				assert_int_equal(r[i].rc, -EBUSY);
				assert_non_null(strstr(r[i].err.msg, "is mounted at"));
			}
		}
		assert_true(won >= 0);
		assert_true(test_is_mountpoint(e->target[won]));
		assert_false(test_is_mountpoint(e->target[1 - won]));
		test_blkid_value(e->dev, "UUID", uuid, sizeof(uuid));
		assert_true(uuid[0] != '\0');
		/* Once more by the loser's name, while mounted: refused, the filesystem kept. */
		assert_int_equal(mnt_util_umount(e->target[won], 0, NULL), 0);
		race_mount(&(struct racer){
			.e = e, .path = r[1 - won].path, .index = 1 - won, .go = &go });
		test_blkid_value(e->dev, "UUID", uuid_after, sizeof(uuid_after));
		assert_string_equal(uuid, uuid_after);
		assert_true(test_is_mountpoint(e->target[1 - won]));
		assert_int_equal(mnt_util_umount(e->target[1 - won], 0, NULL), 0);
		/* Blank again for the next round: all of it, backups included (zeroing the start
		 * alone leaves the backup superblocks, which the guard rightly refuses). */
		assert_int_equal(test_run(
					 (const char *const[]){ "blkdiscard", "-f", e->dev, NULL }),
				 0);
	}
}

struct locker {
	const char *path;
	atomic_int locked;
	dev_t rdev;
};

static void *lock_thread(void *arg)
{
	struct locker *l = arg;
	struct stat st;

	assert_int_equal(stat(l->path, &st), 0);
	l->rdev = st.st_rdev;
	blkdev_lock_format(l->rdev);
	atomic_store(&l->locked, 1);
	blkdev_unlock_format(l->rdev);
	return NULL;
}

static bool is_locked(void *arg)
{
	return atomic_load(&((struct locker *)arg)->locked);
}

/* The lock is per device: a second path of a locked device waits for the unlock; another
 * device does not. */
static void test_lock_is_per_device(void **state)
{
	struct env *e = *state;
	char img2[600], dev2[32];
	struct locker same = { .path = e->link }, other = { .path = dev2 };
	pthread_t t1, t2;
	struct stat st;
	dev_t rdev;

	snprintf(img2, sizeof(img2), "%s/other.img", e->dir);
	assert_int_equal(test_make_sparse(img2, 16 << 20), 0);
	assert_int_equal(test_loop_attach(img2, dev2), 0);
	assert_int_equal(stat(e->dev, &st), 0);
	rdev = st.st_rdev;
	blkdev_lock_format(rdev);
	assert_int_equal(pthread_create(&t1, NULL, lock_thread, &same), 0);
	assert_int_equal(pthread_create(&t2, NULL, lock_thread, &other), 0);
	assert_true(test_wait_until(is_locked, &other, 10000));
	/* The other device got its lock; the same device's second path still waits. */
	assert_false(is_locked(&same));
	blkdev_unlock_format(rdev);
	assert_true(test_wait_until(is_locked, &same, 10000));
	assert_int_equal(pthread_join(t1, NULL), 0);
	assert_int_equal(pthread_join(t2, NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_zeroed_superblock_4k_blocks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_zeroed_superblock_1k_blocks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_blank_device_is_formatted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_paths_one_format, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_is_per_device, setup, teardown),
		cmocka_unit_test_setup_teardown(test_recorded_filesystem, setup, teardown),
		cmocka_unit_test_setup_teardown(test_agent_keeps_record_across_reboot, agent_setup,
						agent_teardown),
		cmocka_unit_test_setup_teardown(test_csi_record_across_reboot, csi_setup,
						csi_env_teardown),
	};

	if (!test_have_root()) {
		printf("test-format-guard: needs root (loop devices, mounts)\n");
		return 77;
	}
	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
