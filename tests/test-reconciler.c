/* test-reconciler.c - the reconciler driven directly, through its public API (pod spec files
 * in a pods dir), with the tests' fake plugin (tests/lib/fake-plugin.h), asserting on the
 * desired and actual state (read on the reconciler thread through rec_run_on_thread) and on
 * the order of the plugin's calls.
 *
 * The fake plugin does real but trivial work: a pod volume is a bind mount of a source
 * directory, a "device" volume's node-wide mount is a tmpfs that pods bind.  It records every
 * call with a sequence number and a timestamp.  Its failures are injected per volume: a mock,
 * because no real, repeatable way makes one bind mount fail on demand while another works.
 *
 * The rule cases run twice: with every pass a full one, and with incremental passes (what
 * the agent runs once started), where only the keys an event touched are visited.  Other
 * cases show the incremental pass is incremental: a CSI request converges without a full
 * pass, visiting a few keys, and stray state nothing touched waits for a full pass.
 *
 * Each case runs in its own private mount namespace (root only; skipped otherwise). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <libmount.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake-plugin.h"
#include "macro.h"
#include "mount-util.h"
#include "path-util.h"
#include "plugin.h"
#include "reconciler-internal.h"
#include "testlib.h"

/* The sequence number of the first event of op for path; fails the test when there is none. */
static unsigned fake_first(const char *op, const char *path)
{
	struct fake_event e;

	if (fake_find(op, path, &e, 1) != 1)
		fail_msg("no %s event for %s", op, path ? path : "any volume");
	return e.seq;
}

static const struct volume_plugin *const fake_table[] = { &fake_plugin };

/* --- the fixture: a reconciler on a temp root, state and pods dir --- */

#define BACKOFF_INITIAL_MS 100

struct fix {
	char *dir;
	char root[512], state[512], pods[512], kubelet[512];
	struct reconciler *r;
	bool full;	       /* every pass is a full one */
	uint64_t refresh_ms;   /* refresh_min_interval_ms; 0: 10 ms */
	bool mount_events_off; /* the libmount fallback (whose table read can be made to fail) */
	uint64_t health_ms;    /* health_interval_ms; 0: none */
};

static int scaled(int ms)
{
	const char *s = getenv("TEST_TIME_SCALE");
	int k = s ? atoi(s) : 1;

	return ms * (k > 0 ? k : 1);
}

static int rec_start(struct fix *f)
{
	struct error_info err = { 0 };
	int k;

	k = reconciler_new(
		&(struct reconciler_config){
			.root_dir = f->root,
			.state_dir = f->state,
			.pods_dir = f->pods,
			.workers = 4,
			.backoff_initial_ms = BACKOFF_INITIAL_MS,
			.backoff_max_ms = 60000,
			.resync_ms = 600000,
			.refresh_min_interval_ms = f->refresh_ms ? f->refresh_ms : 10,
			.kubelet_root = f->kubelet,
			.mount_events_off = f->mount_events_off,
			.health_interval_ms = f->health_ms,
		},
		&f->r, &err);
	if (k < 0) {
		print_error("reconciler_new: %s\n", err_msg(&err));
		return k;
	}
	f->r->pass.always_full = f->full;
	k = reconciler_start(f->r, &err);
	if (k < 0)
		print_error("reconciler_start: %s\n", err_msg(&err));
	return k;
}

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));

	test_enter_private_mountns();
	plugin_registry_set(fake_table, ARRAY_SIZE(fake_table));
	fake_reset();
	f->dir = test_mkdtemp("rec");
	snprintf(f->root, sizeof(f->root), "%s/root", f->dir);
	snprintf(f->state, sizeof(f->state), "%s/state", f->dir);
	snprintf(f->pods, sizeof(f->pods), "%s/pods.d", f->dir);
	snprintf(f->kubelet, sizeof(f->kubelet), "%s/kubelet", f->dir);
	mkdir(f->root, 0755);
	mkdir(f->state, 0700);
	mkdir(f->pods, 0755);
	mkdir(f->kubelet, 0755);
	*state = f;
	return 0;
}

/* The same, with every pass a full one. */
static int setup_full(void **state)
{
	setup(state);
	((struct fix *)*state)->full = true;
	return 0;
}

/* Lazily unmounts everything below dir, deepest first. */
static void umount_all_under(const char *dir)
{
	struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_BACKWARD);
	struct libmnt_fs *fs;

	while (tb && it && mnt_table_next_fs(tb, it, &fs) == 0) {
		const char *t = mnt_fs_get_target(fs);
		if (t && startswith(t, dir) && t[strlen(dir)] == '/')
			umount2(t, MNT_DETACH);
	}
	mnt_free_iter(it);
	mnt_unref_table(tb);
}

static int teardown(void **state)
{
	struct fix *f = *state;

	reconciler_free(f->r);
	umount_all_under(f->dir);
	test_rm_rf(f->dir);
	free(f->dir);
	free(f);
	plugin_registry_set(NULL, 0);
	return 0;
}

/* A source directory f->dir/<name>; returns its path in buf. */
static const char *make_src(struct fix *f, const char *name, char *buf, size_t size)
{
	snprintf(buf, size, "%s/%s", f->dir, name);
	mkdir(buf, 0755);
	return buf;
}

/* make_src() into src (>= 600), and the node-wide name of its volume into vol (>= 620). */
static void make_vol(struct fix *f, const char *name, char *src, char *vol)
{
	make_src(f, name, src, 600);
	snprintf(vol, 620, "fake:%s", src);
}

/* Writes pods.d/<file> atomically (a rename, as an operator's tool would). */
static void write_pod(struct fix *f, const char *file, const char *json)
{
	char tmp[600], path[600];

	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", f->pods, file);
	snprintf(path, sizeof(path), "%s/%s", f->pods, file);
	assert_int_equal(test_write_file(tmp, json), 0);
	assert_int_equal(rename(tmp, path), 0);
}

static void remove_pod(struct fix *f, const char *file)
{
	char path[600];

	snprintf(path, sizeof(path), "%s/%s", f->pods, file);
	assert_int_equal(unlink(path), 0);
}

/* A pod with one volume "v" of source path (a device volume when device). */
static void write_pod1(struct fix *f, const char *file, const char *uid, const char *path,
		       bool device)
{
	char json[1200];

	snprintf(json, sizeof(json),
		 "{\"pod\": {\"uid\": \"%s\"}, \"volumes\": [{\"name\": \"v\", \"fake\": "
		 "{\"path\": \"%s\"%s}}]}",
		 uid, path, device ? ", \"device\": \"yes\"" : "");
	write_pod(f, file, json);
}

/* A pod with two volumes: a of source path apath (a device volume when device), then b of
 * bpath. */
static void write_pod2(struct fix *f, const char *file, const char *uid, const char *a,
		       const char *apath, bool device, const char *b, const char *bpath)
{
	char json[2000];

	snprintf(json, sizeof(json),
		 "{\"pod\": {\"uid\": \"%s\"}, \"volumes\": ["
		 "{\"name\": \"%s\", \"fake\": {\"path\": \"%s\"%s}},"
		 "{\"name\": \"%s\", \"fake\": {\"path\": \"%s\"}}]}",
		 uid, a, apath, device ? ", \"device\": \"yes\"" : "", b, bpath);
	write_pod(f, file, json);
}

