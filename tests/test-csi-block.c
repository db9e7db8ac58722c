/* test-csi-block.c - raw block CSI volumes of the local plugin on real loop devices, through
 * the real CSI server (`volagent run --csi`) and a real gRPC client (tests/csi/csi_client.py):
 * a read-only NodePublishVolume (the published file is a read-only bind that the kernel
 * refuses writes through, reads work, a restart adopts it, unpublish removes it and the
 * read-only loop device under it, and a read-write publish of the same staged volume still
 * writes), and NodeExpandVolume after the loop device grew (the
 * answer is the device's new size; an xfs staged volume still grows as before), and a publish
 * the journal lost in a crash (the repeat adopts the bind in place), and kubelet's side of
 * the paths (a publish whose parent kubelet removed is refused and makes nothing; stats at
 * kubelet's own bind of the published file).  Root,
 * private mount namespace; the fixture stops the agent and detaches every loop device even on
 * failure. */
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
#include <linux/fs.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "check-util.h"
#include "csi-calls.h"
#include "csi-env.h"
#include "testlib.h"

#define CAP_BLOCK_MULTI "{\"block\": {}, \"access_mode\": {\"mode\": \"SINGLE_NODE_MULTI_WRITER\"}}"
#define CAP_XFS \
	"{\"mount\": {\"fs_type\": \"xfs\"}, \"access_mode\": {\"mode\": \"SINGLE_NODE_WRITER\"}}"

static int csi_setup(void **state)
{
	*state = csi_env_new("csiblock");
	return 0;
}

/* Kubelet's block layout for volume pv: the staging dir (made) and the publish target of pod
 * uid (its parent made; the file is the driver's to make). */
static void block_paths(struct csi_env *e, const char *pv, const char *uid, char *stg, char *target)
{
	snprintf(stg, 700, "%s/plugins/kubernetes.io/csi/volumeDevices/staging/%s", e->kubelet, pv);
	snprintf(target, 800, "%s/plugins/kubernetes.io/csi/volumeDevices/publish/%s", e->kubelet,
		 pv);
	assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", stg, target, NULL }), 0);
	strcat(target, "/");
	strcat(target, uid);
}

static bool is_block_node(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISBLK(st.st_mode);
}

static bool path_is_gone(const char *path)
{
	return access(path, F_OK) < 0 && errno == ENOENT;
}

/* A loop device (its sysfs dir) and the backing file it had: once it is detached, its number
 * may serve another file at once (another test's loop), so "gone" is "not over that file". */
struct loop_over {
	char sys[64];
	char *backing;
};

static char *loop_attr(const struct loop_over *l, const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/loop/%s", l->sys, name);
	return test_read_file(path);
}

static bool loop_still_over(const struct loop_over *l)
{
	char *now = loop_attr(l, "backing_file");
	bool same = now && strcmp(now, l->backing) == 0;

	free(now);
	return same;
}

static bool loop_detached(void *l)
{
	return !loop_still_over(l);
}

static dev_t st_rdev_of(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return st.st_rdev;
}

static long long device_bytes(const char *path)
{
	unsigned long long bytes = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(ioctl(fd, BLKGETSIZE64, &bytes), 0);
	close(fd);
	return (long long)bytes;
}

/* The loop device dev's backing file img grows to size, and the loop is told
 * (LOOP_SET_CAPACITY), as an operator or a cloud disk resize does. */
static void grow_loop(const char *dev, const char *img, long long size)
{
	int lfd;

	assert_int_equal(truncate(img, size), 0);
	lfd = open(dev, O_RDWR | O_CLOEXEC);
	assert_true(lfd >= 0);
	assert_int_equal(ioctl(lfd, LOOP_SET_CAPACITY, 0), 0);
	close(lfd);
	assert_int_equal(device_bytes(dev), size);
}

