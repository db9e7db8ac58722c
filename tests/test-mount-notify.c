/* test-mount-notify.c - lib/mount-notify on real mounts: fanotify mount events for tmpfs, bind,
 * move and unmount, statmount(2) compared field by field with libmount's reading of
 * /proc/self/mountinfo, silence about another namespace's mounts, listmount(2) below a prefix
 * with 200 mounts, a real queue overflow, and a mount point too long for the first statmount
 * buffer.
 *
 * Every case runs in a mount namespace of its own, made in setup and dropped in teardown
 * (setns back to the test's base namespace), with a tmpfs as scratch space.  On a kernel
 * without mount events (Debian's 6.1) only the probe's clean "no" is checked, then the test
 * exits 77 with the probe's reason. */
#include <fcntl.h>
#include <inttypes.h>
#include <libmount.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "macro.h"
#include "mount-notify.h"
#include "testlib.h"
#include "time-util.h"

#define WAIT_MS 5000

static struct {
	int base_ns;	/* the test's private namespace, where each case returns to */
	char *dir;	/* the case's directory, made in the base namespace */
	char path[600]; /* scratch: the case's tmpfs on dir (canonical path) */
	struct mount_notify *notify;
	pid_t child;
} fx = { .base_ns = -1 };

static int scaled_ms(int ms)
{
	const char *s = getenv("TEST_TIME_SCALE");
	double f = s ? atof(s) : 1.0;

	return f > 1.0 ? (int)(ms * f) : ms;
}

static int setup(void **state)
{
	char real[PATH_MAX];

	fx.dir = test_mkdtemp("mntev");
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -1;
	if (mount("tmpfs", fx.dir, "tmpfs", 0, "size=8m,mode=0755") < 0)
		return -1;
	if (!realpath(fx.dir, real))
		return -1;
	snprintf(fx.path, sizeof(fx.path), "%s", real);
	return 0;
}

static int teardown(void **state)
{
	fx.notify = mount_notify_free(fx.notify);
	if (fx.child > 0) { /* a case that failed before it reaped its child */
		kill(fx.child, SIGKILL);
		waitpid(fx.child, NULL, 0);
		fx.child = 0;
	}
	/* Back to the base namespace: the case's namespace, and every mount in it, is gone. */
	if (setns(fx.base_ns, CLONE_NEWNS) < 0)
		return -1;
	rmdir(fx.dir);
	free(fx.dir);
	fx.dir = NULL;
	return 0;
}

/* ---- helpers ---- */

static char *sub(const char *name)
{
	static char bufs[4][PATH_MAX];
	static int i;
	char *b = bufs[i++ % 4];

	snprintf(b, PATH_MAX, "%s/%s", fx.path, name);
	return b;
}

static void make_dir(const char *path)
{
	assert_true(mkdir(path, 0755) == 0 || errno == EEXIST);
}

struct collected {
	struct mount_event ev[64];
	size_t n;
	size_t overflows;
	size_t total; /* every event, also those past ev[] */
	struct mount_event last;
};

static int collect_cb(const struct mount_event *event, void *userdata)
{
	struct collected *c = userdata;

	if (event->mask & MOUNT_EVENT_OVERFLOW)
		c->overflows++;
	if (c->n < ARRAY_SIZE(c->ev))
		c->ev[c->n++] = *event;
	c->total++;
	c->last = *event;
	return 0;
}

/* Reads events until at least want arrived or the time is up. */
static void collect(struct collected *c, size_t want)
{
	long long deadline = now_ms() + scaled_ms(WAIT_MS);

	while (c->total < want) {
		struct pollfd p = { .fd = mount_notify_get_fd(fx.notify), .events = POLLIN };
		long long left = deadline - now_ms();
		int r;

		if (left <= 0)
			break;
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
			fail_msg("poll: %s", strerror(errno));
		r = mount_notify_read_events(fx.notify, collect_cb, c);
		assert_true(r >= 0);
	}
}