static void target_of(struct fix *f, const char *uid, const char *name, char *buf, size_t size)
{
	snprintf(buf, size, "%s/pods/%s/volumes/kubernetes.io~fake/%s", f->root, uid, name);
}

/* The i-th of the numbered pods: pod-<i>, its spec file pod-<i>.json, its volume "v" of the
 * source dir src-<i>. */
struct numbered {
	char uid[32], file[32], src[600], vol[620], target[600];
};

static void numbered_pod(struct fix *f, unsigned i, struct numbered *n)
{
	snprintf(n->uid, sizeof(n->uid), "pod-%u", i);
	snprintf(n->file, sizeof(n->file), "pod-%u.json", i);
	snprintf(n->src, sizeof(n->src), "%s/src-%u", f->dir, i);
	snprintf(n->vol, sizeof(n->vol), "fake:%s", n->src);
	target_of(f, n->uid, "v", n->target, sizeof(n->target));
}

/* Writes the numbered pods 0..k-1, each with its own source dir (made), or all of them with
 * the one source dir shared (its volume then shared too). */
static void write_numbered_pods(struct fix *f, unsigned k, const char *shared)
{
	struct numbered n;

	for (unsigned i = 0; i < k; i++) {
		numbered_pod(f, i, &n);
		if (!shared)
			mkdir(n.src, 0755);
		write_pod1(f, n.file, n.uid, shared ? shared : n.src, false);
	}
}

/* --- reading the state on the reconciler thread --- */

/* What the state says of one pod target and one volume. */
struct probe {
	const char *target;
	const char *volume; /* node-wide name, "fake:<path>" */
	bool desired;	    /* dsw has the target */
	bool mounted;	    /* asw has the target, verified to hold volume */
	bool volume_desired;
	bool device_known; /* asw has the volume's device */
	bool device_mounted;
	unsigned failures; /* backoff entry of "pod:<target>" */
	uint64_t delay_ms;
	unsigned failing; /* backoff entries in all */
	unsigned long passes;
	unsigned long full_passes;
	unsigned long incremental_passes;
	unsigned long keys_visited;
	bool ready;
	/* The mount table holds the target's mount (its mount event was read), or the table
	 * follows the kernel by whole reads (no events to wait for). */
	bool table_has_mount;
};

static void probe_on_thread(struct reconciler *r, void *arg)
{
	struct probe *p = arg;
	const struct asw_pod_mount *pm = p->target ? asw_get_pod_mount(r->asw, p->target) : NULL;
	const struct asw_device *d = p->volume ? asw_get_device(r->asw, p->volume) : NULL;
	_cleanup_free_ char *key = p->target ? rec_key_for("pod", p->target) : NULL;
	const struct backoff_entry *e = key ? backoff_get(r->backoff, key) : NULL;

	p->desired = p->target && dsw_get_pod_volume(r->dsw, p->target);
	p->mounted = pm && pm->volume_name && p->volume && streq(pm->volume_name, p->volume);
	p->volume_desired = p->volume && dsw_get_volume(r->dsw, p->volume);
	p->device_known = d != NULL;
	p->device_mounted = d && d->mounted;
	p->failures = e ? e->failures : 0;
	p->delay_ms = e ? e->delay_ms : 0;
	p->failing = backoff_count(r->backoff);
	p->passes = r->status.stats.passes;
	p->full_passes = r->status.stats.full_passes;
	p->incremental_passes = r->status.stats.incremental_passes;
	p->keys_visited = r->status.stats.keys_visited;
	p->ready = r->status.ready;
	p->table_has_mount = !mount_monitor_has_events(r->monitor) ||
			     (p->target && mount_table_get(r->table, p->target));
}

static struct probe probe(struct fix *f, const char *target, const char *volume)
{
	struct probe p = { .target = target, .volume = volume };

	rec_run_on_thread(f->r, probe_on_thread, &p);
	return p;
}

struct wait_arg {
	struct fix *f;
	const char *target, *volume;
	bool (*pred)(const struct probe *p);
};

static bool wait_pred(void *arg)
{
	struct wait_arg *w = arg;
	struct probe p = probe(w->f, w->target, w->volume);

	return w->pred(&p);
}

static bool wait_state(struct fix *f, const char *target, const char *volume,
		       bool (*pred)(const struct probe *p), int timeout_ms)
{
	struct wait_arg w = { f, target, volume, pred };

	return test_wait_until(wait_pred, &w, timeout_ms);
}

static bool is_mounted(const struct probe *p)
{
	return p->desired && p->mounted;
}

static bool is_gone(const struct probe *p)
{
	return !p->desired && !p->mounted;
}

static bool device_gone(const struct probe *p)
{
	return !p->volume_desired && !p->device_known;
}

/* Waits until the reconciler ran two more passes (so every result already in hand was acted
 * on). */
static void wait_two_passes(struct fix *f)
{
	unsigned long start = probe(f, NULL, NULL).passes;
	struct reconciler_stats st;

	reconciler_request_resync(f->r);
	for (int i = 0; i < scaled(5000) / 10; i++) {
		reconciler_get_stats(f->r, &st);
		if (st.passes >= start + 2)
			return;
		if (st.passes == start + 1)
			reconciler_request_resync(f->r);
		usleep(10000);
	}
	fail_msg("the reconciler ran no pass");
}

/* --- cases --- */

/* A volume moving from one pod to another is unmounted from the old pod before the new one
 * mounts it, even when the tear-down is slow. */
static void test_move_between_pods_unmounts_first(void **state)
{
	struct fix *f = *state;
	char src[600], ta[600], tb[600], vol[620];

	make_vol(f, "src-move", src, vol);
	target_of(f, "pod-a", "v", ta, sizeof(ta));
	target_of(f, "pod-b", "v", tb, sizeof(tb));
	assert_int_equal(rec_start(f), 0);
	write_pod1(f, "p.json", "pod-a", src, true);
	assert_true(wait_state(f, ta, vol, is_mounted, 5000));
	assert_true(test_is_mountpoint(ta));

	pthread_mutex_lock(&fake.lock);
	fake.delay_ms = 300;
	pthread_mutex_unlock(&fake.lock);
	/* One file, rewritten for the other pod: one desired-state change. */
	write_pod1(f, "p.json", "pod-b", src, true);
	assert_true(wait_state(f, tb, vol, is_mounted, 5000));
	assert_true(wait_state(f, ta, vol, is_gone, 5000));
	assert_true(test_is_mountpoint(tb));
	assert_false(test_is_mountpoint(ta));

	/* set_up for the new pod started only after the old pod's tear-down had finished, and
	 * the device stayed: it was never released in between. */
	assert_true(fake_first("set_up", src) < fake_first("tear_down", src));
	{
		struct fake_event ups[8];
		unsigned n = fake_find("set_up", src, ups, ARRAY_SIZE(ups));
		assert_int_equal(n, 2);
		assert_true(ups[1].seq > fake_first("tear_down.done", src));
	}
	assert_int_equal(fake_count("mount_device", src), 1);
	assert_int_equal(fake_count("unmount_device", NULL), 0);
	assert_true(probe(f, tb, vol).device_mounted);
}