static void test_readonly_block_publish(void **state)
{
	struct csi_env *e = *state;
	const char *dev = fixture_add_loop(e->f, 32 << 20);
	char stg[700], t_ro[800], t_rw[800], ctx[200], calls[8192] = "", *out;
	struct stat st;
	char journal[700];
	struct loop_over ro_loop = { .backing = NULL };
	dev_t ro_rdev;
	long off;
	int id;

	assert_non_null(dev);
	block_paths(e, "pv-ro", "pod-r", stg, t_ro);
	block_paths(e, "pv-ro", "pod-w", stg, t_rw);
	csi_local_ctx(dev, ctx);
	assert_int_equal(test_direct_write(dev, 'A'), 0);
	csi_env_start(e);

	csi_calls_stage(calls, sizeof(calls), "ro", stg, CAP_BLOCK_MULTI, ctx, NULL);
	for (int i = 0; i < 2; i++)
		csi_calls_publish(calls, sizeof(calls), "ro", stg, t_ro, CAP_BLOCK_MULTI, ctx,
				  "\"readonly\": true");
	out = csi_env_call(e, calls);
	assert_line(out, 0, "OK {}");
	assert_line(out, 1, "OK {}");
	assert_line(out, 2, "OK {}"); /* a repeat: idempotent */
	free(out);

	/* The published file: a read-only bind of a block device; reads see the device's bytes,
	 * writes are refused by the kernel (at open or at the write). */
	assert_true(is_block_node(t_ro));
	assert_true(test_is_mountpoint(t_ro));
	assert_true(test_mount_is_ro(t_ro));
	assert_true(test_direct_read_is(t_ro, 'A'));
	assert_block_write_refused(t_ro);
	assert_true(test_direct_read_is(dev, 'A'));
	assert_true(stat(t_ro, &st) == 0);
	ro_rdev = st.st_rdev;
	if (ro_rdev != st_rdev_of(dev)) { /* a read-only loop over dev */
		snprintf(ro_loop.sys, sizeof(ro_loop.sys), "/sys/dev/block/%u:%u", major(ro_rdev),
			 minor(ro_rdev));
		ro_loop.backing = loop_attr(&ro_loop, "backing_file");
		assert_non_null(ro_loop.backing);
	}

	/* Once the journal has it: SIGKILL and restart; kubelet publishes again: the read-only
	 * bind is adopted, not made again. */
	snprintf(journal, sizeof(journal), "%s/journal.json", e->f->state);
	assert_true(test_wait_file_text(journal, t_ro, true, 10000));
	id = test_mount_id(t_ro);
	assert_int_equal(fixture_stop(e->f, SIGKILL), 128 + SIGKILL);
	off = fixture_log_size(e->f);
	csi_env_start(e);
	csi_env_call_ok(e, calls, 2);
	assert_int_equal(test_mount_id(t_ro), id);
	assert_false(fixture_wait_log_after(e->f, off, "msg=\"volume mounted\"", 200));
	assert_block_write_refused(t_ro);

	/* A read-write publish of the same staged volume still writes, to the device. */
	calls[0] = '\0';
	csi_calls_publish(calls, sizeof(calls), "ro", stg, t_rw, CAP_BLOCK_MULTI, ctx, NULL);
	csi_env_call_ok(e, calls, 1);
	assert_false(test_mount_is_ro(t_rw));
	assert_int_equal(test_direct_write(t_rw, 'B'), 0);
	assert_true(test_direct_read_is(dev, 'B'));
	/* The read-only file still refuses writes with a writer beside it. */
	assert_block_write_refused(t_ro);

	/* Unpublish of the read-only target removes its bind and its file only. */
	calls[0] = '\0';
	csi_calls_unpublish(calls, sizeof(calls), "ro", t_ro);
	csi_calls_unpublish(calls, sizeof(calls), "ro", t_ro);
	out = csi_env_call(e, calls);
	assert_line(out, 0, "OK {}");
	assert_line(out, 1, "OK {}"); /* again: already gone, OK */
	free(out);
	assert_true(path_is_gone(t_ro));
	/* The device under the read-only file is detached with it, when it was not the volume's
	 * own device (a read-only loop over it).  Detached at once, or, when another process had
	 * it open at that moment (a blkid probe of every block device: udev's, another agent's
	 * device inventory on some uevent, a test's blkid), LOOP_CLR_FD only marks it autoclear
	 * and the kernel detaches it at that process's last close: marked now, gone soon. */
	if (ro_loop.backing) {
		if (loop_still_over(&ro_loop)) {
			char *flag = loop_attr(&ro_loop, "autoclear");
			bool marked = flag && flag[0] == '1';

			free(flag);
			assert_true(marked || loop_detached(&ro_loop));
		}
		assert_true(test_wait_until(loop_detached, &ro_loop, 10000));
		free(ro_loop.backing);
	}
	assert_true(test_is_mountpoint(t_rw));
	assert_int_equal(test_direct_write(t_rw, 'C'), 0);
	assert_true(test_direct_read_is(dev, 'C'));

	/* And the rest goes: no mount is left under kubelet's dir, the bytes stay. */
	calls[0] = '\0';
	csi_calls_unpublish(calls, sizeof(calls), "ro", t_rw);
	csi_calls_unstage(calls, sizeof(calls), "ro", stg);
	csi_env_call_ok(e, calls, 2);
	assert_true(path_is_gone(t_rw));
	assert_int_equal(test_count_mounts_under(e->kubelet), 0);
	assert_true(test_direct_read_is(dev, 'C'));
	assert_int_equal(fixture_stop(e->f, SIGTERM), 0);
}

