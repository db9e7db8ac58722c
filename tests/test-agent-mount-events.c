/* test-agent-mount-events.c - the agent following mounts made and removed by someone else, on
 * both mount-table sources: the kernel's mount events (--mount-events auto, skipped on a
 * kernel without them) and the libmount fallback (--mount-events off).  A pod volume dir
 * unmounted by hand is mounted again; a bind stacked on a target is seen and removed, leaving
 * the volume; a mount outside the agent's trees costs no pass; a burst of mounts is read in a
 * few batches and nothing in it is missed.  Real agent, local plugin,
 * real mounts, in the test's private mount namespace; the fixture stops the agent and removes
 * every mount even when a case fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "testlib.h"

#define WAIT_MS 10000

struct fx {
	struct agent_fixture *f;
	bool events;
};

static int setup(void **state)
{
	bool events = *(bool *)*state;
	struct fx *x = calloc(1, sizeof(*x));

	if (!x)
		return -1;
	x->events = events;
	if (events && test_no_mount_events()) {
		free(x);
		*state = NULL;
		return 0;
	}
	x->f = fixture_new(events ? "mtab-events" : "mtab-fallback");
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fx *x = *state;

	if (x) {
		fixture_free(x->f);
		free(x);
	}
	return 0;
}

static char *read_hello(const char *dir)
{
	char path[700];

	snprintf(path, sizeof(path), "%s/hello", dir);
	return test_read_file(path);
}

/* Starts the agent of the case with one pod holding a local volume of a fresh source dir
 * "data" (its file hello says "data-content"), and waits until it is mounted at target (>= 512
 * bytes).  Periodic passes (health checks, the resync) are pushed out of the way so that every
 * pass a case sees was caused by a change.  Skips the case when it is to run on mount events
 * and the kernel has none.  Returns the case's fixture. */
static struct fx *start_with_one_volume(void **state, char *target)
{
	struct fx *x = *state;
	struct agent_fixture *f;
	const char *data;
	const char *const args[] = { "--mount-events",
				     x && x->events ? "auto" : "off",
				     "--health-interval",
				     "1h",
				     "--resync-interval",
				     "1h",
				     NULL };
	json_t *st;

	if (!x)
		skip(); /* no mount events on this kernel */
	f = x->f;
	data = fixture_make_source(f, "data", "data-content");
	assert_int_equal(fixture_write_local_pod(f, "pod-a", "data", data), 0);
	assert_int_equal(fixture_start(f, args), 0);
	fixture_pod_dir(f, "pod-a", "data", target);
	assert_true(fixture_wait_mounted(target, WAIT_MS));
	assert_true(fixture_wait_pod_state(f, target, "mounted", -1, WAIT_MS));
	assert_true(fixture_wait_log(f, x->events ? "source=\"mount events\"" : "source=libmount",
				     WAIT_MS));
	st = fixture_status(f);
	assert_non_null(st);
	assert_string_equal(json_string_value(json_object_get(st, "mount_table_source")),
			    x->events ? "mount events" : "libmount");
	json_decref(st);
	return x;
}

struct hello_arg {
	const char *dir;
	const char *want;
};

static bool hello_is(void *p)
{
	struct hello_arg *a = p;
	char *s = read_hello(a->dir);
	bool ok = s && strcmp(s, a->want) == 0;

	free(s);
	return ok;
}

static bool one_mount_at(void *p)
{
	return test_count_mounts_under(p) == 1 && test_is_mountpoint(p);
}

static void test_unmounted_by_hand_is_mounted_again(void **state)
{
	char target[512];
	struct agent_fixture *f = start_with_one_volume(state, target)->f;

	assert_int_equal(umount2(target, 0), 0);
	assert_true(fixture_wait_mounted(target, WAIT_MS));
	assert_true(
		test_wait_until(hello_is, &(struct hello_arg){ target, "data-content" }, WAIT_MS));
	assert_true(fixture_wait_pod_state(f, target, "mounted", -1, WAIT_MS));
}

/* Another directory bound over the volume's target: the agent sees the top mount is not the
 * volume, unmounts it, and the volume it had mounted there is in force again. */
static void test_bind_stacked_on_target_is_removed(void **state)
{
	char target[512];
	struct agent_fixture *f = start_with_one_volume(state, target)->f;
	const char *other = fixture_make_source(f, "other", "not-the-volume");

	assert_int_equal(mount(other, target, NULL, MS_BIND, NULL), 0);
	assert_true(
		test_wait_until(hello_is, &(struct hello_arg){ target, "data-content" }, WAIT_MS));
	assert_true(test_wait_until(one_mount_at, target, WAIT_MS));
	assert_true(fixture_wait_pod_state(f, target, "mounted", -1, WAIT_MS));
}

struct count_arg {
	const char *key;
	long long above;
};

static bool count_above(json_t *status, const void *p)
{
	const struct count_arg *a = p;

	return status_count(status, a->key) > a->above;
}

/* The counter that grows when the agent has looked at a change of the mount table. */
static const char *seen_key(const struct fx *x)
{
	return x->events ? "mount_event_batches" : "mount_table_reads";
}

/* counts.<key> of the agent's status now. */
static long long count_now(struct agent_fixture *f, const char *key)
{
	json_t *st = fixture_status(f);
	long long n = status_count(st, key);

	json_decref(st);
	return n;
}