/* A device two pods use is unmounted and detached only when the last of them is gone. */
static void test_device_released_after_last_pod(void **state)
{
	struct fix *f = *state;
	char src[600], ta[600], tb[600], vol[620], devdir[700];
	struct probe p;

	make_vol(f, "src-dev", src, vol);
	target_of(f, "pod-a", "v", ta, sizeof(ta));
	target_of(f, "pod-b", "v", tb, sizeof(tb));
	assert_int_equal(rec_start(f), 0);
	write_pod1(f, "a.json", "pod-a", src, true);
	write_pod1(f, "b.json", "pod-b", src, true);
	assert_true(wait_state(f, ta, vol, is_mounted, 5000));
	assert_true(wait_state(f, tb, vol, is_mounted, 5000));
	assert_true(probe(f, NULL, vol).device_mounted);
	assert_int_equal(fake_count("mount_device", src), 1);

	remove_pod(f, "a.json");
	assert_true(wait_state(f, ta, vol, is_gone, 5000));
	wait_two_passes(f);
	p = probe(f, tb, vol);
	assert_true(p.mounted);
	assert_true(p.volume_desired);
	assert_true(p.device_known);
	assert_true(p.device_mounted);
	assert_int_equal(fake_count("unmount_device", NULL), 0);
	assert_int_equal(fake_count("detach", NULL), 0);

	remove_pod(f, "b.json");
	assert_true(wait_state(f, tb, vol, is_gone, 5000));
	assert_true(wait_state(f, NULL, vol, device_gone, 5000));
	/* The last pod's tear-down finished before the device's unmount began; detach last. */
	assert_int_equal(fake_count("unmount_device", NULL), 1);
	assert_true(fake_first("unmount_device", NULL) > fake_first("tear_down.done", src));
	{
		struct fake_event td[4];
		assert_int_equal(fake_find("tear_down.done", src, td, ARRAY_SIZE(td)), 2);
		assert_true(fake_first("unmount_device", NULL) > td[1].seq);
	}
	assert_true(fake_first("detach", src) > fake_first("unmount_device.done", NULL));
	snprintf(devdir, sizeof(devdir), "%s/plugins/kubernetes.io/fake/mounts", f->root);
	assert_int_equal(test_count_mounts_under(devdir), 0);
}

/* Starts the reconciler with pod uid (spec file <uid>.json) whose volume "v" of the source
 * dir name (a device volume when device) fails to set up or stage; the source, the volume's
 * name and the target into src (>= 600), vol (>= 620) and t (>= 600). */
static void start_failing_pod(struct fix *f, const char *name, const char *uid, bool device,
			      char *src, char *vol, char *t)
{
	char file[64];

	make_vol(f, name, src, vol);
	target_of(f, uid, "v", t, 600);
	fake_set_failing(src);
	assert_int_equal(rec_start(f), 0);
	snprintf(file, sizeof(file), "%s.json", uid);
	write_pod1(f, file, uid, src, device);
}

static bool failed_once(const struct probe *p)
{
	return p->failures >= 1;
}

static bool failed_three_times(const struct probe *p)
{
	return p->failures >= 3;
}

/* Retries of a failing set-up are spaced out, the delay doubling; after a success the backoff
 * is forgotten, so the next failure starts again from the initial delay. */
static void test_backoff_grows_and_resets(void **state)
{
	struct fix *f = *state;
	char src[600], t[600], vol[620];
	struct fake_event ev[8];
	unsigned long full_before;
	struct probe p;
	unsigned n;

	start_failing_pod(f, "src-bo", "pod-f", false, src, vol, t);
	assert_true(wait_state(f, t, vol, failed_once, 5000));
	full_before = probe(f, NULL, NULL).full_passes;
	assert_true(wait_state(f, t, vol, failed_three_times, 10000));
	p = probe(f, t, vol);
	assert_false(p.mounted);
	assert_int_equal(p.failing, 1);
	/* The retries came from the backoff timer's touch of the key: incremental passes. */
	if (!f->full)
		assert_int_equal(p.full_passes, full_before);
	assert_int_equal(p.delay_ms, BACKOFF_INITIAL_MS << (p.failures - 1));
	n = fake_find("set_up", src, ev, ARRAY_SIZE(ev));
	assert_true(n >= 3);
	/* Attempt k+1 waits at least the delay set by failure k: 100 ms, then 200 ms.  Only
	 * these bounds are exact: how much longer an attempt came (a loaded machine wakes the
	 * loop late) says nothing of the delay, so the gaps are not compared with each other. */
	assert_true(ev[1].ms - ev[0].ms >= BACKOFF_INITIAL_MS);
	assert_true(ev[2].ms - ev[1].ms >= 2 * BACKOFF_INITIAL_MS);

	fake_set_failing(NULL);
	assert_true(wait_state(f, t, vol, is_mounted, 10000));
	p = probe(f, t, vol);
	assert_int_equal(p.failures, 0);
	assert_int_equal(p.failing, 0);

	/* Fails again after the success: the failures are counted again from the first, with the
	 * initial delay.  Exact, on the backoff entry: its count is at most the set-ups failed
	 * since (read after it, so a failure not yet handled is in it); without the reset it would
	 * go on from the three before.  (A bound on when the retry came is not: a loaded machine
	 * makes it late.) */
	remove_pod(f, "pod-f.json");
	assert_true(wait_state(f, t, vol, is_gone, 5000));
	fake_reset();
	fake_set_failing(src);
	write_pod1(f, "pod-f.json", "pod-f", src, false);
	assert_true(wait_state(f, t, vol, failed_three_times, 10000));
	p = probe(f, t, vol);
	assert_true(p.failures <= fake_count("set_up.failed", src));
	assert_int_equal(p.delay_ms, BACKOFF_INITIAL_MS << (p.failures - 1));
	n = fake_find("set_up", src, ev, ARRAY_SIZE(ev));
	assert_true(n >= 2);
	assert_true(ev[1].ms - ev[0].ms >= BACKOFF_INITIAL_MS);
}

static bool failed_twice(const struct probe *p)
{
	return p->failures >= 2;
}

/* A volume that keeps failing does not hold up another one of the same pod: the good one is
 * mounted while the bad one waits in backoff, and stays mounted. */
static void test_failing_volume_does_not_hold_up_another(void **state)
{
	struct fix *f = *state;
	char good[600], bad[600], tg[600], tbad[600], vgood[620], vbad[620];
	struct probe p;

	make_vol(f, "src-good", good, vgood);
	make_vol(f, "src-bad", bad, vbad);
	target_of(f, "pod-g", "good", tg, sizeof(tg));
	target_of(f, "pod-g", "bad", tbad, sizeof(tbad));
	fake_set_failing(bad);
	assert_int_equal(rec_start(f), 0);
	write_pod2(f, "g.json", "pod-g", "bad", bad, false, "good", good);
	assert_true(wait_state(f, tg, vgood, is_mounted, 5000));
	assert_true(wait_state(f, tbad, vbad, failed_twice, 10000));
	p = probe(f, tg, vgood);
	assert_true(p.mounted);
	assert_int_equal(p.failures, 0);
	assert_int_equal(p.failing, 1);
	assert_false(probe(f, tbad, vbad).mounted);
	assert_true(test_is_mountpoint(tg));
	assert_false(test_is_mountpoint(tbad));
	/* The good one was set up once, right away: not after the bad one's retries. */
	assert_int_equal(fake_count("set_up", good), 1);
	{
		struct fake_event bad_ups[8];
		assert_true(fake_find("set_up", bad, bad_ups, ARRAY_SIZE(bad_ups)) >= 2);
		assert_true(fake_first("set_up.done", good) < bad_ups[1].seq);
	}
}