/* The first "capacity_bytes" of answer line n, or -1. */
static long long capacity_of(const char *out, int n)
{
	const char *s = strstr(csi_line(out, n), "\"capacity_bytes\": \"");

	return s ? atoll(s + strlen("\"capacity_bytes\": \"")) : -1;
}

static void test_block_expand(void **state)
{
	struct csi_env *e = *state;
	const char *dev = fixture_add_loop(e->f, 32 << 20);
	const char *fsdev = fixture_add_loop(e->f, 512LL << 20); /* xfs wants >= 300 MiB */
	char stg[700], t1[800], fs_stg[700], fs_t[700], ctx[200], fs_ctx[200], img[700];
	char calls[8192] = "", file[800], *out, *s;
	long long fs_before;

	assert_non_null(dev);
	assert_non_null(fsdev);
	block_paths(e, "pv-grow", "pod-g", stg, t1);
	csi_env_staging(e, "fs-grow", fs_stg);
	csi_env_target(e, "pod-f", "pv-fs", fs_t);
	csi_local_ctx(dev, ctx);
	csi_local_ctx(fsdev, fs_ctx);
	csi_env_start(e);

	csi_calls_stage(calls, sizeof(calls), "grow", stg, CSI_CAP_BLOCK, ctx, NULL);
	csi_calls_publish(calls, sizeof(calls), "grow", stg, t1, CSI_CAP_BLOCK, ctx, NULL);
	csi_calls_add(calls, sizeof(calls),
		      "Node/NodeExpandVolume {\"volume_id\": \"grow\", \"volume_path\": \"%s\"}\n",
		      t1);
	csi_calls_stage(calls, sizeof(calls), "fs", fs_stg, CAP_XFS, fs_ctx, NULL);
	csi_calls_publish(calls, sizeof(calls), "fs", fs_stg, fs_t, CAP_XFS, fs_ctx, NULL);
	csi_calls_stats(calls, sizeof(calls), "fs", fs_t);
	out = csi_env_call(e, calls);
	assert_line(out, 0, "OK {}");
	assert_line(out, 1, "OK {}");
	/* Nothing grew yet: the size it has. */
	assert_int_equal(capacity_of(out, 2), 32 << 20);
	assert_line(out, 3, "OK {}");
	assert_line(out, 4, "OK {}");
	s = strstr(csi_line(out, 5), "\"total\": \"");
	assert_non_null(s);
	fs_before = atoll(s + strlen("\"total\": \""));
	free(out);
	assert_true(is_block_node(t1));
	snprintf(file, sizeof(file), "%s/data", fs_t);
	assert_int_equal(test_write_file(file, "fs-data"), 0);

	/* Both devices grow; expand answers the block device's new size, and grows ext4. */
	snprintf(img, sizeof(img), "%s/disk0.img", e->f->dir);
	grow_loop(dev, img, 48 << 20);
	snprintf(img, sizeof(img), "%s/disk1.img", e->f->dir);
	grow_loop(fsdev, img, 1LL << 30);
	snprintf(calls, sizeof(calls),
		 "Node/NodeExpandVolume {\"volume_id\": \"grow\", \"volume_path\": \"%s\", "
		 "\"capacity_range\": {\"required_bytes\": \"%d\"}}\n"
		 "Node/NodeGetVolumeStats {\"volume_id\": \"grow\", \"volume_path\": \"%s\"}\n"
		 "Node/NodeExpandVolume {\"volume_id\": \"grow\", \"volume_path\": \"%s\", "
		 "\"capacity_range\": {\"required_bytes\": \"%d\"}}\n"
		 "Node/NodeExpandVolume {\"volume_id\": \"fs\", \"volume_path\": \"%s\", "
		 "\"capacity_range\": {\"required_bytes\": \"%d\"}}\n"
		 "Node/NodeGetVolumeStats {\"volume_id\": \"fs\", \"volume_path\": \"%s\"}\n",
		 t1, 48 << 20, t1, t1, 64 << 20, fs_t, 1 << 30, fs_t);
	out = csi_env_call(e, calls);
	assert_int_equal(capacity_of(out, 0), 48 << 20);
	assert_int_equal(capacity_of(out, 0), device_bytes(dev));
	assert_line(out, 1, "\"total\": \"50331648\"");
	/* More than the device has: OUT_OF_RANGE, nothing changed. */
	assert_line(out, 2, "ERR OUT_OF_RANGE");
	/* The filesystem staged volume: xfs grown online to the device's new size. */
	assert_int_equal(capacity_of(out, 3), 1 << 30);
	s = strstr(csi_line(out, 4), "\"total\": \"");
	assert_non_null(s);
	assert_true(atoll(s + strlen("\"total\": \"")) > fs_before + (400LL << 20));
	free(out);
	assert_int_equal(device_bytes(t1), 48 << 20);
	s = test_read_file(file);
	assert_non_null(s);
	assert_string_equal(s, "fs-data");
	free(s);

	calls[0] = '\0';
	csi_calls_unpublish(calls, sizeof(calls), "grow", t1);
	csi_calls_unstage(calls, sizeof(calls), "grow", stg);
	csi_calls_unpublish(calls, sizeof(calls), "fs", fs_t);
	csi_calls_unstage(calls, sizeof(calls), "fs", fs_stg);
	out = csi_env_call(e, calls);
	for (int i = 0; i < 4; i++)
		assert_line(out, i, "OK {}");
	free(out);
	csi_env_stop_clean(e);
}

