/* test-device-in-use.c - a device in use is refused with the reason, never mounted again nor
 * formatted: an ext4 device already mounted on the host (by the test, in the mount namespace
 * the agent shares), a blank device held open O_EXCL by another process (the test itself),
 * and without fsType a filesystem the agent does not create (minix).  Real agent, real loop
 * devices; root, private mount namespace. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "testlib.h"

#define WAIT_MS 10000

static int setup(void **state)
{
	*state = fixture_new("inuse");
	return 0;
}

static int teardown(void **state)
{
	struct agent_fixture *f = *state;

	fixture_free(f);
	return 0;
}

/* An ext4 device mounted at <dir>/host: refused naming where it is mounted; the host's mount
 * stays the only one of it. */
static void test_mounted_device_refused(void **state)
{
	struct agent_fixture *f = *state;
	const char *dev = fixture_add_loop(f, 32 << 20);
	char host[600], file[700], d[512];

	assert_non_null(dev);
	assert_int_equal(test_mkfs("ext4", dev), 0);
	snprintf(host, sizeof(host), "%s/host", f->dir);
	mkdir(host, 0755);
	assert_int_equal(mount(dev, host, "ext4", 0, NULL), 0);
	snprintf(file, sizeof(file), "%s/host-data", host);
	assert_int_equal(test_write_file(file, "host\n"), 0);
	assert_int_equal(fixture_write_local_pod(f, "one", "disk", dev), 0);
	assert_int_equal(fixture_start(f, NULL), 0);
	fixture_pod_dir(f, "one", "disk", d);
	assert_true(fixture_wait_log(f, "is mounted at", WAIT_MS));
	assert_true(fixture_log_find(f, "cannot be claimed", host) >= 0);
	assert_int_equal(test_count_mounts_under(f->root), 0);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
	assert_int_equal(umount(host), 0);
}

/* A blank device another process holds O_EXCL: refused, and not formatted. */
static void test_exclusively_held_device_refused(void **state)
{
	struct agent_fixture *f = *state;
	const char *dev = fixture_add_loop(f, 32 << 20);
	char d[512], type[32];
	int fd;

	assert_non_null(dev);
	fd = open(dev, O_RDONLY | O_EXCL | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fixture_write_local_pod(f, "one", "disk", dev), 0);
	assert_int_equal(fixture_start(f, NULL), 0);
	fixture_pod_dir(f, "one", "disk", d);
	assert_true(fixture_wait_log(f, "open exclusively by another process", WAIT_MS));
	assert_int_equal(test_count_mounts_under(f->root), 0);
	test_blkid_value(dev, "TYPE", type, sizeof(type));
	assert_string_equal(type, ""); /* not formatted */
	/* Released, the same device is formatted and mounted. */
	close(fd);
	assert_true(fixture_wait_mounted(d, 60000));
	test_blkid_value(dev, "TYPE", type, sizeof(type));
	assert_string_equal(type, "ext4");
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

/* Without fsType only a filesystem the agent creates is mounted: minix is refused. */
static void test_other_filesystem_needs_fstype(void **state)
{
	struct agent_fixture *f = *state;
	const char *dev = fixture_add_loop(f, 8 << 20);
	char d[512];

	assert_non_null(dev);
	assert_int_equal(test_run((const char *const[]){ "mkfs.minix", dev, NULL }), 0);
	assert_int_equal(fixture_write_local_pod(f, "one", "disk", dev), 0);
	assert_int_equal(fixture_start(f, NULL), 0);
	fixture_pod_dir(f, "one", "disk", d);
	assert_true(fixture_wait_log(f, "not one the agent creates", WAIT_MS));
	assert_int_equal(test_count_mounts_under(f->root), 0);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_mounted_device_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exclusively_held_device_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_other_filesystem_needs_fstype, setup,
						teardown),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