static bool device_failed_twice(const struct probe *p)
{
	return p->failing >= 1 && fake_count("mount_device.failed", NULL) >= 2;
}

/* A device whose staging fails is staged again after its backoff, and its pod then mounted. */
static void test_failed_device_retried(void **state)
{
	struct fix *f = *state;
	char src[600], t[600], vol[620];

	start_failing_pod(f, "src-devfail", "pod-d", true, src, vol, t);
	assert_true(wait_state(f, t, vol, device_failed_twice, 10000));
	assert_false(probe(f, t, vol).mounted);
	fake_set_failing(NULL);
	assert_true(wait_state(f, t, vol, is_mounted, 10000));
	assert_true(probe(f, t, vol).device_mounted);
	assert_int_equal(probe(f, t, vol).failing, 0);
}

static bool ready_and_mounted(const struct probe *p)
{
	return p->ready && p->mounted && p->device_mounted;
}

static bool ready_and_mounted_plain(const struct probe *p)
{
	return p->ready && p->mounted;
}

/* After a restart (a new reconciler on the same root and state dir), what is mounted is
 * adopted: checked with check_set_up, never set up or mounted again. */
static void test_reconstruction_adopts_mounts(void **state)
{
	struct fix *f = *state;
	char dsrc[600], psrc[600], td[600], tp[600], vd[620], vp[620];
	int id_d, id_p;

	make_vol(f, "src-dev", dsrc, vd);
	make_vol(f, "src-plain", psrc, vp);
	target_of(f, "pod-r", "dev", td, sizeof(td));
	target_of(f, "pod-r", "plain", tp, sizeof(tp));
	assert_int_equal(rec_start(f), 0);
	write_pod2(f, "r.json", "pod-r", "dev", dsrc, true, "plain", psrc);
	assert_true(wait_state(f, td, vd, is_mounted, 5000));
	assert_true(wait_state(f, tp, vp, is_mounted, 5000));
	id_d = test_mount_id(td);
	id_p = test_mount_id(tp);
	assert_true(id_d > 0 && id_p > 0);

	/* The restart: the old reconciler goes, its mounts and state dir stay. */
	f->r = reconciler_free(f->r);
	fake_reset();
	assert_int_equal(rec_start(f), 0);
	assert_true(wait_state(f, td, vd, ready_and_mounted, 5000));
	assert_true(wait_state(f, tp, vp, ready_and_mounted_plain, 5000));
	wait_two_passes(f);
	assert_int_equal(fake_count("set_up", NULL), 0);
	assert_int_equal(fake_count("mount_device", NULL), 0);
	assert_int_equal(fake_count("tear_down", NULL), 0);
	assert_int_equal(fake_count("unmount_device", NULL), 0);
	assert_int_equal(fake_count("check_set_up", dsrc), 1);
	assert_int_equal(fake_count("check_set_up", psrc), 1);
	assert_int_equal(test_mount_id(td), id_d);
	assert_int_equal(test_mount_id(tp), id_p);
}

/* --- the incremental pass is incremental --- */

/* Writes n pods pod-0..pod-<n-1>, each with one plain volume of its own, and waits until all
 * are mounted. */
static bool is_mounted_and_seen(const struct probe *p)
{
	return is_mounted(p) && p->table_has_mount;
}

/* Mounts n numbered pods and waits until each is mounted and its mount event read, so that
 * what a case counts next is not the tail of this burst (read up to 10 ms later). */
static void mount_pods(struct fix *f, unsigned n)
{
	struct numbered p;

	write_numbered_pods(f, n, NULL);
	for (unsigned i = 0; i < n; i++) {
		numbered_pod(f, i, &p);
		assert_true(wait_state(f, p.target, p.vol, is_mounted_and_seen, 5000));
	}
}

static struct volume_request *csi_request(enum volume_request_kind kind, const char *id,
					  const char *target, const char *src)
{
	struct volume_request *req = volume_request_new(kind);

	assert_non_null(req);
	req->volume_id = strdup(id);
	req->path = strdup(target);
	if (src) {
		req->spec = volume_spec_new("fake");
		assert_non_null(req->spec);
		assert_int_equal(volume_spec_set(req->spec, "path", src), 0);
		req->plugin = &fake_plugin;
		req->fingerprint = strdup("fp");
	}
	return req;
}

struct passes_above {
	struct fix *f;
	unsigned long passes;
	bool full; /* count the full passes only */
};

static bool passes_above(void *arg)
{
	struct passes_above *a = arg;
	struct probe p = probe(a->f, NULL, NULL);

	return (a->full ? p.full_passes : p.passes) > a->passes;
}

static bool probe_ready(void *arg)
{
	return probe(arg, NULL, NULL).ready;
}

/* A restart with 300 pod mounts, each verify slow enough that the results come back to the
 * reconciler in many batches: a result
 * that adopts a mount causes no pass of its own (it used to be a full pass each), the full
 * pass that makes the agent ready follows the last one, and every mount is adopted as it
 * was (no set-up, same mount IDs). */
static void test_restart_verifies_without_full_pass_each(void **state)
{
	enum {
		N = 300
	};
	struct fix *f = *state;
	struct numbered p0, pn, np;
	int id0, idn;
	struct probe p;

	assert_int_equal(rec_start(f), 0);
	mount_pods(f, N);
	numbered_pod(f, 0, &p0);
	numbered_pod(f, N - 1, &pn);
	id0 = test_mount_id(p0.target);
	idn = test_mount_id(pn.target);
	assert_true(id0 > 0 && idn > 0);

	f->r = reconciler_free(f->r);
	fake_reset();
	pthread_mutex_lock(&fake.lock);
	fake.check_delay_ms = 2;
	pthread_mutex_unlock(&fake.lock);
	assert_int_equal(rec_start(f), 0);
	assert_true(test_wait_until(probe_ready, f, scaled(10000)));
	p = probe(f, NULL, NULL);
	print_message("passes up to ready: %lu (full %lu)\n", p.passes, p.full_passes);
	assert_true(p.passes <= 6);
	for (unsigned i = 0; i < N; i++) {
		numbered_pod(f, i, &np);
		assert_int_equal(fake_count("check_set_up", np.src), 1);
		p = probe(f, np.target, np.vol);
		assert_true(p.mounted);
	}
	wait_two_passes(f);
	assert_int_equal(fake_count("set_up", NULL), 0);
	assert_int_equal(fake_count("tear_down", NULL), 0);
	assert_int_equal(test_mount_id(p0.target), id0);
	assert_int_equal(test_mount_id(pn.target), idn);
}

/* A health tick (idle CPU at 10,000 volumes) queues the checks through an incremental pass:
 * with 20 pod volumes mounted and nothing changing, the ticks cause passes, none of them full
 * and none visiting every volume. */