/* A crash can lose the journal's last CSI entries (they are saved a moment after each call):
 * here the journal of before the publish is put back after a SIGKILL, exactly what such a
 * crash leaves.  kubelet publishes again: the bind already in place is adopted (the same
 * mount ID, logged as adopted), not made again and not logged as mounted. */
static void test_publish_lost_by_journal_adopted(void **state)
{
	struct csi_env *e = *state;
	const char *dev = fixture_add_loop(e->f, 32 << 20);
	char stg[700], t1[800], ctx[200], stage[4096] = "", publish[4096] = "", saved[800], *old;
	char journal[700];
	long off;
	int id;

	assert_non_null(dev);
	block_paths(e, "pv-lost", "pod-l", stg, t1);
	csi_local_ctx(dev, ctx);
	csi_calls_stage(stage, sizeof(stage), "lost", stg, CSI_CAP_BLOCK, ctx, NULL);
	csi_calls_publish(publish, sizeof(publish), "lost", stg, t1, CSI_CAP_BLOCK, ctx, NULL);
	csi_env_start(e);
	snprintf(journal, sizeof(journal), "%s/journal.json", e->f->state);

	csi_env_call_ok(e, stage, 1);
	assert_true(test_wait_file_text(journal, stg, true, 10000));
	old = test_read_file(journal);
	assert_non_null(old);
	assert_null(strstr(old, t1));

	csi_env_call_ok(e, publish, 1);
	assert_true(test_wait_file_text(journal, t1, true, 10000));
	id = test_mount_id(t1);
	assert_true(id > 0);
	assert_int_equal(fixture_stop(e->f, SIGKILL), 128 + SIGKILL);
	snprintf(saved, sizeof(saved), "%s/journal.json", e->f->state);
	assert_int_equal(test_write_file(saved, old), 0);
	free(old);

	off = fixture_log_size(e->f);
	csi_env_start(e);
	csi_env_call_ok(e, stage, 1);
	csi_env_call_ok(e, publish, 1);
	assert_int_equal(test_mount_id(t1), id);
	assert_true(fixture_wait_log_after(e->f, off, "msg=\"adopted existing mount\"", 10000));
	assert_true(fixture_log_find(e->f, "adopted existing mount", t1) >= 0);
	assert_false(fixture_wait_log_after(e->f, off, "msg=\"volume mounted\"", 200));
	assert_false(fixture_wait_log_after(e->f, off, "msg=\"device mounted\"", 10));

	publish[0] = '\0';
	csi_calls_unpublish(publish, sizeof(publish), "lost", t1);
	csi_calls_unstage(publish, sizeof(publish), "lost", stg);
	csi_env_call_ok(e, publish, 2);
	assert_true(path_is_gone(t1));
	csi_env_stop_clean(e);
}

