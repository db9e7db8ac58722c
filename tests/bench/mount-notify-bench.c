/* mount-notify-bench.c - what lib/mount-notify costs at 10,000 mounts, against libmount
 * reading all of mountinfo (issue 13's targets: a mount event handled in <= 50 us of agent
 * CPU; a forced full resync at 10,000 mounts in <= 15 ms).
 *
 * Runs as root in a private mount namespace it makes itself, on a tmpfs it mounts over a
 * fresh directory under $TMPDIR; everything goes away with the process.  It makes N bind
 * mounts under <work>/big (the agent's tree), SMALL more under <work>/small and SMALL under
 * <work>/smallmp, then measures:
 *
 *   event.batch    CPU per event, M ATTACH events queued then read in one go, each
 *                  statmount'ed (what the agent does per event);
 *   event.single   the same, one mount at a time: a read() per event as under epoll;
 *   resync.ids     a forced full resync by ID: listmount of the whole namespace, diffed with
 *                  the previous listing (IDs are never reused), and statmount of the mounts
 *                  that appeared since (CHURN mounts replaced between two runs);
 *   resync.big     listmount + statmount of every mount below <work>/big (N mounts): a first
 *                  read, when no previous listing exists;
 *   resync.small   the same below <work>/small (SMALL mounts among N + 2 SMALL), a plain
 *                  directory: every mount of the tmpfs holding it is statmount'ed;
 *   resync.small.mp  the same below <work>/smallmp, a mount point (bind-mounted onto itself):
 *                  only its own subtree is listed;
 *   list.ids       listmount alone, the whole namespace;
 *   mountinfo      libmount parsing all of /proc/self/mountinfo (the fallback's full read).
 *
 * Every figure is the median of --reps runs of the thread's CPU time (CLOCK_THREAD_CPUTIME_ID:
 * user + system, the agent's cost; steadier than wall time on a shared machine), printed as
 * "figure <name> <value> <unit> (median of R: ...) wall <median> <unit>: what".
 *
 *   mount-notify-bench [--n 10000] [--events 1000] [--small 100] [--churn 100] [--reps 5] */
#include <errno.h>
#include <fcntl.h>
#include <libmount.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench-util.h"
#include "mount-notify.h"

#define MAX_REPS 50

static char work[PATH_MAX];

static double median(const double *v, int n)
{
	double s[MAX_REPS];

	memcpy(s, v, (size_t)n * sizeof(*v));
	return bench_median(s, n);
}

/* One measured quantity over the repetitions: CPU and wall time of the same runs. */
struct sample {
	double cpu[MAX_REPS], wall[MAX_REPS];
};

struct timer {
	uint64_t cpu, wall;
};

static void timer_start(struct timer *t)
{
	t->cpu = bench_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	t->wall = bench_clock_ns(CLOCK_MONOTONIC);
}

/* Adds the time since timer_start, divided by div, to rep i of s (unit: ns * scale). */
static void timer_add(const struct timer *t, struct sample *s, int i, double scale)
{
	s->cpu[i] += (double)(bench_clock_ns(CLOCK_THREAD_CPUTIME_ID) - t->cpu) * scale;
	s->wall[i] += (double)(bench_clock_ns(CLOCK_MONOTONIC) - t->wall) * scale;
}

static void figure(const char *name, const struct sample *s, int n, const char *unit,
		   const char *what)
{
	printf("figure %s %.3f %s (median of %d:", name, median(s->cpu, n), unit, n);
	for (int i = 0; i < n; i++)
		printf(" %.3f", s->cpu[i]);
	printf(") wall %.3f %s: %s\n", median(s->wall, n), unit, what);
	fflush(stdout);
}

static void xmkdir(const char *path)
{
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		die("mkdir %s: %s", path, strerror(errno));
}

static void bind_mount_nr(const char *dir, int i)
{
	char src[PATH_MAX + 8], path[PATH_MAX + 32];

	snprintf(src, sizeof(src), "%s/src", work);
	snprintf(path, sizeof(path), "%s/%05d", dir, i);
	xmkdir(path);
	if (mount(src, path, NULL, MS_BIND, NULL) < 0)
		die("bind %s on %s: %s", src, path, strerror(errno));
}