static void test_health_tick_is_not_a_full_pass(void **state)
{
	struct fix *f = *state;
	struct probe before, after;

	f->refresh_ms = 600000;
	f->health_ms = 50;
	assert_int_equal(rec_start(f), 0);
	mount_pods(f, 20);
	before = probe(f, NULL, NULL);
	assert_true(test_wait_until(passes_above,
				    &(struct passes_above){ f, before.passes + 3, false },
				    scaled(5000)));
	after = probe(f, NULL, NULL);
	assert_int_equal(after.full_passes, before.full_passes);
	assert_true(after.incremental_passes >= before.incremental_passes + 4);
	assert_true(after.keys_visited - before.keys_visited < 20);
}

struct checked_all {
	struct fix *f;
	unsigned n;
};

static bool each_target_checked(void *arg)
{
	struct checked_all *c = arg;
	struct numbered p;

	for (unsigned i = 0; i < c->n; i++) {
		numbered_pod(c->f, i, &p);
		if (fake_count("check_health", p.target) == 0)
			return false;
	}
	return true;
}

/* The health ticks check every mounted pod volume of a plugin that has a check (the fake's
 * pod volumes are binds, not staged: each target is checked). */
static void test_health_tick_checks_each_pod_volume(void **state)
{
	static const struct volume_plugin *const checked[] = { &fake_plugin_checked };
	struct fix *f = *state;

	plugin_registry_set(checked, ARRAY_SIZE(checked));
	f->refresh_ms = 600000;
	f->health_ms = 50;
	assert_int_equal(rec_start(f), 0);
	mount_pods(f, 20);
	assert_true(
		test_wait_until(each_target_checked, &(struct checked_all){ f, 20 }, scaled(5000)));
}

/* A CSI publish and unpublish, with 20 pod volumes already mounted, converge through
 * incremental passes alone (the table is not re-read meanwhile: refresh_min_interval_ms is
 * long), each visiting a handful of keys rather than every volume. */
static void test_csi_request_converges_incrementally(void **state)
{
	struct fix *f = *state;
	struct volume_request_result res;
	char src[600], parent[700], target[720], vol[620];
	struct probe before, after;

	f->refresh_ms = 600000;
	make_src(f, "src-csi", src, sizeof(src));
	snprintf(parent, sizeof(parent), "%s/pods/uid-c/volumes/kubernetes.io~csi/pv-c",
		 f->kubelet);
	snprintf(target, sizeof(target), "%s/mount", parent);
	snprintf(vol, sizeof(vol), "csi:vol-c");
	assert_int_equal(path_mkdir_p(parent, 0750), 0);
	assert_int_equal(rec_start(f), 0);
	mount_pods(f, 20);

	before = probe(f, NULL, NULL);
	memset(&res, 0, sizeof(res));
	assert_int_equal(
		reconciler_request(f->r, csi_request(VOLUME_REQUEST_PUBLISH, "vol-c", target, src),
				   scaled(5000), &res),
		0);
	assert_int_equal(res.error, 0);
	assert_true(test_is_mountpoint(target));
	after = probe(f, target, vol);
	assert_true(after.desired && after.mounted);
	assert_int_equal(after.full_passes, before.full_passes);
	assert_true(after.incremental_passes > before.incremental_passes);
	/* A few keys per pass (the target, the volume's device): not the 20 other volumes. */
	assert_true(after.keys_visited - before.keys_visited <=
		    4 * (after.incremental_passes - before.incremental_passes));
	assert_true(after.keys_visited - before.keys_visited < 20);

	before = after;
	memset(&res, 0, sizeof(res));
	assert_int_equal(reconciler_request(f->r,
					    csi_request(VOLUME_REQUEST_UNPUBLISH, "vol-c", target,
							NULL),
					    scaled(5000), &res),
			 0);
	assert_int_equal(res.error, 0);
	assert_false(test_is_mountpoint(target));
	after = probe(f, target, vol);
	assert_false(after.desired || after.mounted);
	assert_int_equal(after.full_passes, before.full_passes);
	assert_true(after.keys_visited - before.keys_visited < 20);
}

/* One CSI volume published at k targets one after another, then unpublished from each: a
 * publish or an unpublish visits its target and the volume's device, not the volume's other
 * targets, so the 2k calls cost O(k) visits (kubelet's k pods sharing one volume), not
 * O(k^2). */
static void test_csi_shared_volume_linear(void **state)
{
	enum {
		K = 24
	};
	struct fix *f = *state;
	struct volume_request_result res;
	char src[600], parent[700], target[K][720];
	struct probe before, after;

	f->refresh_ms = 600000;
	make_src(f, "src-csi-shared", src, sizeof(src));
	assert_int_equal(rec_start(f), 0);
	wait_two_passes(f);
	before = probe(f, NULL, NULL);
	for (int i = 0; i < 2 * K; i++) {
		bool publish = i < K;
		char *t = target[i % K];

		if (publish) {
			snprintf(parent, sizeof(parent),
				 "%s/pods/uid-%d/volumes/kubernetes.io~csi/pv-s", f->kubelet, i);
			snprintf(t, sizeof(target[0]), "%s/mount", parent);
			assert_int_equal(path_mkdir_p(parent, 0750), 0);
		}
		memset(&res, 0, sizeof(res));
		assert_int_equal(reconciler_request(f->r,
						    csi_request(publish ? VOLUME_REQUEST_PUBLISH
									: VOLUME_REQUEST_UNPUBLISH,
								"vol-s", t, publish ? src : NULL),
						    scaled(5000), &res),
				 0);
		assert_int_equal(res.error, 0);
		assert_int_equal(test_is_mountpoint(t), publish);
	}
	after = probe(f, NULL, NULL);
	assert_int_equal(after.full_passes, before.full_passes);
	/* A few per call; ~k^2 = 576 if each call visited the volume's other targets. */
	assert_true(after.keys_visited - before.keys_visited <= 6 * K);
}

/* More keys touched in one loop turn than a set holds (REC_TOUCHED_MAX): the sets are
 * emptied and never grow past the limit, one full pass follows, visiting every volume and
 * changing nothing that was right, and the passes after it are incremental again. */
struct flood {
	unsigned n;
	size_t largest; /* the touched targets' size, at its largest */
	size_t left;	/* what all three sets held after the flood */
	bool full_due;
};

static void flood_on_thread(struct reconciler *r, void *arg)
{
	struct flood *fl = arg;
	char t[64];

	for (unsigned i = 0; i < fl->n; i++) {
		snprintf(t, sizeof(t), "/flood/target-%u", i);
		rec_touch_target(r, t);
		if (hashmap_size(r->pass.touched_targets) > fl->largest)
			fl->largest = hashmap_size(r->pass.touched_targets);
	}
	fl->full_due = r->pass.full_pass_due;
	fl->left = hashmap_size(r->pass.touched_targets) + hashmap_size(r->pass.touched_volumes) +
		   hashmap_size(r->pass.touched_devices);
}