/* Mounts and unmounts a tmpfs at path, waiting each time until the agent has looked at it. */
static void mount_and_unmount_seen(struct fx *x, const char *path)
{
	long long seen = count_now(x->f, seen_key(x));

	assert_true(seen >= 0);
	assert_int_equal(mount("tmpfs", path, "tmpfs", 0, "size=1m"), 0);
	assert_true(fixture_wait_status(x->f, NULL, count_above,
					&(struct count_arg){ seen_key(x), seen }, WAIT_MS));
	seen = count_now(x->f, seen_key(x));
	assert_int_equal(umount2(path, 0), 0);
	assert_true(fixture_wait_status(x->f, NULL, count_above,
					&(struct count_arg){ seen_key(x), seen }, WAIT_MS));
}

static void test_mount_outside_the_trees_costs_no_pass(void **state)
{
	char target[512], outside[600];
	struct fx *x = start_with_one_volume(state, target);
	struct agent_fixture *f = x->f;
	long long passes;

	snprintf(outside, sizeof(outside), "%s/outside", f->dir);
	assert_int_equal(mkdir(outside, 0755), 0);
	/* A first change outside: a barrier after which no pass of the start-up is pending. */
	mount_and_unmount_seen(x, outside);
	passes = count_now(f, "passes");
	assert_true(passes > 0);

	mount_and_unmount_seen(x, outside);
	assert_int_equal(count_now(f, "passes"), passes);

	/* The same inside the root dir does cost a pass (the counter does count). */
	snprintf(outside, sizeof(outside), "%s/inside", f->root);
	assert_int_equal(mkdir(outside, 0755), 0);
	mount_and_unmount_seen(x, outside);
	assert_true(fixture_wait_status(f, NULL, count_above,
					&(struct count_arg){ "passes", passes }, WAIT_MS));
}

/* A burst of mounts made by someone else: the agent reads it in batches (events: a batch
 * within 10 ms of the last one stops the watch for 10 ms, so of two batches in a row at least
 * one is 10 ms after the other; fallback: a read every refresh_min_interval_ms at most), not
 * one per mount, and misses nothing in it: the volume's target unmounted by hand as the
 * burst's last change is mounted again.  The bound is taken from how long the burst and the
 * agent's answer to it took, so a slow machine does not make it fail. */
#define BURST_MOUNTS 100

static long long elapsed_ms(const struct timespec *a)
{
	struct timespec b;

	clock_gettime(CLOCK_MONOTONIC, &b);
	return (b.tv_sec - a->tv_sec) * 1000 + (b.tv_nsec - a->tv_nsec) / 1000000;
}

static void test_burst_of_mounts_read_in_batches(void **state)
{
	char target[512], dir[700];
	struct fx *x = start_with_one_volume(state, target);
	struct agent_fixture *f = x->f;
	long long seen, overflows, now, took;
	struct timespec start;
	json_t *st;

	/* A barrier: the start-up's own mounts are read before the count is taken. */
	snprintf(dir, sizeof(dir), "%s/burst", f->root);
	assert_int_equal(mkdir(dir, 0755), 0);
	mount_and_unmount_seen(x, dir);
	for (int i = 0; i < BURST_MOUNTS; i++) {
		snprintf(dir, sizeof(dir), "%s/burst/%d", f->root, i);
		assert_int_equal(mkdir(dir, 0755), 0);
	}
	st = fixture_status(f);
	seen = status_count(st, seen_key(x));
	overflows = status_count(st, "mount_event_overflows");
	json_decref(st);

	/* Paced as CSI calls in flight make them (a mount every ms or so): mounts made faster
	 * than the agent wakes up are read in a few batches anyway. */
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (int i = 0; i < BURST_MOUNTS; i++) {
		snprintf(dir, sizeof(dir), "%s/burst/%d", f->root, i);
		assert_int_equal(mount("tmpfs", dir, "tmpfs", 0, "size=64k"), 0);
		usleep(1000);
	}
	assert_int_equal(umount2(target, 0), 0);

	assert_true(test_wait_until(one_mount_at, target, WAIT_MS));
	assert_true(
		test_wait_until(hello_is, &(struct hello_arg){ target, "data-content" }, WAIT_MS));
	assert_true(fixture_wait_pod_state(f, target, "mounted", -1, WAIT_MS));
	st = fixture_status(f);
	took = elapsed_ms(&start);
	now = status_count(st, seen_key(x));
	/* Seen by events, not by a full read after a lost queue. */
	assert_int_equal(status_count(st, "mount_event_overflows"), overflows);
	json_decref(st);
	print_message("%d mounts and an unmount in %lld ms: %lld %s\n", BURST_MOUNTS, took,
		      now - seen, seen_key(x));
	assert_true(now > seen);
	/* Two per 10 ms, and a few for the edges (the remount's own event among them). */
	assert_true(now - seen <= 4 + took / 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST_ON_BOTH_MOUNT_SOURCES(test_unmounted_by_hand_is_mounted_again, setup,
					   teardown),
		TEST_ON_BOTH_MOUNT_SOURCES(test_bind_stacked_on_target_is_removed, setup, teardown),
		TEST_ON_BOTH_MOUNT_SOURCES(test_mount_outside_the_trees_costs_no_pass, setup,
					   teardown),
		TEST_ON_BOTH_MOUNT_SOURCES(test_burst_of_mounts_read_in_batches, setup, teardown),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
