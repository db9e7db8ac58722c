/* test-device-fs.c - the format-once-and-mount step the local and rbd plugins share
 * (plugins/device-fs.c), on real loop devices in a private mount namespace.
 *
 * Defect 2 of issue 11: the mount options were joined into a fixed 1024-byte buffer and
 * truncated silently; "ro", appended last, was lost first, so a read-only volume with a long
 * mountOptions list came out read-write.  A long list must now mount read-only, and one the
 * kernel cannot take whole must be refused naming mountOptions (and leave the device alone).
 * The agent's own mounts are nosuid and nodev unless the volume asks "suid" or "dev". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "blkdev.h"
#include "device-fs.h"
#include "mount-util.h"
#include "plugin.h"
#include "testlib.h"

struct env {
	char *dir;
	char img[512];
	char dev[32];
	char target[512];
	int parent_fd;
};

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));

	e->dir = test_mkdtemp("device-fs");
	snprintf(e->img, sizeof(e->img), "%s/disk.img", e->dir);
	snprintf(e->target, sizeof(e->target), "%s/mnt", e->dir);
	assert_int_equal(test_make_sparse(e->img, 64 << 20), 0);
	assert_int_equal(test_loop_attach(e->img, e->dev), 0);
	assert_int_equal(mkdir(e->target, 0755), 0);
	e->parent_fd = open(e->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(e->parent_fd >= 0);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;

	while (test_is_mountpoint(e->target))
		if (mnt_util_umount(e->target, 0, NULL) < 0)
			break;
	close(e->parent_fd);
	test_loop_detach(e->dev);
	test_rm_rf(e->dir);
	free(e->dir);
	free(e);
	return 0;
}

/* A spec of type for the loop device, readOnly, with n copies of "noatime" as mountOptions. */
static struct volume_spec *long_options_spec(const char *type, const char *dev, size_t n)
{
	struct volume_spec *s = volume_spec_new(type);

	assert_non_null(s);
	if (!strcmp(type, "local"))
		assert_int_equal(volume_spec_set(s, "path", dev), 0);
	s->read_only = true;
	for (size_t i = 0; i < n; i++)
		assert_int_equal(volume_spec_add_mount_option(s, "noatime"), 0);
	return s;
}

static void mount_read_only_with_long_options(struct env *e, const char *plugin)
{
	const struct volume_plugin *p = plugin_find_by_name(plugin);
	/* 150 x "noatime," is 1199 bytes: more than the old 1024-byte buffer held. */
	struct volume_spec *s = long_options_spec(plugin, e->dev, 150);
	struct error_info err = { 0 };
	char probe_file[600];
	int fd;

	assert_non_null(p);
	assert_int_equal(test_mkfs("ext4", e->dev), 0);
	assert_int_equal(plugin_mount_device(p, s, e->dev, true,
					     &(struct mount_target){ .path = e->target,
								     .parent_fd = e->parent_fd,
								     .name = "mnt" },
					     &err),
			 0);
	assert_true(test_is_mountpoint(e->target));
	assert_true(test_mount_is_ro(e->target));
	snprintf(probe_file, sizeof(probe_file), "%s/written", e->target);
	fd = open(probe_file, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	assert_int_equal(fd, -1);
	assert_int_equal(errno, EROFS);
	volume_spec_unref(s);
}

static void test_local_long_options_stay_read_only(void **state)
{
	mount_read_only_with_long_options(*state, "local");
}

static void test_rbd_long_options_stay_read_only(void **state)
{
	/* rbd's mount_device takes the attached device as given: a loop device stands in. */
	mount_read_only_with_long_options(*state, "rbd");
}

static void test_options_longer_than_a_page_are_refused(void **state)
{
	struct env *e = *state;
	const struct volume_plugin *p = plugin_find_by_name("local");
	struct volume_spec *s = long_options_spec("local", e->dev, 1000); /* 7999 bytes */
	struct error_info err = { 0 };
	struct blkdev_probe probe;

	s->read_only = false; /* a writable volume on a blank device: it would be formatted */
	assert_int_equal(plugin_mount_device(p, s, e->dev, false,
					     &(struct mount_target){ .path = e->target,
								     .parent_fd = e->parent_fd,
								     .name = "mnt" },
					     &err),
			 -E2BIG);
	assert_non_null(strstr(err.msg, "mountOptions"));
	assert_false(test_is_mountpoint(e->target));
	/* Refused before mkfs: the device is still blank. */
	assert_int_equal(blkdev_probe(e->dev, &probe, NULL), 0);
	assert_true(probe.blank);
	volume_spec_unref(s);
}

static void test_join_options(void **state)
{
	char *opts[] = { "noatime", "discard", NULL }, *joined = NULL;
	struct error_info err = { 0 };

	char *asks[] = { "suid", "dev", NULL };

	assert_int_equal(device_fs_join_options(opts, true, &joined, &err), 0);
	assert_string_equal(joined, "noatime,discard,ro,nosuid,nodev");
	free(joined);
	assert_int_equal(device_fs_join_options(opts, false, &joined, &err), 0);
	assert_string_equal(joined, "noatime,discard,nosuid,nodev");
	free(joined);
	assert_int_equal(device_fs_join_options(NULL, true, &joined, &err), 0);
	assert_string_equal(joined, "ro,nosuid,nodev");
	free(joined);
	assert_int_equal(device_fs_join_options(asks, false, &joined, &err), 0);
	assert_string_equal(joined, "suid,dev");
	free(joined);
}

/* The mount's flags as the kernel reports them (statvfs): nosuid and nodev by default, and
 * neither when the volume asks "suid" and "dev". */
static void test_mount_flags(void **state)
{
	struct env *e = *state;
	const struct volume_plugin *p = plugin_find_by_name("local");
	struct volume_spec *s = volume_spec_new("local");
	struct error_info err = { 0 };
	const struct mount_target t = { .path = e->target,
					.parent_fd = e->parent_fd,
					.name = "mnt" };
	struct statvfs sv;

	assert_non_null(s);
	assert_int_equal(volume_spec_set(s, "path", e->dev), 0);
	assert_int_equal(plugin_mount_device(p, s, e->dev, false, &t, &err), 0);
	assert_int_equal(statvfs(e->target, &sv), 0);
	assert_true(sv.f_flag & ST_NOSUID);
	assert_true(sv.f_flag & ST_NODEV);
	assert_int_equal(mnt_util_umount(e->target, 0, NULL), 0);
	assert_int_equal(volume_spec_add_mount_option(s, "suid"), 0);
	assert_int_equal(volume_spec_add_mount_option(s, "dev"), 0);
	assert_int_equal(plugin_mount_device(p, s, e->dev, false, &t, &err), 0);
	assert_int_equal(statvfs(e->target, &sv), 0);
	assert_false(sv.f_flag & ST_NOSUID);
	assert_false(sv.f_flag & ST_NODEV);
	volume_spec_unref(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_join_options),
		cmocka_unit_test_setup_teardown(test_mount_flags, setup, teardown),
		cmocka_unit_test_setup_teardown(test_local_long_options_stay_read_only, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rbd_long_options_stay_read_only, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_options_longer_than_a_page_are_refused, setup,
						teardown),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