static void test_touch_flood_becomes_one_full_pass(void **state)
{
	enum {
		N = 20
	};
	struct fix *f = *state;
	struct flood fl = { .n = REC_TOUCHED_MAX + 100 };
	struct numbered p3;
	unsigned set_ups, tear_downs;
	struct probe before, after;

	f->refresh_ms = 600000;
	assert_int_equal(rec_start(f), 0);
	mount_pods(f, N);
	set_ups = fake_count("set_up", NULL);
	tear_downs = fake_count("tear_down", NULL);
	before = probe(f, NULL, NULL);

	rec_run_on_thread(f->r, flood_on_thread, &fl);
	assert_true(fl.full_due);
	assert_int_equal(fl.largest, REC_TOUCHED_MAX);
	assert_int_equal(fl.left, 0);
	assert_true(test_wait_until(passes_above,
				    &(struct passes_above){ f, before.full_passes, true },
				    scaled(5000)));
	after = probe(f, NULL, NULL);
	assert_int_equal(after.full_passes, before.full_passes + 1);
	assert_true(after.keys_visited - before.keys_visited >= N);
	assert_int_equal(fake_count("set_up", NULL), set_ups);
	assert_int_equal(fake_count("tear_down", NULL), tear_downs);

	/* A change after it is incremental again: pod-3's spec file goes, its volume follows. */
	before = after;
	numbered_pod(f, 3, &p3);
	remove_pod(f, p3.file);
	assert_true(wait_state(f, p3.target, p3.vol, is_gone, scaled(5000)));
	after = probe(f, NULL, NULL);
	assert_int_equal(after.full_passes, before.full_passes);
	assert_true(after.incremental_passes > before.incremental_passes);
	assert_int_equal(fake_count("tear_down", NULL), tear_downs + 1);
}

/* k pods sharing one volume converge in O(k) key visits: a set-up finishing touches its
 * target and the volume's device, not every pod of the volume. */
/* The actual state's index of pod mounts by volume (what the pass reads to tell whether a
 * volume is held): exact through additions, removal of the mount whose volume name is the
 * index's key, a verify that names the volume, and replacement. */
static bool held_by(const struct actual_state *a, const char *volume, const char *target)
{
	for (const struct asw_pod_mount *pm = asw_pod_mounts_of(a, volume); pm;
	     pm = pm->next_of_volume)
		if (streq(pm->target, target))
			return true;
	return false;
}

static void test_asw_volume_index(void **state)
{
	struct actual_state *a = asw_new("/r");
	struct asw_pod_mount *pm;

	assert_non_null(a);
	assert_non_null(asw_set_pod_mount(a, "/r/pods/p1/volumes/kubernetes.io~x/v", "p1", "v", "x",
					  "vol-a", false, -1, 1));
	assert_non_null(asw_set_pod_mount(a, "/r/pods/p2/volumes/kubernetes.io~x/v", "p2", "v", "x",
					  "vol-a", false, -1, 1));
	assert_non_null(asw_set_pod_mount(a, "/r/pods/p3/volumes/kubernetes.io~x/v", "p3", "v", "x",
					  "vol-b", false, -1, 1));
	pm = asw_set_pod_mount(a, "/r/pods/p4/volumes/kubernetes.io~x/v", "p4", "v", "x", NULL,
			       false, -1, 1);
	assert_non_null(pm);
	assert_int_equal(asw_count_pod_mounts_of(a, "vol-a"), 2);
	assert_int_equal(asw_count_pod_mounts_of(a, "vol-b"), 1);
	assert_null(asw_pod_mounts_of(a, "vol-c"));
	/* The first of vol-a (its name is the key) goes: the other is still found. */
	asw_remove_pod_mount(a, "/r/pods/p1/volumes/kubernetes.io~x/v", 2);
	assert_int_equal(asw_count_pod_mounts_of(a, "vol-a"), 1);
	assert_true(held_by(a, "vol-a", "/r/pods/p2/volumes/kubernetes.io~x/v"));
	/* An unverified mount is verified as holding vol-b, then found to hold vol-a. */
	assert_int_equal(asw_pod_mount_set_volume(a, pm, "vol-b"), 0);
	assert_int_equal(asw_count_pod_mounts_of(a, "vol-b"), 2);
	assert_int_equal(asw_pod_mount_set_volume(a, pm, "vol-a"), 0);
	assert_string_equal(pm->volume_name, "vol-a");
	assert_true(held_by(a, "vol-a", "/r/pods/p4/volumes/kubernetes.io~x/v"));
	assert_int_equal(asw_count_pod_mounts_of(a, "vol-b"), 1);
	/* A set-up that replaces the record at a target with another volume. */
	assert_non_null(asw_set_pod_mount(a, "/r/pods/p3/volumes/kubernetes.io~x/v", "p3", "v", "x",
					  "vol-a", false, -1, 3));
	assert_null(asw_pod_mounts_of(a, "vol-b"));
	assert_int_equal(asw_count_pod_mounts_of(a, "vol-a"), 3);
	asw_remove_pod_mount(a, "/r/pods/p2/volumes/kubernetes.io~x/v", 4);
	asw_remove_pod_mount(a, "/r/pods/p3/volumes/kubernetes.io~x/v", 4);
	assert_int_equal(asw_pod_mount_set_volume(a, pm, NULL), 0);
	assert_null(asw_pod_mounts_of(a, "vol-a"));
	asw_free(a);
}

/* A pod's owner (the spec file that declares it, for spec-source's uid conflicts) is kept
 * when the pod is replaced and goes with the pod. */
static void test_dsw_pod_owner(void **state)
{
	struct desired_state *d = dsw_new("/r");
	struct error_info err = { 0 };
	struct pod_spec *p1 = NULL, *p2 = NULL;
	int owner;

	assert_non_null(d);
	assert_int_equal(
		pod_spec_parse_string("{\"pod\": {\"uid\": \"u1\"}, \"volumes\": "
				      "[{\"name\": \"v\", \"local\": {\"path\": \"/tmp\"}}]}",
				      "one", &p1, &err),
		0);
	assert_int_equal(
		pod_spec_parse_string("{\"pod\": {\"uid\": \"u1\"}, \"volumes\": "
				      "[{\"name\": \"w\", \"local\": {\"path\": \"/srv\"}}]}",
				      "two", &p2, &err),
		0);
	assert_null(dsw_pod_owner(d, "u1"));
	assert_int_equal(dsw_pod_set_owner(d, "u1", &owner), -ENOENT);
	assert_int_equal(dsw_set_pod(d, p1, &err), 0);
	assert_int_equal(dsw_pod_set_owner(d, "u1", &owner), 0);
	assert_ptr_equal(dsw_pod_owner(d, "u1"), &owner);
	assert_int_equal(dsw_set_pod(d, p2, &err), 0); /* the pod's new content */
	assert_ptr_equal(dsw_pod_owner(d, "u1"), &owner);
	assert_int_equal(hashmap_size(dsw_pod_volumes(d)), 1);
	assert_int_equal(dsw_remove_pod(d, "u1"), 0);
	assert_null(dsw_pod_owner(d, "u1"));
	pod_spec_free(p1);
	pod_spec_free(p2);
	dsw_free(d);
}

static void test_shared_volume_visits_linear(void **state)
{
	enum {
		K = 16
	};
	struct fix *f = *state;
	char src[600], vol[620];
	struct numbered p;
	struct probe before, after;

	f->refresh_ms = 600000;
	make_vol(f, "src-shared", src, vol);
	assert_int_equal(rec_start(f), 0);
	wait_two_passes(f);
	before = probe(f, NULL, NULL);
	write_numbered_pods(f, K, src);
	for (unsigned i = 0; i < K; i++) {
		numbered_pod(f, i, &p);
		assert_true(wait_state(f, p.target, vol, is_mounted, 5000));
	}
	after = probe(f, NULL, NULL);
	assert_int_equal(after.full_passes, before.full_passes);
	/* About 2 per pod (its spec, its set-up); k^2/2 = 128 if each set-up visited all. */
	assert_true(after.keys_visited - before.keys_visited <= 4 * K);
}