static void umount_nr(const char *dir, int i)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/%05d", dir, i);
	if (umount2(path, MNT_DETACH) < 0)
		die("umount %s: %s", path, strerror(errno));
}

/* dir/00000 ... dir/<n-1>, each a bind mount of <work>/src. */
static void make_binds(const char *dir, int n)
{
	xmkdir(dir);
	for (int i = 0; i < n; i++)
		bind_mount_nr(dir, i);
}

/* The agent's per-event work: statmount the new mount and keep what it needs. */
struct handled {
	size_t events, found;
	uint64_t sum; /* keeps the compiler from dropping the work */
};

static int handle_event(const struct mount_event *ev, void *userdata)
{
	struct handled *h = userdata;
	struct mount_stat *st;

	h->events++;
	if (ev->mask & MOUNT_EVENT_OVERFLOW)
		die("the event queue overflowed: use a smaller --events");
	if (!(ev->mask & MOUNT_EVENT_ATTACH))
		return 0;
	if (mount_stat_by_id(ev->id, &st) == 0) {
		h->found++;
		h->sum += st->id_old + strlen(st->target);
		mount_stat_free(st);
	}
	return 0;
}

static void drain(struct mount_notify *notify, struct handled *h)
{
	int r;

	do {
		r = mount_notify_read_events(notify, handle_event, h);
		if (r < 0)
			die("read events: %s", strerror(-r));
	} while (r > 0);
}

/* M mounts made, then their events read and handled in one go: us per event. */
static void bench_events_batch(struct mount_notify *notify, const char *dir, int m,
			       struct sample *s, int rep)
{
	struct handled h = { 0 };
	struct timer t;

	make_binds(dir, m);
	timer_start(&t);
	drain(notify, &h);
	timer_add(&t, s, rep, 1e-3 / m);
	if (h.found != (size_t)m)
		die("batch: %zu of %d mounts found by their events", h.found, m);
	for (int i = 0; i < m; i++)
		umount_nr(dir, i);
	drain(notify, &h); /* the DETACH events, not timed */
}

/* One mount, then its event read and handled, M times; only reading and handling is timed. */
static void bench_events_single(struct mount_notify *notify, const char *dir, int m,
				struct sample *s, int rep)
{
	struct handled h = { 0 };

	xmkdir(dir);
	for (int i = 0; i < m; i++) {
		struct timer t;
		int r;

		bind_mount_nr(dir, i);
		timer_start(&t);
		r = mount_notify_read_events(notify, handle_event, &h);
		timer_add(&t, s, rep, 1e-3 / m);
		if (r != 1)
			die("single: read %d events, wanted 1", r);
	}
	if (h.found != (size_t)m)
		die("single: %zu of %d mounts found by their events", h.found, m);
	for (int i = 0; i < m; i++)
		umount_nr(dir, i);
	drain(notify, &h);
}

struct resync {
	size_t added, removed;
	uint64_t sum;
};

static int resync_cb(uint64_t id, bool added, void *userdata)
{
	struct resync *rs = userdata;
	struct mount_stat *st;

	if (!added) {
		rs->removed++;
		return 0;
	}
	if (mount_stat_by_id(id, &st) == 0) {
		rs->added++;
		rs->sum += st->id_old + strlen(st->target);
		mount_stat_free(st);
	}
	return 0;
}

/* Replaces churn mounts of big (unmount churn, mount churn new ones), then times a resync
 * by ID against the listing *prev, which it replaces. */
static void bench_resync_ids(const char *big, int n, int churn, int rep, uint64_t **prev,
			     size_t *n_prev, struct sample *s)
{
	struct resync rs = { 0 };
	uint64_t *ids;
	struct timer t;
	size_t n_ids;
	int r;

	for (int i = 0; i < churn; i++) {
		umount_nr(big, rep * churn + i);
		bind_mount_nr(big, n + rep * churn + i);
	}
	timer_start(&t);
	r = mount_list(MOUNT_LIST_ROOT, &ids, &n_ids);
	if (r < 0)
		die("mount_list: %s", strerror(-r));
	r = mount_ids_diff(*prev, *n_prev, ids, n_ids, resync_cb, &rs);
	timer_add(&t, s, rep, 1e-6);
	if (r < 0 || rs.added != (size_t)churn || rs.removed != (size_t)churn)
		die("resync: %d: %zu added, %zu removed, wanted %d each", r, rs.added, rs.removed,
		    churn);
	free(*prev);
	*prev = ids;
	*n_prev = n_ids;
}

