/* test-mount-table.c - the mount table of the agent's trees from both sources: the kernel's
 * mount events (listmount/statmount) and the libmount fallback (monitor + mountinfo).  Real
 * tmpfs and bind mounts in the test's private mount namespace; each case runs on both sources
 * (the events cases skip on a kernel without mount events).  Checked: a mount appearing and
 * going, a bind stacked on a target, a lazy unmount of a subtree, a mount moved in and out of
 * the tree, a mount outside the trees changing nothing, entries kept
 * across reads, a real event-queue overflow answered by one full read, the actual state
 * following one target, and a mount gone before it was read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "actual-state.h"
#include "macro.h"
#include "mount-notify.h"
#include "mount-table.h"
#include "testlib.h"

#define MAX_CHANGED 64

struct fx {
	bool events;
	char *dir;
	char root[PATH_MAX];
	char out[PATH_MAX];
	struct mount_table *t;
	struct mount_monitor *m;
	char *changed[MAX_CHANGED];
	size_t n_changed;
	bool changed_overrun;
};

static void clear_changed(struct fx *f)
{
	for (size_t i = 0; i < f->n_changed; i++)
		free(f->changed[i]);
	f->n_changed = 0;
	f->changed_overrun = false;
}

static void on_changed(const struct mount_table *t, const char *target, uint32_t hash,
		       void *userdata)
{
	struct fx *f = userdata;

	assert_true(hash == hashmap_hash(target));
	assert_true(mount_table_covers(t, target));
	if (f->n_changed < MAX_CHANGED)
		f->changed[f->n_changed++] = strdup(target);
	else
		f->changed_overrun = true;
}

static bool was_changed(const struct fx *f, const char *target)
{
	for (size_t i = 0; i < f->n_changed; i++)
		if (streq(f->changed[i], target))
			return true;
	return false;
}

static const char *in_root(struct fx *f, const char *name)
{
	static char bufs[4][PATH_MAX];
	static int next;
	char *b = bufs[next++ % 4];

	snprintf(b, PATH_MAX, "%s/%s", f->root, name);
	mkdir(b, 0755);
	return b;
}

static const char *in_out(struct fx *f, const char *name)
{
	static char bufs[4][PATH_MAX];
	static int next;
	char *b = bufs[next++ % 4];

	snprintf(b, PATH_MAX, "%s/%s", f->out, name);
	mkdir(b, 0755);
	return b;
}

static int setup(void **state)
{
	bool events = *(bool *)*state;
	struct fx *f = calloc(1, sizeof(*f));
	struct error_info err = { 0 };
	char reason[256], *real;
	const char *trees[1];

	assert_non_null(f);
	f->events = events;
	*state = NULL;
	if (events && test_no_mount_events()) {
		free(f);
		return 0;
	}
	f->dir = test_mkdtemp("mount-table");
	assert_non_null(f->dir);
	/* Everything the case mounts lies on this tmpfs: one lazy unmount removes it all. */
	assert_int_equal(mount("tmpfs", f->dir, "tmpfs", 0, "size=4m"), 0);
	real = realpath(f->dir, NULL);
	assert_non_null(real);
	snprintf(f->root, sizeof(f->root), "%s/root", real);
	snprintf(f->out, sizeof(f->out), "%s/rootx", real); /* shares the prefix, not the tree */
	free(real);
	assert_int_equal(mkdir(f->root, 0755), 0);
	assert_int_equal(mkdir(f->out, 0755), 0);
	trees[0] = f->root;
	f->t = mount_table_new(trees, 1);
	assert_non_null(f->t);
	f->m = mount_monitor_new(events, reason, sizeof(reason), &err);
	assert_non_null(f->m);
	assert_true(mount_monitor_has_events(f->m) == events);
	mount_table_use_listmount(f->t, events);
	assert_int_equal(mount_table_refresh(f->t, NULL, NULL, NULL, &err), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	if (!f)
		return 0;
	clear_changed(f);
	mount_monitor_free(f->m);
	mount_table_free(f->t);
	umount2(f->dir, MNT_DETACH);
	rmdir(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

/* Waits for the monitor, then consumes what it has, as the reconciler's loop does: events
 * applied one by one; libmount's "changed" (or an overflow) answered by one full read.
 * Returns the monitor's answer. */
static int settle(struct fx *f)
{
	struct pollfd p = { .fd = mount_monitor_get_fd(f->m), .events = POLLIN };
	struct error_info err = { 0 };
	int r;

	clear_changed(f);
	assert_int_equal(poll(&p, 1, 2000), 1);
	r = mount_monitor_dispatch(f->m, f->t, on_changed, f);
	assert_true(r >= 0);
	if (r > 0)
		assert_int_equal(mount_table_refresh(f->t, NULL, on_changed, f, &err), 0);
	return r;
}

static void test_attach_and_detach(void **state)
{
	struct fx *f = *state;

	if (!f)
		skip(); /* no mount events on this kernel */
	const char *a = in_root(f, "a");
	const struct mount_info *mi;
	uint64_t gen = mount_table_generation(f->t);

	assert_null(mount_table_get(f->t, a));
	assert_int_equal(mount("tmpfs", a, "tmpfs", MS_RDONLY, "size=1m"), 0);
	settle(f);
	assert_true(was_changed(f, a));
	assert_true(mount_table_generation(f->t) > gen);
	mi = mount_table_get(f->t, a);
	assert_non_null(mi);
	assert_string_equal(mi->target, a);
	assert_string_equal(mi->fstype, "tmpfs");
	assert_string_equal(mi->source, "tmpfs");
	assert_string_equal(mi->root, "/");
	assert_int_equal(mi->id, test_mount_id(a));
	assert_true(mi->read_only);
	assert_int_equal(mi->stacked, 1);
	assert_int_equal(mount_table_size(f->t), 1);

	assert_int_equal(umount2(a, 0), 0);
	settle(f);
	assert_true(was_changed(f, a));
	assert_null(mount_table_get(f->t, a));
	assert_int_equal(mount_table_size(f->t), 0);
}

/* A bind stacked on a target: the index shows the top and the count; when the top goes, the
 * one below is shown again. */
static void test_stacked_bind(void **state)
{
	struct fx *f = *state;

	if (!f)
		skip(); /* no mount events on this kernel */
	const char *s = in_root(f, "s"), *src = in_out(f, "src");
	const struct mount_info *mi;
	int low, top;

	assert_int_equal(mount("tmpfs", s, "tmpfs", 0, "size=1m"), 0);
	settle(f);
	low = test_mount_id(s);
	assert_int_equal(mount(src, s, NULL, MS_BIND, NULL), 0);
	settle(f);
	assert_true(was_changed(f, s));
	top = test_mount_id(s);
	assert_int_not_equal(low, top);
	mi = mount_table_get(f->t, s);
	assert_non_null(mi);
	assert_int_equal(mi->id, top);
	assert_int_equal(mi->stacked, 2);
	assert_string_equal(mi->root, "/rootx/src"); /* the bind's, on the case's tmpfs */
	assert_int_equal(mount_table_size(f->t), 1);

	assert_int_equal(umount2(s, 0), 0);
	settle(f);
	assert_true(was_changed(f, s));
	mi = mount_table_get(f->t, s);
	assert_non_null(mi);
	assert_int_equal(mi->id, low);
	assert_int_equal(mi->stacked, 1);
	assert_string_equal(mi->fstype, "tmpfs");
}

/* A lazy unmount of a mount with mounts below it: every one of them leaves the table. */
static void test_lazy_unmount_of_a_subtree(void **state)
{
	struct fx *f = *state;
	char b[PATH_MAX + 8];
	const char *a;

	if (!f)
		skip(); /* no mount events on this kernel */
	a = in_root(f, "lazy");
	assert_int_equal(mount("tmpfs", a, "tmpfs", 0, "size=1m"), 0);
	snprintf(b, sizeof(b), "%s/b", a);
	assert_int_equal(mkdir(b, 0755), 0);
	assert_int_equal(mount("tmpfs", b, "tmpfs", 0, "size=1m"), 0);
	settle(f);
	assert_non_null(mount_table_get(f->t, b));
	assert_int_equal(mount_table_size(f->t), 2);
	assert_int_equal(umount2(a, MNT_DETACH), 0);
	settle(f);
	assert_true(was_changed(f, a));
	assert_true(was_changed(f, b));
	assert_null(mount_table_get(f->t, a));
	assert_null(mount_table_get(f->t, b));
	assert_int_equal(mount_table_size(f->t), 0);
}

/* A mount moved into the tree appears there; moved out again, it leaves (one event with both
 * bits on the events path, the same mount ID throughout). */
static void test_moved_in_and_out(void **state)
{
	struct fx *f = *state;
	const char *o, *in;

	if (!f)
		skip(); /* no mount events on this kernel */
	o = in_out(f, "mv");
	in = in_root(f, "mv");
	assert_int_equal(mount("tmpfs", o, "tmpfs", 0, "size=1m"), 0);
	settle(f);
	assert_int_equal(f->n_changed, 0);
	assert_int_equal(mount(o, in, NULL, MS_MOVE, NULL), 0);
	settle(f);
	assert_true(was_changed(f, in));
	assert_non_null(mount_table_get(f->t, in));
	assert_int_equal(mount_table_get(f->t, in)->id, test_mount_id(in));
	assert_int_equal(mount(in, o, NULL, MS_MOVE, NULL), 0);
	settle(f);
	assert_true(was_changed(f, in));
	assert_null(mount_table_get(f->t, in));
	assert_int_equal(mount_table_size(f->t), 0);
}

/* Mounts outside the trees (also at a path that only shares the root's prefix) are seen go
 * by and change nothing. */
static void test_outside_changes_nothing(void **state)
{
	struct fx *f = *state;

	if (!f)
		skip(); /* no mount events on this kernel */
	const char *o = in_out(f, "o");
	uint64_t gen = mount_table_generation(f->t);

	assert_int_equal(mount("tmpfs", o, "tmpfs", 0, "size=1m"), 0);
	settle(f);
	assert_true(mount_table_generation(f->t) > gen); /* the change was looked at */
	assert_int_equal(f->n_changed, 0);
	assert_int_equal(mount_table_size(f->t), 0);
	assert_int_equal(mount("tmpfs", f->out, "tmpfs", 0, "size=1m"), 0);
	settle(f);
	assert_int_equal(f->n_changed, 0);
	assert_int_equal(umount2(f->out, MNT_DETACH), 0);
	settle(f);
	assert_int_equal(f->n_changed, 0);
	assert_int_equal(mount_table_size(f->t), 0);
}

/* Unchanged mounts keep their entries across full reads; a read reports only what changed. */
static void test_entries_kept_across_reads(void **state)
{
	struct fx *f = *state;

	if (!f)
		skip(); /* no mount events on this kernel */
	const char *k = in_root(f, "k"), *n = in_root(f, "n");
	struct error_info err = { 0 };
	const struct mount_info *before;

	assert_int_equal(mount("tmpfs", k, "tmpfs", 0, "size=1m"), 0);
	settle(f);
	before = mount_table_get(f->t, k);
	assert_non_null(before);
	clear_changed(f);
	assert_int_equal(mount_table_refresh(f->t, NULL, on_changed, f, &err), 0);
	assert_int_equal(f->n_changed, 0);
	assert_ptr_equal(mount_table_get(f->t, k), before);
	/* A change the monitor has not been asked about yet: the read finds it alone. */
	assert_int_equal(mount("tmpfs", n, "tmpfs", 0, "size=1m"), 0);
	clear_changed(f);
	assert_int_equal(mount_table_refresh(f->t, NULL, on_changed, f, &err), 0);
	assert_int_equal(f->n_changed, 1);
	assert_string_equal(f->changed[0], n);
	assert_ptr_equal(mount_table_get(f->t, k), before);
	assert_non_null(mount_table_get(f->t, n));
	/* The monitor's pending news changes nothing more. */
	settle(f);
	assert_int_equal(f->n_changed, 0);
	assert_int_equal(mount_table_size(f->t), 2);
}

/* A real overflow of the event queue (more attach and detach events than it holds, outside
 * the trees), then changes in the tree whose events are lost: the monitor says so and one
 * full read finds them.  On the fallback the same burst is one "changed" and one read. */
static void test_overflow_answered_by_full_read(void **state)
{
	struct fx *f = *state;

	if (!f)
		skip(); /* no mount events on this kernel */
	_cleanup_free_ char *s = test_read_file("/proc/sys/fs/fanotify/max_queued_events");
	const char *gone = in_root(f, "gone"), *fresh = in_root(f, "fresh"), *o = in_out(f, "o");
	long queue = s ? atol(s) : 16384;
	int r;

	if (queue <= 0 || queue > 200000) {
		fprintf(stderr, "max_queued_events is %ld: too many mounts to overflow it\n",
			queue);
		skip();
	}
	assert_int_equal(mount("tmpfs", gone, "tmpfs", 0, "size=1m"), 0);
	settle(f);
	assert_non_null(mount_table_get(f->t, gone));
	for (long i = 0; i < queue / 2 + 8; i++) {
		assert_int_equal(mount(o, o, NULL, MS_BIND, NULL), 0);
		assert_int_equal(umount2(o, 0), 0);
	}
	assert_int_equal(umount2(gone, 0), 0);
	assert_int_equal(mount("tmpfs", fresh, "tmpfs", 0, "size=1m"), 0);
	r = settle(f);
	assert_int_equal(r, 1); /* overflow (events), or "changed" (fallback) */
	assert_true(was_changed(f, gone));
	assert_true(was_changed(f, fresh));
	assert_null(mount_table_get(f->t, gone));
	assert_non_null(mount_table_get(f->t, fresh));
	assert_int_equal(mount_table_get(f->t, fresh)->id, test_mount_id(fresh));
	assert_int_equal(mount_table_size(f->t), 1);
}

/* The actual state follows one target: a pod volume dir mounted by someone else is learned as
 * unverified, and forgotten when it is unmounted by hand. */
static void test_actual_state_follows_one_target(void **state)
{
	struct fx *f = *state;

	if (!f)
		skip(); /* no mount events on this kernel */
	char pod[PATH_MAX];
	struct actual_state *a = asw_new(f->root);
	struct asw_pod_mount *pm;

	assert_non_null(a);
	snprintf(pod, sizeof(pod), "%s/pods/u1/volumes/kubernetes.io~local/data", f->root);
	assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", pod, NULL }), 0);
	assert_int_equal(mount("tmpfs", pod, "tmpfs", 0, "size=1m"), 0);
	settle(f);
	assert_true(was_changed(f, pod));
	assert_true(asw_sync_target(a, f->t, pod, hashmap_hash(pod)));
	pm = asw_get_pod_mount(a, pod);
	assert_non_null(pm);
	assert_string_equal(pm->pod_uid, "u1");
	assert_string_equal(pm->plugin_name, "local");
	assert_string_equal(pm->outer_name, "data");
	assert_null(pm->volume_name); /* unverified */
	assert_int_equal(pm->mount_id, test_mount_id(pod));
	assert_false(asw_sync_target(a, f->t, pod, hashmap_hash(pod)));

	assert_int_equal(umount2(pod, 0), 0);
	settle(f);
	assert_true(was_changed(f, pod));
	assert_true(asw_sync_target(a, f->t, pod, hashmap_hash(pod)));
	assert_null(asw_get_pod_mount(a, pod));
	asw_free(a);
}

/* Each case on both sources, named for the one it runs on. */
static void collect_state_change(const char *target, void *userdata)
{
	struct fx *f = userdata;

	if (f->n_changed < MAX_CHANGED)
		f->changed[f->n_changed++] = strdup(target);
}

/* A mount that went before the agent read it (an operation's mount, unmounted by someone at
 * once): its events say nothing of where it was, so the monitor asks for a full read, and the
 * whole-state sync reports the target whose record it drops. */
static void test_mount_gone_before_read(void **state)
{
	struct fx *f = *state;
	struct error_info err = { 0 };
	struct actual_state *a;
	char pod[PATH_MAX];
	struct pollfd p;
	int r;

	if (!f)
		skip(); /* no mount events on this kernel */
	a = asw_new(f->root);
	assert_non_null(a);
	snprintf(pod, sizeof(pod), "%s/pods/u2/volumes/kubernetes.io~local/data", f->root);
	assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", pod, NULL }), 0);
	assert_int_equal(mount("tmpfs", pod, "tmpfs", 0, "size=1m"), 0);
	/* What an operation's result records, before the table has seen the mount. */
	assert_non_null(asw_set_pod_mount(a, pod, "u2", "data", "local", "vol", false,
					  test_mount_id(pod), mount_table_generation(f->t)));
	assert_int_equal(umount2(pod, 0), 0);

	clear_changed(f);
	p = (struct pollfd){ .fd = mount_monitor_get_fd(f->m), .events = POLLIN };
	assert_int_equal(poll(&p, 1, 2000), 1);
	r = mount_monitor_dispatch(f->m, f->t, on_changed, f);
	assert_int_equal(r, f->events ? MOUNT_MONITOR_UNREAD : MOUNT_MONITOR_READ);
	assert_int_equal(f->n_changed, 0); /* the table never held it */
	assert_int_equal(mount_table_refresh(f->t, NULL, on_changed, f, &err), 0);
	assert_int_equal(f->n_changed, 0);
	assert_non_null(asw_get_pod_mount(a, pod));
	assert_true(asw_sync_with_table(a, f->t, collect_state_change, f));
	assert_int_equal(f->n_changed, 1);
	assert_string_equal(f->changed[0], pod);
	assert_null(asw_get_pod_mount(a, pod));
	asw_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST_ON_BOTH_MOUNT_SOURCES(test_attach_and_detach, setup, teardown),
		TEST_ON_BOTH_MOUNT_SOURCES(test_stacked_bind, setup, teardown),
		TEST_ON_BOTH_MOUNT_SOURCES(test_lazy_unmount_of_a_subtree, setup, teardown),
		TEST_ON_BOTH_MOUNT_SOURCES(test_moved_in_and_out, setup, teardown),
		TEST_ON_BOTH_MOUNT_SOURCES(test_outside_changes_nothing, setup, teardown),
		TEST_ON_BOTH_MOUNT_SOURCES(test_entries_kept_across_reads, setup, teardown),
		TEST_ON_BOTH_MOUNT_SOURCES(test_overflow_answered_by_full_read, setup, teardown),
		TEST_ON_BOTH_MOUNT_SOURCES(test_actual_state_follows_one_target, setup, teardown),
		TEST_ON_BOTH_MOUNT_SOURCES(test_mount_gone_before_read, setup, teardown),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