/* The k pods of one volume going one after another: each tear-down visits its own target and
 * the device, not the volume's other pods (no pod waits for the volume), so k tear-downs cost
 * O(k) visits, not O(k^2). */
static void test_shared_volume_teardowns_linear(void **state)
{
	enum {
		K = 24
	};
	struct fix *f = *state;
	char src[600], t[600], vol[620], name[32], file[32];
	struct probe before, after;

	f->refresh_ms = 600000;
	make_src(f, "src-shared-down", src, sizeof(src));
	snprintf(vol, sizeof(vol), "fake:%s", src);
	assert_int_equal(rec_start(f), 0);
	for (int i = 0; i < K; i++) {
		snprintf(name, sizeof(name), "pod-%d", i);
		snprintf(file, sizeof(file), "pod-%d.json", i);
		write_pod1(f, file, name, src, false);
	}
	for (int i = 0; i < K; i++) {
		snprintf(name, sizeof(name), "pod-%d", i);
		target_of(f, name, "v", t, sizeof(t));
		assert_true(wait_state(f, t, vol, is_mounted, 5000));
	}
	wait_two_passes(f);
	before = probe(f, NULL, NULL);
	for (int i = 0; i < K; i++) {
		snprintf(name, sizeof(name), "pod-%d", i);
		snprintf(file, sizeof(file), "pod-%d.json", i);
		target_of(f, name, "v", t, sizeof(t));
		remove_pod(f, file);
		assert_true(wait_state(f, t, vol, is_gone, 5000));
		assert_false(test_is_mountpoint(t));
	}
	after = probe(f, NULL, NULL);
	assert_int_equal(after.full_passes, before.full_passes);
	/* A few per pod (its spec, its tear-down, the device); ~k^2 = 576 if each tear-down
	 * visited all the others. */
	assert_true(after.keys_visited - before.keys_visited <= 6 * K);
}

struct stray {
	const char *src, *target, *volume;
};

/* Mounts src at target and records it in the actual state, touching nothing: what a pass
 * never asked to look at there cannot know. */
static void inject_stray(struct reconciler *r, void *arg)
{
	struct stray *s = arg;

	assert_int_equal(path_mkdir_p(s->target, 0750), 0);
	assert_int_equal(mount(s->src, s->target, NULL, MS_BIND, NULL), 0);
	assert_non_null(asw_set_pod_mount(r->asw, s->target, "pod-s", "v", "fake", s->volume, false,
					  -1, 0));
}

static bool stray_gone(void *arg)
{
	const struct stray *s = arg;

	return fake_count("tear_down.done", s->src) == 1 && !test_is_mountpoint(s->target);
}

/* A pod mount no spec wants, that nothing touched, is torn down by the next full pass (a
 * forced resync); incremental passes for other volumes meanwhile leave it alone.  With every
 * pass a full one, the first pass for another volume takes it down. */
static void test_untouched_stray_waits_for_full_pass(void **state)
{
	struct fix *f = *state;
	char ssrc[600], starget[600], svol[620], osrc[600], otarget[600], ovol[620];
	struct stray s = { ssrc, starget, svol };

	/* No table re-read meanwhile: one racing a set-up's result sees a mount the state does
	 * not know yet, and asks for a full pass.  On the libmount fallback, whose re-reads the
	 * interval holds off: with mount events, the stray's own attach event touches it. */
	f->refresh_ms = 600000;
	f->mount_events_off = true;
	make_vol(f, "src-stray", ssrc, svol);
	make_vol(f, "src-other", osrc, ovol);
	target_of(f, "pod-s", "v", starget, sizeof(starget));
	target_of(f, "pod-o", "v", otarget, sizeof(otarget));
	assert_int_equal(rec_start(f), 0);
	wait_two_passes(f);
	rec_run_on_thread(f->r, inject_stray, &s);

	write_pod1(f, "o.json", "pod-o", osrc, false);
	assert_true(wait_state(f, otarget, ovol, is_mounted, 5000));
	if (f->full) {
		assert_true(test_wait_until(stray_gone, &s, scaled(5000)));
		return;
	}
	/* Incremental passes ran for pod-o; the stray is still there, untouched. */
	assert_true(probe(f, NULL, NULL).incremental_passes > 0);
	assert_true(test_is_mountpoint(starget));
	assert_int_equal(fake_count("tear_down", ssrc), 0);

	reconciler_request_resync(f->r);
	assert_true(test_wait_until(stray_gone, &s, scaled(5000)));
	assert_true(test_is_mountpoint(otarget));
}

/* Mounts src at target, records it in the actual state as an operation's result would (its
 * mount ID, the table's generation then), and unmounts it again: all on the reconciler thread,
 * so the table never shows the mount (its attach event finds it gone; the fallback's read
 * finds the table as it was).  Only a full read that syncs the record finds it went. */
static void inject_vanished(struct reconciler *r, void *arg)
{
	struct stray *s = arg;
	int id;

	assert_int_equal(path_mkdir_p(s->target, 0750), 0);
	assert_int_equal(mount(s->src, s->target, NULL, MS_BIND, NULL), 0);
	id = test_mount_id(s->target);
	assert_true(id > 0);
	assert_non_null(asw_set_pod_mount(r->asw, s->target, "pod-x", "v", "fake", s->volume, false,
					  id, mount_table_generation(r->table)));
	assert_int_equal(umount2(s->target, 0), 0);
}

static bool not_recorded(const struct probe *p)
{
	return !p->mounted;
}

/* A full read syncs only what the table reported changed and the records it never confirmed:
 * an operation's mount that went before the table showed it is one of them.  The next table
 * read (the mount events' "unread" or the fallback's monitor asks for one) drops the record,
 * without a tear-down (a pass that still believed in the mount would queue one). */
static void vanished_mount_dropped(struct fix *f)
{
	char src[600], target[600], vol[620];
	struct stray s = { src, target, vol };

	make_vol(f, "src-vanished", src, vol);
	target_of(f, "pod-x", "v", target, sizeof(target));
	assert_int_equal(rec_start(f), 0);
	wait_two_passes(f);
	rec_run_on_thread(f->r, inject_vanished, &s);
	if (f->mount_events_off) /* the monitor may have said nothing: nothing showed */
		reconciler_request_resync(f->r);
	assert_true(wait_state(f, target, vol, not_recorded, scaled(5000)));
	wait_two_passes(f);
	assert_int_equal(fake_count("tear_down", src), 0);
	assert_false(test_is_mountpoint(target));
}

static void test_vanished_mount_dropped_events(void **state)
{
	vanished_mount_dropped(*state);
}

static void test_vanished_mount_dropped_fallback(void **state)
{
	struct fix *f = *state;

	f->mount_events_off = true;
	vanished_mount_dropped(f);
}

static void set_limit(struct reconciler *r, void *arg)
{
	r->ops.max_pod_ops = (size_t)(uintptr_t)arg;
}