static void bench_list_below(const char *prefix, size_t want, struct sample *s, int rep)
{
	struct mount_stat **sts;
	struct timer t;
	size_t n;
	int r;

	timer_start(&t);
	r = mount_list_below(prefix, &sts, &n);
	timer_add(&t, s, rep, 1e-6);
	if (r < 0)
		die("mount_list_below %s: %s", prefix, strerror(-r));
	if (n != want)
		die("mount_list_below %s: %zu mounts, wanted %zu", prefix, n, want);
	mount_stat_array_free(sts, n);
}

static void bench_list_ids(size_t min, struct sample *s, int rep)
{
	uint64_t *ids;
	struct timer t;
	size_t n;
	int r;

	timer_start(&t);
	r = mount_list(MOUNT_LIST_ROOT, &ids, &n);
	timer_add(&t, s, rep, 1e-6);
	if (r < 0 || n < min)
		die("mount_list: %d, %zu ids", r, n);
	free(ids);
}

static int count_mountinfo(void)
{
	struct libmnt_table *tb = mnt_new_table();
	int n;

	if (!tb || mnt_table_parse_file(tb, "/proc/self/mountinfo") < 0)
		die("libmount cannot parse /proc/self/mountinfo");
	n = mnt_table_get_nents(tb);
	mnt_unref_table(tb);
	return n;
}

static void bench_mountinfo(int min, struct sample *s, int rep)
{
	struct libmnt_table *tb;
	struct timer t;
	int r;

	timer_start(&t);
	tb = mnt_new_table();
	r = tb ? mnt_table_parse_file(tb, "/proc/self/mountinfo") : -ENOMEM;
	timer_add(&t, s, rep, 1e-6);
	if (r < 0 || mnt_table_get_nents(tb) < min)
		die("libmount read %d entries of mountinfo, wanted >= %d",
		    tb ? mnt_table_get_nents(tb) : 0, min);
	mnt_unref_table(tb);
}

static int int_arg(const char *s, int lo, int hi, const char *name)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*end || v < lo || v > hi)
		die("%s must be %d..%d", name, lo, hi);
	return (int)v;
}