/* Whether more events are queued right now (after the ones already read). */
static size_t drain_now(struct collected *c)
{
	size_t before = c->total;

	assert_true(mount_notify_read_events(fx.notify, collect_cb, c) >= 0);
	return c->total - before;
}

/* libmount's entry for the top mount at target, in a fresh read of mountinfo. */
static struct libmnt_fs *mountinfo_find(struct libmnt_table **ret_tb, const char *target)
{
	struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");

	assert_non_null(tb);
	*ret_tb = tb;
	return mnt_table_find_target(tb, target, MNT_ITER_BACKWARD);
}

/* Checks a statmount answer against libmount's reading of mountinfo. */
static void assert_matches_mountinfo(const struct mount_stat *info)
{
	struct libmnt_table *tb;
	struct libmnt_fs *fs = mountinfo_find(&tb, info->target);

	assert_non_null(fs);
	assert_int_equal(info->id_old, mnt_fs_get_id(fs));
	assert_int_equal(info->parent_id_old, mnt_fs_get_parent_id(fs));
	assert_int_equal(info->dev, mnt_fs_get_devno(fs));
	assert_string_equal(info->fstype, mnt_fs_get_fstype(fs));
	assert_string_equal(info->root, mnt_fs_get_root(fs));
	if (info->source)
		assert_string_equal(info->source, mnt_fs_get_source(fs));
	/* VFS "ro" in mountinfo's per-mount options is MOUNT_ATTR_RDONLY. */
	assert_int_equal(mount_stat_is_read_only(info),
			 mnt_optstr_get_option(mnt_fs_get_vfs_options(fs), "ro", NULL, NULL) == 0);
	mnt_unref_table(tb);
}

/* The 64-bit unique ID of the mount at path, from the kernel (statx). */
static uint64_t unique_id(const char *path)
{
	struct statx stx;

	assert_int_equal(statx(AT_FDCWD, path, AT_NO_AUTOMOUNT, 0x4000 /* STATX_MNT_ID_UNIQUE */,
			       &stx),
			 0);
	return stx.stx_mnt_id;
}

/* Mounts a small tmpfs on path (made if missing, stacked if already a mount point); returns
 * the new mount's unique id. */