/* The most set-ups in flight at once, from the fake plugin's record. */
static unsigned max_setups_at_once(void)
{
	unsigned cur = 0, max = 0;

	pthread_mutex_lock(&fake.lock);
	for (unsigned i = 0; i < fake.n; i++) {
		if (streq(fake.events[i].op, "set_up"))
			cur++;
		else if (startswith(fake.events[i].op, "set_up."))
			cur--;
		if (cur > max)
			max = cur;
	}
	pthread_mutex_unlock(&fake.lock);
	return max;
}

/* Set-ups beyond the in-flight limit wait for room (a converge holds ~1 KiB per operation
 * until it is done) and are started by a later pass: every volume is mounted, never more than
 * the limit at once. */
static void test_setups_in_flight_are_bounded(void **state)
{
	enum {
		K = 12,
		LIMIT = 2
	};
	struct fix *f = *state;
	struct numbered p;

	assert_int_equal(rec_start(f), 0);
	wait_two_passes(f);
	rec_run_on_thread(f->r, set_limit, (void *)(uintptr_t)LIMIT);
	pthread_mutex_lock(&fake.lock);
	fake.setup_delay_ms = 30; /* so that set-ups pile up */
	pthread_mutex_unlock(&fake.lock);
	write_numbered_pods(f, K, NULL);
	for (unsigned i = 0; i < K; i++) {
		numbered_pod(f, i, &p);
		assert_true(wait_state(f, p.target, p.vol, is_mounted, scaled(5000)));
		assert_true(test_is_mountpoint(p.target));
	}
	assert_int_equal(fake_count("set_up.done", NULL), K);
	assert_int_equal(max_setups_at_once(), LIMIT); /* reached, never passed */
}

/* --- defect 4: a mount-table read failure is logged once, at the boundary --- */

/* Redirects stderr (where the log goes) to a file until log_capture_end. */
struct log_capture {
	char path[64];
	int saved;
};

static void log_capture_begin(struct log_capture *c)
{
	int fd;

	snprintf(c->path, sizeof(c->path), "/tmp/va-rec-log-XXXXXX");
	fd = mkstemp(c->path);
	assert_true(fd >= 0);
	fflush(stderr);
	c->saved = dup(2);
	dup2(fd, 2);
	close(fd);
}

/* Restores stderr and returns what was logged (caller frees). */
static char *log_capture_end(struct log_capture *c)
{
	char *text;

	fflush(stderr);
	dup2(c->saved, 2);
	close(c->saved);
	text = test_read_file(c->path);
	unlink(c->path);
	return text ? text : strdup("");
}

static unsigned count_lines_with(const char *text, const char *needle)
{
	unsigned n = 0;

	for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Hides /proc in the test's mount namespace: /proc/self/mountinfo cannot be opened, a real
 * read failure of the mount table (the monitor's fd, opened before, keeps working). */
static void hide_proc(void)
{
	assert_int_equal(mount("none", "/proc", "tmpfs", MS_NOSUID | MS_NODEV, "size=4k"), 0);
}

static void unhide_proc(void)
{
	assert_int_equal(umount2("/proc", MNT_DETACH), 0);
}

/* At startup the failure is not logged by the reconciler: it goes back in err, for the one
 * caller (cmd-run: "cannot start") to log. */
static void test_table_unreadable_at_start_is_returned_not_logged(void **state)
{
	struct fix *f = *state;
	struct error_info err = { 0 };
	struct log_capture c;
	_cleanup_free_ char *log = NULL;
	int k;

	assert_int_equal(reconciler_new(
				 &(struct reconciler_config){
					 .root_dir = f->root,
					 .state_dir = f->state,
					 .pods_dir = f->pods,
					 .workers = 1,
					 .backoff_initial_ms = 100,
					 .backoff_max_ms = 1000,
					 .resync_ms = 600000,
					 .refresh_min_interval_ms = 10,
					 .mount_events_off = true, /* reads mountinfo */
				 },
				 &f->r, &err),
			 0);
	log_capture_begin(&c);
	hide_proc();
	k = reconciler_start(f->r, &err);
	unhide_proc();
	log = log_capture_end(&c);
	assert_true(k < 0);
	assert_int_equal(count_lines_with(log, "mount table"), 0);
	assert_non_null(strstr(err_msg(&err), "reading the mount table /proc/self/mountinfo"));
}

static bool table_failure_logged(void *arg)
{
	struct log_capture *c = arg;
	_cleanup_free_ char *text = test_read_file(c->path);

	return text && strstr(text, "cannot read the mount table");
}

/* While running, the loop is the boundary: it logs the failure once however often the read is
 * retried, and once more when the table is readable again. */
static void test_table_unreadable_while_running_logged_once(void **state)
{
	struct fix *f = *state;
	struct log_capture c;
	_cleanup_free_ char *log = NULL;

	f->mount_events_off = true; /* mount events need no /proc: only mountinfo can fail */
	assert_int_equal(rec_start(f), 0);
	wait_two_passes(f);
	log_capture_begin(&c);
	hide_proc(); /* the monitor sees the mount: the table is re-read, and fails */
	assert_true(test_wait_until(table_failure_logged, &c, 5000));
	wait_two_passes(f); /* forced resyncs, each reading the table again */
	wait_two_passes(f);
	unhide_proc();
	wait_two_passes(f);
	log = log_capture_end(&c);
	assert_int_equal(count_lines_with(log, "cannot read the mount table"), 1);
	assert_int_equal(count_lines_with(log, "mount table is readable again"), 1);
}

/* A case run under incremental passes, then under full passes only. */
#define BOTH_KINDS(f)                                       \
	{ #f " (incremental)", f, setup, teardown, NULL },  \
	{                                                   \
#f " (full)", f, setup_full, teardown, NULL \
	}

int main(void)
{
	const struct CMUnitTest tests[] = {
		/* The rules, under incremental passes and under full passes only. */
		BOTH_KINDS(test_move_between_pods_unmounts_first),
		BOTH_KINDS(test_device_released_after_last_pod),
		BOTH_KINDS(test_backoff_grows_and_resets),
		BOTH_KINDS(test_failing_volume_does_not_hold_up_another),
		BOTH_KINDS(test_failed_device_retried),
		cmocka_unit_test_setup_teardown(test_csi_request_converges_incrementally, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_shared_volume_visits_linear, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shared_volume_teardowns_linear, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_csi_shared_volume_linear, setup, teardown),
		cmocka_unit_test_setup_teardown(test_touch_flood_becomes_one_full_pass, setup,
						teardown),
		cmocka_unit_test(test_asw_volume_index),
		cmocka_unit_test(test_dsw_pod_owner),
		cmocka_unit_test_setup_teardown(test_health_tick_checks_each_pod_volume, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_health_tick_is_not_a_full_pass, setup,
						teardown),
		BOTH_KINDS(test_untouched_stray_waits_for_full_pass),
		BOTH_KINDS(test_vanished_mount_dropped_events),
		BOTH_KINDS(test_vanished_mount_dropped_fallback),
		BOTH_KINDS(test_setups_in_flight_are_bounded),
		cmocka_unit_test_setup_teardown(test_reconstruction_adopts_mounts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restart_verifies_without_full_pass_each, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_table_unreadable_at_start_is_returned_not_logged, setup, teardown),
		cmocka_unit_test_setup_teardown(test_table_unreadable_while_running_logged_once,
						setup, teardown),
	};

	if (!test_have_root()) {
		fprintf(stderr, "skipped: needs root with CAP_SYS_ADMIN\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