/* An empty file at path with the block device (or published file) src bound over it: what
 * kubelet does at volumeDevices/<pv>/dev/<pod uid> after a publish (MapBlockVolume). */
static void kubelet_bind(const char *src, const char *path)
{
	char dir[800];
	int fd;

	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", dir, NULL }), 0);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(mount(src, path, NULL, MS_BIND, NULL), 0);
}

/* Kubelet's side of a raw block volume: a publish whose parent (volumeDevices/publish/<pv>/,
 * kubelet's) is missing is refused with a final code and makes nothing, and the same call
 * succeeds once kubelet has made it; NodeGetVolumeStats at kubelet's own bind of the
 * published file (volumeDevices/<pv>/dev/<pod uid>) answers the device's size, while a path
 * holding another device, or no device, is NOT_FOUND. */
static void test_block_kubelet_paths(void **state)
{
	struct csi_env *e = *state;
	const char *dev = fixture_add_loop(e->f, 32 << 20);
	const char *other = fixture_add_loop(e->f, 16 << 20);
	char stg[700], target[800], parent[800], kdev[800], kother[800], kfile[800], ctx[200];
	char ro[800], kro[800];
	char calls[8192] = "", publish[2048] = "", *out;
	int fd;

	assert_non_null(dev);
	assert_non_null(other);
	block_paths(e, "pv-k", "pod-k", stg, target);
	snprintf(parent, sizeof(parent),
		 "%s/plugins/kubernetes.io/csi/volumeDevices/publish/pv-gone", e->kubelet);
	snprintf(target, sizeof(target), "%s/pod-k", parent);
	csi_local_ctx(dev, ctx);
	csi_env_start(e);

	csi_calls_publish(publish, sizeof(publish), "k", stg, target, CAP_BLOCK_MULTI, ctx, NULL);
	csi_calls_stage(calls, sizeof(calls), "k", stg, CAP_BLOCK_MULTI, ctx, NULL);
	strcat(calls, publish);
	out = csi_env_call(e, calls);
	assert_line(out, 0, "OK {}");
	csi_assert_parent_missing(out, 1, parent);
	free(out);
	assert_true(path_is_gone(parent));
	assert_int_equal(test_count_mounts_under(e->kubelet), 1); /* the staged device only */

	/* Kubelet makes the parent: the same call succeeds. */
	assert_int_equal(mkdir(parent, 0750), 0);
	csi_env_call_ok(e, publish, 1);
	assert_true(is_block_node(target));

	/* A read-only publish binds a read-only loop device over the volume's device. */
	snprintf(ro, sizeof(ro), "%s/pod-ro", parent);
	calls[0] = '\0';
	csi_calls_publish(calls, sizeof(calls), "k", stg, ro, CAP_BLOCK_MULTI, ctx,
			  "\"readonly\": true");
	csi_env_call_ok(e, calls, 1);
	assert_true(st_rdev_of(ro) != st_rdev_of(dev)); /* stats must look through the loop */

	/* Kubelet's binds of the published files, and files holding another device or none. */
	snprintf(kdev, sizeof(kdev), "%s/plugins/kubernetes.io/csi/volumeDevices/pv-k/dev/pod-k",
		 e->kubelet);
	snprintf(kother, sizeof(kother),
		 "%s/plugins/kubernetes.io/csi/volumeDevices/pv-k/dev/pod-other", e->kubelet);
	snprintf(kfile, sizeof(kfile),
		 "%s/plugins/kubernetes.io/csi/volumeDevices/pv-k/dev/pod-file", e->kubelet);
	snprintf(kro, sizeof(kro), "%s/plugins/kubernetes.io/csi/volumeDevices/pv-k/dev/pod-ro",
		 e->kubelet);
	const struct {
		const char *path, *answer;
	} stats[] = {
		{ kdev, "\"total\": \"33554432\"" },
		{ kother, "NOT_FOUND" },
		{ kfile, "NOT_FOUND" },
		{ kro, "\"total\": \"33554432\"" },
	};
	kubelet_bind(target, kdev);
	kubelet_bind(ro, kro);
	kubelet_bind(other, kother);
	fd = open(kfile, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	calls[0] = '\0';
	for (int i = 0; i < 4; i++)
		csi_calls_stats(calls, sizeof(calls), "k", stats[i].path);
	out = csi_env_call(e, calls);
	for (int i = 0; i < 4; i++)
		assert_line(out, i, stats[i].answer);
	assert_line(out, 0, "\"unit\": \"BYTES\"");
	free(out);

	/* Kubelet's teardown: its own binds first, then unpublish and unstage. */
	assert_int_equal(umount2(kdev, MNT_DETACH), 0);
	assert_int_equal(umount2(kro, MNT_DETACH), 0);
	assert_int_equal(umount2(kother, MNT_DETACH), 0);
	calls[0] = '\0';
	csi_calls_unpublish(calls, sizeof(calls), "k", target);
	csi_calls_unpublish(calls, sizeof(calls), "k", ro);
	csi_calls_unstage(calls, sizeof(calls), "k", stg);
	csi_env_call_ok(e, calls, 3);
	csi_env_stop_clean(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_readonly_block_publish, csi_setup,
						csi_env_teardown),
		cmocka_unit_test_setup_teardown(test_block_expand, csi_setup, csi_env_teardown),
		cmocka_unit_test_setup_teardown(test_publish_lost_by_journal_adopted, csi_setup,
						csi_env_teardown),
		cmocka_unit_test_setup_teardown(test_block_kubelet_paths, csi_setup,
						csi_env_teardown),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
