/* test-mount-util.c - unmounting a busy mount with mnt_util_umount(): kept busy by an open
 * file it is refused with -EBUSY and stays mounted; busy for a moment only (the file closed
 * while the unmount waits to try again) it is unmounted.  Real tmpfs mounts, in a private
 * mount namespace. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "mount-util.h"
#include "testlib.h"

struct fixture {
	char *dir;
	char target[600];
	char file[700];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	f->dir = test_mkdtemp("mountutil");
	snprintf(f->target, sizeof(f->target), "%s/t", f->dir);
	snprintf(f->file, sizeof(f->file), "%s/t/f", f->dir);
	assert_int_equal(mkdir(f->target, 0755), 0);
	assert_int_equal(mount("tmpfs", f->target, "tmpfs", 0, "size=1m"), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	(void)umount2(f->target, MNT_DETACH);
	test_rm_rf(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

static void test_busy_mount_refused_and_kept(void **state)
{
	struct fixture *f = *state;
	struct error_info e = { 0 };
	int fd = open(f->file, O_CREAT | O_RDWR | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(mnt_util_umount(f->target, 0, &e), -EBUSY);
	assert_non_null(strstr(e.msg, f->target));
	assert_non_null(strstr(e.msg, "busy"));
	assert_true(test_is_mountpoint(f->target));
	close(fd);
	assert_int_equal(mnt_util_umount(f->target, 0, &e), 0);
	assert_false(test_is_mountpoint(f->target));
	assert_int_equal(mnt_util_umount(f->target, 0, &e), -EINVAL);
}

struct unmounter {
	const char *target;
	pid_t tid;
	int r;
};

static void *unmount_thread(void *arg)
{
	struct unmounter *u = arg;
	struct error_info e = { 0 };

	__atomic_store_n(&u->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
	u->r = mnt_util_umount(u->target, 0, &e);
	return NULL;
}

/* Whether thread tid is in clock_nanosleep(2): the unmount found the mount busy and waits to
 * try again. */
static bool waits_to_retry(pid_t tid)
{
	char path[64], buf[64] = "";
	FILE *fp;
	long nr = -1;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	fp = fopen(path, "re");
	if (!fp)
		return false;
	if (fgets(buf, sizeof(buf), fp))
		nr = strtol(buf, NULL, 10);
	fclose(fp);
	return nr == SYS_clock_nanosleep || nr == SYS_nanosleep;
}

/* One go: the unmount starts while a file is open on the mount, and the file is closed once
 * the unmount waits to try again.  Returns false when the unmount had given up already when
 * the file was about to close (a test thread kept off the CPU for all of the retries: the
 * go proves nothing and is made again). */
static bool busy_for_a_moment(struct fixture *f)
{
	struct unmounter u = { .target = f->target, .r = 1 };
	int fd = open(f->file, O_CREAT | O_RDWR | O_CLOEXEC, 0644);
	struct timespec nap = { .tv_nsec = 200000 };
	pthread_t t;
	pid_t tid;
	int polls = 0;
	bool gave_up;

	assert_true(fd >= 0);
	assert_int_equal(pthread_create(&t, NULL, unmount_thread, &u), 0);
	while (!(tid = __atomic_load_n(&u.tid, __ATOMIC_SEQ_CST)))
		nanosleep(&nap, NULL);
	/* The first attempt met the open file; the file goes while the unmount waits. */
	while (!waits_to_retry(tid) && polls++ < 100000)
		nanosleep(&nap, NULL);
	gave_up = pthread_tryjoin_np(t, NULL) == 0;
	close(fd);
	if (gave_up) {
		assert_int_equal(u.r, -EBUSY);
		return false;
	}
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(polls < 100000);
	assert_int_equal(u.r, 0);
	assert_false(test_is_mountpoint(f->target));
	return true;
}

static void test_busy_for_a_moment_unmounted(void **state)
{
	int go = 0;

	while (!busy_for_a_moment(*state))
		assert_true(++go < 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_busy_mount_refused_and_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_busy_for_a_moment_unmounted, setup, teardown),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