static uint64_t mount_tmpfs_at(const char *path)
{
	make_dir(path);
	assert_int_equal(mount("tmpfs", path, "tmpfs", 0, "size=64k"), 0);
	return unique_id(path);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* ---- cases ---- */

static void test_probe_says_yes(void **state)
{
	char reason[256] = "";

	assert_true(mount_notify_probe(reason, sizeof(reason)));
	assert_non_null(strstr(reason, "mount events"));
	assert_null(strstr(reason, "no mount events"));
}

/* A read-only tmpfs and a bind mount: ATTACH each, statmount resolves the ID to the same
 * mount libmount reads from mountinfo (32-bit ID, parent, device, type, root, source, ro). */
static void test_attach_tmpfs_and_bind(void **state)
{
	struct collected c = { 0 };
	struct mount_stat *t = NULL, *b = NULL;
	struct stat st;

	assert_int_equal(mount_notify_new(-1, &fx.notify), 0);
	make_dir(sub("t"));
	make_dir(sub("src"));
	make_dir(sub("b"));
	assert_int_equal(mount("vol-src", sub("t"), "tmpfs", MS_RDONLY, "size=64k"), 0);
	assert_int_equal(mount(sub("src"), sub("b"), NULL, MS_BIND, NULL), 0);
	collect(&c, 2);
	assert_int_equal(c.n, 2);
	assert_int_equal(c.ev[0].mask, MOUNT_EVENT_ATTACH);
	assert_int_equal(c.ev[1].mask, MOUNT_EVENT_ATTACH);
	assert_int_not_equal(c.ev[0].id, c.ev[1].id);

	assert_int_equal(mount_stat_by_id(c.ev[0].id, &t), 0);
	assert_int_equal(t->id, c.ev[0].id);
	assert_int_equal(t->id, unique_id(sub("t")));
	assert_string_equal(t->target, sub("t"));
	assert_string_equal(t->fstype, "tmpfs");
	assert_string_equal(t->root, "/");
	assert_true(mount_stat_is_read_only(t));
	assert_non_null(t->source);
	assert_string_equal(t->source, "vol-src");
	assert_non_null(t->options);
	assert_non_null(strstr(t->options, "size=64k"));
	assert_int_equal(t->parent_id, unique_id(fx.path));
	assert_matches_mountinfo(t);

	assert_int_equal(mount_stat_by_id(c.ev[1].id, &b), 0);
	assert_string_equal(b->target, sub("b"));
	assert_string_equal(b->fstype, "tmpfs");
	assert_string_equal(b->root, "/src");
	assert_false(mount_stat_is_read_only(b));
	assert_int_equal(stat(fx.path, &st), 0);
	assert_int_equal(b->dev, st.st_dev); /* the scratch tmpfs, not t's own */
	assert_int_not_equal(b->dev, t->dev);
	assert_matches_mountinfo(b);

	mount_stat_free(t);
	mount_stat_free(b);
	assert_int_equal(drain_now(&c), 0);
}

/* Unmount: DETACH with the ID the ATTACH had; statmount then says -ENOENT.  A move within the
 * namespace: one event with both bits, same ID, new mount point. */
static void test_detach_and_move(void **state)
{
	struct collected c = { 0 };
	struct mount_stat *info = NULL;
	uint64_t id;

	assert_int_equal(mount_notify_new(-1, &fx.notify), 0);
	make_dir(sub("d"));
	make_dir(sub("e"));
	assert_int_equal(mount("tmpfs", sub("d"), "tmpfs", 0, "size=64k"), 0);
	collect(&c, 1);
	assert_int_equal(c.n, 1);
	assert_int_equal(c.ev[0].mask, MOUNT_EVENT_ATTACH);
	id = c.ev[0].id;

	assert_int_equal(mount(sub("d"), sub("e"), NULL, MS_MOVE, NULL), 0);
	collect(&c, 2);
	assert_int_equal(c.n, 2);
	assert_int_equal(c.ev[1].mask, MOUNT_EVENT_ATTACH | MOUNT_EVENT_DETACH);
	assert_int_equal(c.ev[1].id, id);
	assert_int_equal(mount_stat_by_id(id, &info), 0);
	assert_string_equal(info->target, sub("e"));
	info = mount_stat_free(info);

	assert_int_equal(umount2(sub("e"), 0), 0);
	collect(&c, 3);
	assert_int_equal(c.n, 3);
	assert_int_equal(c.ev[2].mask, MOUNT_EVENT_DETACH);
	assert_int_equal(c.ev[2].id, id);
	assert_int_equal(mount_stat_by_id(id, &info), -ENOENT);
	assert_null(info);
	assert_int_equal(drain_now(&c), 0);
}

/* A child process in a namespace of its own mounts a tmpfs: a notifier on our namespace hears
 * nothing, one marked on the child's namespace (its /proc/PID/ns/mnt) hears the ATTACH, and
 * statmount from our namespace does not find that mount. */
static void test_other_namespace_is_silent(void **state)
{
	struct mount_notify *child_notify = NULL;
	struct collected mine = { 0 }, theirs = { 0 };
	int to_child[2], to_parent[2], status, ns_fd;
	char nspath[64], ch = 0;
	struct mount_stat *info = NULL;
	pid_t pid;

	assert_int_equal(mount_notify_new(-1, &fx.notify), 0);
	make_dir(sub("child"));
	make_dir(sub("sentinel"));
	assert_int_equal(pipe2(to_child, O_CLOEXEC), 0);
	assert_int_equal(pipe2(to_parent, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	fx.child = pid;
	if (pid == 0) {
		/* unshare, tell the parent, wait for its go, mount, tell it again, wait to exit */
		int ok = unshare(CLONE_NEWNS) == 0 &&
			 mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;

		if (!ok || write(to_parent[1], "u", 1) != 1 || read(to_child[0], &ch, 1) != 1)
			_exit(2);
		if (mount("tmpfs", sub("child"), "tmpfs", 0, "size=64k") < 0)
			_exit(3);
		if (write(to_parent[1], "m", 1) != 1 || read(to_child[0], &ch, 1) != 1)
			_exit(4);
		_exit(0);
	}
	close(to_child[0]);
	close(to_parent[1]);
	assert_int_equal(read(to_parent[0], &ch, 1), 1);
	snprintf(nspath, sizeof(nspath), "/proc/%d/ns/mnt", (int)pid);
	ns_fd = open(nspath, O_RDONLY | O_CLOEXEC);
	assert_true(ns_fd >= 0);
	assert_int_equal(mount_notify_new(ns_fd, &child_notify), 0);
	close(ns_fd);
	assert_int_equal(write(to_child[1], "g", 1), 1);
	assert_int_equal(read(to_parent[0], &ch, 1), 1);
	assert_int_equal(ch, 'm');

	/* The child's notifier has its ATTACH (it is queued before the child's mount returns). */
	assert_true(mount_notify_read_events(child_notify, collect_cb, &theirs) >= 1);
	assert_int_equal(theirs.ev[0].mask, MOUNT_EVENT_ATTACH);
	assert_int_equal(mount_stat_by_id(theirs.ev[0].id, &info), -ENOENT);

	/* Ours: nothing but the sentinel mounted after the child's mount. */
	assert_int_equal(mount("tmpfs", sub("sentinel"), "tmpfs", 0, "size=64k"), 0);
	collect(&mine, 1);
	assert_int_equal(mine.n, 1);
	assert_int_equal(mine.ev[0].id, unique_id(sub("sentinel")));
	assert_int_not_equal(mine.ev[0].id, theirs.ev[0].id);
	assert_false(test_is_mountpoint(sub("child")));

	assert_int_equal(write(to_child[1], "x", 1), 1);
	close(to_child[1]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	fx.child = 0;
	close(to_parent[0]);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* The child's namespace died with it: its notifier may hear the DETACH, ours does not. */
	assert_int_equal(drain_now(&mine), 0);
	mount_notify_free(child_notify);
}

#define N_BELOW 200

/* 200 tmpfs mounts under one directory, one nested in another, two stacked at one path (with a
 * mount on the lower one that the upper hides), and decoys beside it ("belowx", a sibling):
 * mount_list_below finds exactly the mounts under the prefix, with the IDs their ATTACH events
 * carried, as many as libmount counts. */
static void test_list_below_prefix(void **state)
{
	uint64_t want[N_BELOW + 4], got[N_BELOW + 4];
	struct mount_stat **infos = NULL;
	size_t n = 0, nwant = 0;
	char path[PATH_MAX];
	struct collected c = { 0 };
	uint64_t *all = NULL;
	size_t nall = 0;
	struct libmnt_table *tb;

	assert_int_equal(mount_notify_new(-1, &fx.notify), 0);
	make_dir(sub("below"));
	make_dir(sub("belowx"));
	make_dir(sub("other"));
	assert_int_equal(mount("tmpfs", sub("belowx"), "tmpfs", 0, "size=64k"), 0);
	assert_int_equal(mount("tmpfs", sub("other"), "tmpfs", 0, "size=64k"), 0);
	for (int i = 0; i < N_BELOW; i++) {
		snprintf(path, sizeof(path), "%s/below/%03d", fx.path, i);
		want[nwant++] = mount_tmpfs_at(path);
	}
	snprintf(path, sizeof(path), "%s/below/007/nested", fx.path);
	want[nwant++] = mount_tmpfs_at(path);
	/* two mounts stacked on one directory, the lower one with a mount on it that the upper
	 * one hides: all three are below the prefix */
	snprintf(path, sizeof(path), "%s/below/stack", fx.path);
	want[nwant++] = mount_tmpfs_at(path);
	snprintf(path, sizeof(path), "%s/below/stack/hidden", fx.path);
	want[nwant++] = mount_tmpfs_at(path);
	snprintf(path, sizeof(path), "%s/below/stack", fx.path);
	want[nwant++] = mount_tmpfs_at(path);

	/* The events carried the same IDs, in order, after the two decoys. */
	collect(&c, 2 + nwant);
	assert_int_equal(c.total, 2 + nwant);
	for (size_t i = 0; i < nwant && 2 + i < ARRAY_SIZE(c.ev); i++)
		assert_int_equal(c.ev[2 + i].id, want[i]);

	assert_int_equal(mount_list_below(sub("below"), &infos, &n), 0);
	assert_int_equal(n, nwant);
	assert_int_equal(n, test_count_mounts_under(sub("below")));
	for (size_t i = 0; i < n; i++) {
		assert_non_null(strstr(infos[i]->target, "/below/"));
		got[i] = infos[i]->id;
	}
	qsort(want, nwant, sizeof(*want), cmp_u64);
	qsort(got, n, sizeof(*got), cmp_u64);
	assert_memory_equal(want, got, n * sizeof(*got));
	mount_stat_array_free(infos, n);

	/* One of them on its own (a mount point: only its subtree is listed); the stack, with the
	 * hidden mount; a prefix with nothing below; bad prefixes. */
	assert_int_equal(mount_list_below(sub("below/007"), &infos, &n), 0);
	assert_int_equal(n, 2);
	mount_stat_array_free(infos, n);
	assert_int_equal(mount_list_below(sub("below/stack"), &infos, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(n, test_count_mounts_under(sub("below/stack")));
	mount_stat_array_free(infos, n);
	assert_int_equal(mount_list_below(sub("below/007/nested/none"), &infos, &n), 0);
	assert_int_equal(n, 0);
	mount_stat_array_free(infos, n);
	assert_int_equal(mount_list_below("relative/path", &infos, &n), -EINVAL);
	assert_int_equal(mount_list_below(sub("below/"), &infos, &n), -EINVAL);

	/* The whole namespace: every mount libmount sees. */
	assert_int_equal(mount_list(MOUNT_LIST_ROOT, &all, &nall), 0);
	tb = mnt_new_table_from_file("/proc/self/mountinfo");
	assert_non_null(tb);
	assert_int_equal(nall, mnt_table_get_nents(tb));
	mnt_unref_table(tb);
	free(all);
}

/* More events than the group's queue holds, without reading (bind mount and unmount of one
 * directory, two events each): the queue keeps max_queued_events of them, then one
 * MOUNT_EVENT_OVERFLOW comes last. */
static void test_queue_overflow(void **state)
{
	_cleanup_free_ char *s = test_read_file("/proc/sys/fs/fanotify/max_queued_events");
	struct collected c = { 0 };
	long queue = s ? atol(s) : 0;
	int r;

	if (queue <= 0 || queue > 200000) {
		fprintf(stderr, "max_queued_events is %ld: too many mounts to overflow it here\n",
			queue);
		skip();
	}
	/* The group reads the limit when it is made. */
	assert_int_equal(mount_notify_new(-1, &fx.notify), 0);
	make_dir(sub("o"));
	for (long i = 0; i < queue / 2 + 8; i++) {
		assert_int_equal(mount(sub("o"), sub("o"), NULL, MS_BIND, NULL), 0);
		assert_int_equal(umount2(sub("o"), 0), 0);
	}
	do {
		r = mount_notify_read_events(fx.notify, collect_cb, &c);
		assert_true(r >= 0);
	} while (r > 0);
	assert_int_equal(c.overflows, 1);
	assert_int_equal(c.total, queue + 1);
	assert_int_equal(c.last.mask, MOUNT_EVENT_OVERFLOW);
	assert_int_equal(c.last.id, 0);
	assert_int_equal(c.ev[0].mask, MOUNT_EVENT_ATTACH);
	assert_int_equal(c.ev[1].mask, MOUNT_EVENT_DETACH);
	assert_int_equal(c.ev[0].id, c.ev[1].id);
	/* The queue works again after the overflow. */
	assert_int_equal(mount(sub("o"), sub("o"), NULL, MS_BIND, NULL), 0);
	c = (struct collected){ 0 };
	collect(&c, 1);
	assert_int_equal(c.n, 1);
	assert_int_equal(c.ev[0].mask, MOUNT_EVENT_ATTACH);
	assert_int_equal(c.ev[0].id, unique_id(sub("o")));
}

struct diff_seen {
	uint64_t added[8], removed[8];
	size_t n_added, n_removed;
};

static int diff_cb(uint64_t id, bool added, void *userdata)
{
	struct diff_seen *d = userdata;

	if (added && d->n_added < ARRAY_SIZE(d->added))
		d->added[d->n_added++] = id;
	else if (!added && d->n_removed < ARRAY_SIZE(d->removed))
		d->removed[d->n_removed++] = id;
	return 0;
}

static int diff_stop_cb(uint64_t id, bool added, void *userdata)
{
	return -ECANCELED;
}

/* A resync by ID: two listings of the namespace around three mounts made and one removed;
 * the diff names exactly those, and a stopping callback stops it. */
static void test_ids_diff_resync(void **state)
{
	uint64_t *before = NULL, *after = NULL, gone, made[3];
	size_t n_before = 0, n_after = 0;
	struct diff_seen d = { 0 };

	gone = mount_tmpfs_at(sub("gone"));
	assert_int_equal(mount_list(MOUNT_LIST_ROOT, &before, &n_before), 0);
	assert_int_equal(umount2(sub("gone"), 0), 0);
	for (int i = 0; i < 3; i++) {
		char name[16];

		snprintf(name, sizeof(name), "new%d", i);
		made[i] = mount_tmpfs_at(sub(name));
	}
	assert_int_equal(mount_list(MOUNT_LIST_ROOT, &after, &n_after), 0);
	for (size_t i = 1; i < n_after; i++)
		assert_true(after[i - 1] < after[i]);
	assert_int_equal(n_after, n_before + 2);

	assert_int_equal(mount_ids_diff(before, n_before, after, n_after, diff_cb, &d), 4);
	assert_int_equal(d.n_added, 3);
	assert_int_equal(d.n_removed, 1);
	assert_int_equal(d.removed[0], gone);
	qsort(made, 3, sizeof(*made), cmp_u64);
	assert_memory_equal(d.added, made, sizeof(made));
	assert_int_equal(mount_ids_diff(after, n_after, after, n_after, diff_cb, &d), 0);
	assert_int_equal(mount_ids_diff(before, n_before, after, n_after, diff_stop_cb, NULL),
			 -ECANCELED);
	free(before);
	free(after);
}

struct last_event {
	struct mount_event ev;
	size_t n;
	int stop_after;
};

static int stop_cb(const struct mount_event *event, void *userdata)
{
	struct last_event *l = userdata;

	if (l->stop_after >= 0 && (int)l->n == l->stop_after)
		return -ECANCELED;
	if (event->mask & MOUNT_EVENT_OVERFLOW)
		return 0;
	l->ev = *event;
	l->n++;
	return 0;
}

/* A callback that stops the read: its error comes back, and the events it did not take are
 * delivered by the next call, none lost, none twice. */
static void test_read_stops_and_resumes(void **state)
{
	struct last_event l = { .stop_after = 1 };
	uint64_t first, second, third;

	assert_int_equal(mount_notify_new(-1, &fx.notify), 0);
	first = mount_tmpfs_at(sub("r1"));
	second = mount_tmpfs_at(sub("r2"));
	third = mount_tmpfs_at(sub("r3"));

	assert_int_equal(mount_notify_read_events(fx.notify, stop_cb, &l), -ECANCELED);
	assert_int_equal(l.n, 1);
	assert_int_equal(l.ev.id, first);
	l.stop_after = 2;
	assert_int_equal(mount_notify_read_events(fx.notify, stop_cb, &l), -ECANCELED);
	assert_int_equal(l.ev.id, second);
	l.stop_after = -1;
	assert_int_equal(mount_notify_read_events(fx.notify, stop_cb, &l), 1);
	assert_int_equal(l.ev.id, third);
	assert_int_equal(l.n, 3);
	assert_int_equal(mount_notify_read_events(fx.notify, stop_cb, &l), 0);
}

/* A mount point longer than the first statmount buffer (EOVERFLOW, then a bigger buffer). */
static void test_long_mount_point(void **state)
{
	char path[PATH_MAX];
	struct mount_stat *info = NULL;
	size_t len;

	snprintf(path, sizeof(path), "%s", fx.path);
	len = strlen(path);
	while (len < 3000) {
		len += (size_t)snprintf(path + len, sizeof(path) - len, "/%0200d", 0);
		make_dir(path);
	}
	assert_int_equal(mount("tmpfs", path, "tmpfs", 0, "size=64k"), 0);
	assert_int_equal(mount_stat_by_id(unique_id(path), &info), 0);
	assert_string_equal(info->target, path);
	assert_string_equal(info->fstype, "tmpfs");
	assert_matches_mountinfo(info);
	mount_stat_free(info);
}

/* An unknown ID, and the ID of a mount that is gone. */
static void test_stat_unknown_id(void **state)
{
	struct mount_stat *info = NULL;
	uint64_t id;

	id = mount_tmpfs_at(sub("gone"));
	assert_int_equal(umount2(sub("gone"), 0), 0);
	assert_int_equal(mount_stat_by_id(id, &info), -ENOENT);
	assert_int_equal(mount_stat_by_id(UINT64_MAX - 1, &info), -ENOENT);
	assert_null(info);
}

/* ---- a kernel without mount events ---- */

/* Run without cmocka, so that the runner counts the whole binary as one skip.  Returns 0 when
 * the "no" is clean. */
static int check_probe_says_no(const char *reason)
{
	struct mount_notify *n = NULL;
	struct mount_stat *info = NULL;
	uint64_t *ids = NULL;
	size_t cnt = 0;
	int failed = 0, r;

#define CHECK(cond)                                                                              \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			failed = 1;                                                              \
		}                                                                                \
	} while (0)
	CHECK(strncmp(reason, "no mount events: ", 17) == 0);
	CHECK(strstr(reason, "(kernel ") || strstr(reason, "/proc/self/ns/mnt"));
	r = mount_notify_new(-1, &n);
	CHECK(r < 0 && !n);
	CHECK(r == -EINVAL || r == -ENOSYS || r == -EPERM);
	r = mount_list(MOUNT_LIST_ROOT, &ids, &cnt);
	if (strstr(reason, "listmount(2)")) {
		CHECK(r < 0);
		CHECK(!ids);
		r = mount_stat_by_id(1, &info);
		CHECK(r < 0 && !info);
	} else {
		free(ids);
	}
#undef CHECK
	return failed;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe_says_yes),
		cmocka_unit_test_setup_teardown(test_attach_tmpfs_and_bind, setup, teardown),
		cmocka_unit_test_setup_teardown(test_detach_and_move, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_namespace_is_silent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_below_prefix, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ids_diff_resync, setup, teardown),
		cmocka_unit_test_setup_teardown(test_queue_overflow, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_stops_and_resumes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_long_mount_point, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stat_unknown_id, setup, teardown),
	};
	char reason[256] = "";

	test_enter_private_mountns();
	if (!mount_notify_probe(reason, sizeof(reason))) {
		if (check_probe_says_no(reason)) {
			fprintf(stderr, "the probe's \"no\" was not clean: %s\n", reason);
			return 1;
		}
		printf("skipped: %s (the probe said no cleanly)\n", reason);
		return 77;
	}
	fprintf(stderr, "%s\n", reason);
	fx.base_ns = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	if (fx.base_ns < 0) {
		perror("/proc/self/ns/mnt");
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
