/* test-mount-utab.c - libmount's utab as the agent keeps it (lib/mount-utab.c): a mount made
 * with userspace options gets an entry, and its unmount drops it; an entry someone else wrote
 * for a target the agent unmounts is dropped too, and the other entries stay; with no utab,
 * unmounts make none; with an empty one, an unmount does not wait for utab's lock (held here
 * as a hung mount(8) would hold it).  Real tmpfs mounts, in a private mount namespace with
 * its own /run/mount. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libmount.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mount-util.h"
#include "testlib.h"

#define UTAB "/run/mount/utab"

/* An unmount on a thread of its own (test_empty_utab_no_lock_taken). */
struct unmount_call {
	const char *path;
	int r;
	bool done;
	pthread_mutex_t lock;
};

struct fixture {
	char *dir;
	int dir_fd;
	/* Held by a case, released by the teardown too when the case fails. */
	int lock_fd;
	bool thread_started;
	pthread_t thread;
	struct unmount_call call;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->dir = test_mkdtemp("mountutab");
	f->dir_fd = open(f->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->dir_fd >= 0);
	f->lock_fd = -1;
	pthread_mutex_init(&f->call.lock, NULL);
	(void)unlink(UTAB);
	*state = f;
	return 0;
}

static int umount2at_detach(const char *dir, const char *name)
{
	char path[800];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return umount2(path, MNT_DETACH);
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	DIR *d;

	/* A case that failed: the unmount thread let go (it finishes once the lock is free),
	 * and what it left mounted detached, so that the dir can go. */
	if (f->lock_fd >= 0)
		close(f->lock_fd);
	if (f->thread_started)
		pthread_join(f->thread, NULL);
	if ((d = opendir(f->dir))) {
		struct dirent *e;

		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				(void)umount2at_detach(f->dir, e->d_name);
		closedir(d);
	}
	test_rm_rf(f->dir);
	close(f->dir_fd);
	free(f->dir);
	free(f);
	return 0;
}

/* f->dir/name, made and mounted with a tmpfs through the agent's mount path, with options. */
static void mount_tmpfs(struct fixture *f, const char *name, const char *options, char *path,
			size_t size)
{
	struct error_info err = { 0 };

	snprintf(path, size, "%s/%s", f->dir, name);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(mnt_util_mount_at("tmpfs", f->dir_fd, name, "tmpfs", options, &err), 0);
	assert_true(test_is_mountpoint(path));
}

static void unmount(const char *path)
{
	struct error_info err = { 0 };

	assert_int_equal(mnt_util_umount(path, 0, &err), 0);
	assert_false(test_is_mountpoint(path));
}

static void assert_entry(const char *target, const char *want)
{
	char *opts = test_utab_options(target);

	assert_non_null(opts);
	assert_non_null(strstr(opts, want));
	free(opts);
}

static void assert_no_entry(const char *target)
{
	char *opts = test_utab_options(target);

	assert_null(opts);
}

/* An entry for target with options, written through libmount as mount(8) would: someone
 * else's. */
static void write_foreign_entry(const char *target, const char *options)
{
	struct libmnt_update *upd = mnt_new_update();
	struct libmnt_fs *fs = mnt_new_fs();

	assert_non_null(upd);
	assert_non_null(fs);
	assert_int_equal(mnt_fs_set_source(fs, "tmpfs"), 0);
	assert_int_equal(mnt_fs_set_target(fs, target), 0);
	assert_int_equal(mnt_fs_set_options(fs, options), 0);
	assert_int_equal(mnt_update_set_fs(upd, 0, NULL, fs), 0);
	assert_int_equal(mnt_update_table(upd, NULL), 0);
	mnt_free_fs(fs);
	mnt_free_update(upd);
}

static void test_entry_recorded_and_dropped(void **state)
{
	char a[700];

	mount_tmpfs(*state, "a", "size=1m,x-volagent.test=a", a, sizeof(a));
	assert_entry(a, "x-volagent.test=a");
	unmount(a);
	assert_no_entry(a);
}

static void test_foreign_entry_dropped(void **state)
{
	struct fixture *f = *state;
	char kept[700], plain[700], other[700];

	mount_tmpfs(f, "kept", "size=1m,x-volagent.test=kept", kept, sizeof(kept));
	/* An unmount with no entry leaves the others. */
	mount_tmpfs(f, "plain", "size=1m", plain, sizeof(plain));
	unmount(plain);
	assert_entry(kept, "x-volagent.test=kept");
	/* Someone else's entry for a target the agent then unmounts. */
	mount_tmpfs(f, "other", "size=1m", other, sizeof(other));
	write_foreign_entry(other, "x-volagent.test=other");
	assert_entry(other, "x-volagent.test=other");
	unmount(other);
	assert_no_entry(other);
	assert_entry(kept, "x-volagent.test=kept");
	unmount(kept);
	assert_no_entry(kept);
}

static void test_no_utab_none_made(void **state)
{
	char plain[700];

	mount_tmpfs(*state, "plain", "size=1m", plain, sizeof(plain));
	assert_int_equal(access(UTAB, F_OK), -1);
	unmount(plain);
	assert_int_equal(access(UTAB, F_OK), -1);
	assert_int_equal(errno, ENOENT);
}

static void *unmount_main(void *arg)
{
	struct unmount_call *c = arg;
	struct error_info err = { 0 };
	int r = mnt_util_umount(c->path, 0, &err);

	pthread_mutex_lock(&c->lock);
	c->r = r;
	c->done = true;
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

static bool unmount_done(void *arg)
{
	struct unmount_call *c = arg;
	bool done;

	pthread_mutex_lock(&c->lock);
	done = c->done;
	pthread_mutex_unlock(&c->lock);
	return done;
}

static void test_empty_utab_no_lock_taken(void **state)
{
	struct fixture *f = *state;
	struct unmount_call *c = &f->call;
	char plain[700];

	mount_tmpfs(f, "plain", "size=1m", plain, sizeof(plain));
	assert_int_equal(test_write_file(UTAB, ""), 0);
	f->lock_fd = open(UTAB ".lock", O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(f->lock_fd >= 0);
	assert_int_equal(flock(f->lock_fd, LOCK_EX), 0);
	c->path = plain;
	assert_int_equal(pthread_create(&f->thread, NULL, unmount_main, c), 0);
	f->thread_started = true;
	/* Not blocked behind the lock: done while it is still held. */
	assert_true(test_wait_until(unmount_done, c, 5000));
	close(f->lock_fd);
	f->lock_fd = -1;
	pthread_join(f->thread, NULL);
	f->thread_started = false;
	assert_int_equal(c->r, 0);
	assert_false(test_is_mountpoint(plain));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_entry_recorded_and_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_foreign_entry_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_utab_none_made, setup, teardown),
		cmocka_unit_test_setup_teardown(test_empty_utab_no_lock_taken, setup, teardown),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