int main(int argc, char **argv)
{
	int n = 10000, m = 1000, small = 100, churn = 100, reps = 5;
	static struct sample batch, single, ids_resync, big_s, small_s, smallmp_s, list_s, mi_s;
	char big[PATH_MAX + 8], smalldir[PATH_MAX + 8], smallmp[PATH_MAX + 8], evdir[PATH_MAX + 8];
	char src[PATH_MAX + 8];
	const char *tmp = getenv("TMPDIR");
	struct mount_notify *notify;
	uint64_t *prev = NULL, t0;
	size_t n_prev = 0;
	char reason[256], what[200];
	int r, total;

	bench_init("mount-notify-bench", NULL);
	for (int i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			die("usage: %s [--n N] [--events M] [--small S] [--churn C] [--reps R]",
			    argv[0]);
		if (!strcmp(argv[i], "--n"))
			n = int_arg(argv[++i], 1, 80000, "--n");
		else if (!strcmp(argv[i], "--events"))
			m = int_arg(argv[++i], 1, 8000, "--events");
		else if (!strcmp(argv[i], "--small"))
			small = int_arg(argv[++i], 1, 10000, "--small");
		else if (!strcmp(argv[i], "--churn"))
			churn = int_arg(argv[++i], 1, 1000, "--churn");
		else if (!strcmp(argv[i], "--reps"))
			reps = int_arg(argv[++i], 1, MAX_REPS, "--reps");
		else
			die("unknown argument %s", argv[i]);
	}
	if (churn * reps > n)
		die("--churn times --reps must not exceed --n");
	if (geteuid() != 0)
		die("needs root (it mounts, in a private mount namespace)");
	if (!mount_notify_probe(reason, sizeof(reason))) {
		printf("mount-notify-bench: %s: nothing to measure\n", reason);
		return 77;
	}
	printf("%s\n", reason);
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		die("private mount namespace: %s", strerror(errno));
	snprintf(work, sizeof(work), "%s/mount-notify-bench.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(work))
		die("mkdtemp: %s", strerror(errno));
	if (mount("tmpfs", work, "tmpfs", 0, "size=64m") < 0)
		die("tmpfs on %s: %s", work, strerror(errno));
	snprintf(src, sizeof(src), "%s/src", work);
	snprintf(big, sizeof(big), "%s/big", work);
	snprintf(smalldir, sizeof(smalldir), "%s/small", work);
	snprintf(smallmp, sizeof(smallmp), "%s/smallmp", work);
	snprintf(evdir, sizeof(evdir), "%s/ev", work);
	xmkdir(src);

	t0 = bench_clock_ns(CLOCK_MONOTONIC);
	make_binds(big, n);
	make_binds(smalldir, small);
	xmkdir(smallmp);
	if (mount(smallmp, smallmp, NULL, MS_BIND, NULL) < 0)
		die("bind %s onto itself: %s", smallmp, strerror(errno));
	make_binds(smallmp, small);
	total = count_mountinfo();
	printf("setup: %d bind mounts in %.0f ms; %d mounts in the namespace\n", n + 2 * small + 1,
	       (double)(bench_clock_ns(CLOCK_MONOTONIC) - t0) / 1e6, total);

	r = mount_notify_new(-1, &notify);
	if (r < 0)
		die("mount_notify_new: %s", strerror(-r));
	for (int i = 0; i < reps; i++) {
		bench_events_batch(notify, evdir, m, &batch, i);
		bench_events_single(notify, evdir, m, &single, i);
	}
	mount_notify_free(notify);

	r = mount_list(MOUNT_LIST_ROOT, &prev, &n_prev);
	if (r < 0)
		die("mount_list: %s", strerror(-r));
	for (int i = 0; i < reps; i++) {
		bench_resync_ids(big, n, churn, i, &prev, &n_prev, &ids_resync);
		bench_list_below(big, (size_t)n, &big_s, i);
		bench_list_below(smalldir, (size_t)small, &small_s, i);
		bench_list_below(smallmp, (size_t)small + 1, &smallmp_s, i);
		bench_list_ids((size_t)total, &list_s, i);
		bench_mountinfo(total, &mi_s, i);
	}
	free(prev);

	snprintf(what, sizeof(what),
		 "CPU per ATTACH event (read + statmount), %d queued, %d mounts", m, total);
	figure("event.batch", &batch, reps, "us", what);
	snprintf(what, sizeof(what), "CPU per ATTACH event, one read per event, %d mounts", total);
	figure("event.single", &single, reps, "us", what);
	snprintf(what, sizeof(what),
		 "resync by ID: listmount of %d mounts + diff + statmount of %d new ones", total,
		 churn);
	figure("resync.ids", &ids_resync, reps, "ms", what);
	snprintf(what, sizeof(what), "listmount + statmount below a prefix holding %d of %d", n,
		 total);
	figure("resync.big", &big_s, reps, "ms", what);
	snprintf(what, sizeof(what), "listmount + statmount below a prefix holding %d of %d", small,
		 total);
	figure("resync.small", &small_s, reps, "ms", what);
	snprintf(what, sizeof(what),
		 "the same, the prefix a mount point: its subtree of %d + 1 mounts only", small);
	figure("resync.small.mp", &smallmp_s, reps, "ms", what);
	snprintf(what, sizeof(what), "listmount of the whole namespace (%d IDs)", total);
	figure("list.ids", &list_s, reps, "ms", what);
	snprintf(what, sizeof(what), "libmount mnt_table_parse_file of mountinfo (%d entries)",
		 total);
	figure("mountinfo", &mi_s, reps, "ms", what);
	return 0;
}
