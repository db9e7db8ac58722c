/* test-csi-requests.c - the reconciler's asynchronous request API (reconciler_submit), what a
 * CSI volume call is answered through: a real reconciler on a temp root, real bind mounts, in
 * a private mount namespace (root only; skipped otherwise).
 *
 * The plugin is the tests' fake (tests/lib/fake-plugin.h): its set-up is a real bind mount of
 * the volume's source directory, but it first waits until the test opens its gate.  That holds
 * an operation in flight for as long as a case needs, which no real mount does on demand: a
 * stand-in for a slow mount (an NFS server that is slow to answer, a long mkfs).
 *
 * Covers: the outcome told once, after the mount is there, on the submitting thread before
 * reconciler_submit returns when the reconciler sleeps (reconciler-caller.c); a request whose
 * operation hangs on the submitting thread: told -ETIMEDOUT by the reconciler's timer while
 * its change stays in force (a repeat then finds it done), with the reconciler, another
 * volume's call and a status request going on meanwhile; two calls racing on one target;
 * calls paced as kubelet makes them waking none of the reconciler's threads; the call's log
 * line written after its answer and not lost; and requests still in flight when the
 * reconciler is freed told -ESHUTDOWN. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake-plugin.h"
#include "fixture-case.h"
#include "macro.h"
#include "mount-util.h"
#include "path-util.h"
#include "plugin.h"
#include "reconciler.h"
#include "testlib.h"

static const struct volume_plugin *const fake_table[] = { &fake_plugin };

/* --- outcomes, as the callback is told them --- */

struct outcome {
	pthread_mutex_t lock;
	int calls;	  /* how often the callback ran: exactly once is right */
	int r;		  /* its r */
	int error;	  /* res->error */
	pthread_t thread; /* where it ran */
};

static void outcome_init(struct outcome *o)
{
	memset(o, 0, sizeof(*o));
	pthread_mutex_init(&o->lock, NULL);
}

static void on_done(int r, struct volume_request_result *res, void *userdata)
{
	struct outcome *o = userdata;

	pthread_mutex_lock(&o->lock);
	o->calls++;
	o->r = r;
	o->error = res->error;
	o->thread = pthread_self();
	pthread_mutex_unlock(&o->lock);
}

static bool outcome_told(void *arg)
{
	struct outcome *o = arg;
	int n;

	pthread_mutex_lock(&o->lock);
	n = o->calls;
	pthread_mutex_unlock(&o->lock);
	return n > 0;
}

/* --- fixture --- */

struct fix {
	char *dir;
	char root[512], state[512], kubelet[512], src[600], target[700];
	struct reconciler *r;
};

static int scaled(int ms)
{
	const char *s = getenv("TEST_TIME_SCALE");
	int k = s ? atoi(s) : 1;

	return ms * (k > 0 ? k : 1);
}

static bool is_ready(void *r)
{
	return reconciler_is_ready(r);
}

static bool is_mountpoint(void *path)
{
	return test_is_mountpoint(path);
}

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	struct error_info err = { 0 };
	char parent[700];

	test_enter_private_mountns();
	plugin_registry_set(fake_table, ARRAY_SIZE(fake_table));
	fake_reset();
	f->dir = test_mkdtemp("csireq");
	snprintf(f->root, sizeof(f->root), "%s/root", f->dir);
	snprintf(f->state, sizeof(f->state), "%s/state", f->dir);
	snprintf(f->kubelet, sizeof(f->kubelet), "%s/kubelet", f->dir);
	snprintf(f->src, sizeof(f->src), "%s/src", f->dir);
	snprintf(parent, sizeof(parent), "%s/pods/uid-1/volumes/kubernetes.io~csi/pv-1",
		 f->kubelet);
	snprintf(f->target, sizeof(f->target), "%s/mount", parent);
	mkdir(f->root, 0755);
	mkdir(f->state, 0700);
	mkdir(f->kubelet, 0755);
	mkdir(f->src, 0755);
	assert_int_equal(path_mkdir_p(parent, 0750), 0);
	assert_int_equal(reconciler_new(
				 &(struct reconciler_config){
					 .root_dir = f->root,
					 .state_dir = f->state,
					 .workers = 2,
					 .backoff_initial_ms = 100,
					 .backoff_max_ms = 60000,
					 .resync_ms = 600000,
					 .refresh_min_interval_ms = 10,
					 .kubelet_root = f->kubelet,
				 },
				 &f->r, &err),
			 0);
	assert_int_equal(reconciler_start(f->r, &err), 0);
	assert_true(test_wait_until(is_ready, f->r, scaled(10000)));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	fake_gate_set(true); /* a case that failed may have left set-ups waiting */
	reconciler_free(f->r);
	umount2(f->target, MNT_DETACH);
	test_rm_rf(f->dir);
	free(f->dir);
	free(f);
	plugin_registry_set(NULL, 0);
	return 0;
}

static struct volume_request *publish_request(struct fix *f)
{
	struct volume_request *req = volume_request_new(VOLUME_REQUEST_PUBLISH);

	assert_non_null(req);
	req->volume_id = strdup("vol-1");
	req->path = strdup(f->target);
	req->spec = volume_spec_new("fake");
	assert_non_null(req->spec);
	assert_int_equal(volume_spec_set(req->spec, "path", f->src), 0);
	req->plugin = &fake_plugin;
	req->fingerprint = strdup("mode=1;");
	return req;
}

/* --- cases --- */

/* A call made while the reconciler sleeps runs to completion on its own thread: the outcome
 * is told once, there, before reconciler_submit returns, with the mount in place. */
static void test_submit_answered_on_calling_thread(void **state)
{
	struct fix *f = *state;
	struct outcome o;

	outcome_init(&o);
	assert_int_equal(reconciler_submit(f->r, publish_request(f), scaled(10000), on_done, &o),
			 0);
	pthread_mutex_lock(&o.lock);
	assert_int_equal(o.calls, 1);
	assert_int_equal(o.r, 0);
	assert_int_equal(o.error, 0);
	assert_true(pthread_equal(o.thread, pthread_self()));
	pthread_mutex_unlock(&o.lock);
	assert_true(test_is_mountpoint(f->target));
}

/* Context switches so far of this process's threads named name ("reconciler", "worker"). */
static long long thread_switches(const char *name)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	long long n = 0;

	assert_non_null(d);
	while ((e = readdir(d))) {
		char path[300], line[128], comm[64] = "";
		FILE *fp;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		if (!(fp = fopen(path, "re")))
			continue; /* the thread is gone */
		if (!fgets(comm, sizeof(comm), fp))
			comm[0] = '\0';
		fclose(fp);
		comm[strcspn(comm, "\n")] = '\0';
		if (strcmp(comm, name) != 0)
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
		if (!(fp = fopen(path, "re")))
			continue;
		while (fgets(line, sizeof(line), fp)) {
			long long k;

			if (sscanf(line, "voluntary_ctxt_switches: %lld", &k) == 1 ||
			    sscanf(line, "nonvoluntary_ctxt_switches: %lld", &k) == 1)
				n += k;
		}
		fclose(fp);
	}
	closedir(d);
	return n;
}

static long long sleeping_threads_switches(void)
{
	return thread_switches("reconciler") + thread_switches("worker");
}

/* Calls as kubelet paces them, each finding the reconciler asleep, wake none of its threads:
 * the call runs on its own thread, and the mount event its bind makes is read there too.
 * (The loop's epoll set held the event queue's fd with an empty mask during the call; the
 * kernel still woke the loop for each event, to find nothing to report.)  A few wake-ups are
 * allowed for the loop's own timers. */
#define PACED_CALLS 20

static void test_paced_calls_wake_no_other_thread(void **state)
{
	struct fix *f = *state;
	long long woken = 0;

	for (int i = 0; i < PACED_CALLS; i++) {
		struct volume_request *req = i % 2 ? volume_request_new(VOLUME_REQUEST_UNPUBLISH)
						   : publish_request(f);
		struct outcome o;
		long long before;

		if (i % 2) {
			assert_non_null(req);
			req->volume_id = strdup("vol-1");
			req->path = strdup(f->target);
		}
		usleep(5000); /* idle, as between kubelet's calls */
		outcome_init(&o);
		before = sleeping_threads_switches();
		assert_int_equal(reconciler_submit(f->r, req, scaled(10000), on_done, &o), 0);
		woken += sleeping_threads_switches() - before;
		assert_int_equal(o.calls, 1);
		assert_int_equal(o.r, 0);
		assert_int_equal(o.error, 0);
		assert_int_equal(test_is_mountpoint(f->target), i % 2 == 0);
	}
	print_message("%d paced calls woke the reconciler and workers %lld times\n", PACED_CALLS,
		      woken);
	assert_true(woken <= PACED_CALLS / 5);
}

/* The call's log line ("volume mounted") goes out after its answer, and is not lost: the
 * answer is told while stderr does not have it yet, and stderr has it when the call returns.
 * stderr is a file here, as it is a pipe to the container runtime or journald on a node. */
struct log_outcome {
	struct outcome o;
	const char *log_path;
	bool line_before_answer;
};

static bool log_has_line(const char *path)
{
	char *text = test_read_file(path);
	bool has = text && strstr(text, "msg=\"volume mounted\"");

	free(text);
	return has;
}

static void on_done_check_log(int r, struct volume_request_result *res, void *userdata)
{
	struct log_outcome *lo = userdata;

	lo->line_before_answer = log_has_line(lo->log_path);
	on_done(r, res, &lo->o);
}

static void test_call_logs_after_its_answer(void **state)
{
	struct fix *f = *state;
	struct log_outcome lo = { 0 };
	char log_path[600];
	int saved = dup(STDERR_FILENO), fd, r;

	snprintf(log_path, sizeof(log_path), "%s/stderr", f->dir);
	fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	assert_true(fd >= 0 && saved >= 0);
	assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
	close(fd);
	outcome_init(&lo.o);
	lo.log_path = log_path;
	r = reconciler_submit(f->r, publish_request(f), scaled(10000), on_done_check_log, &lo);
	/* stderr back before any check: a failed one must not leave it in the case's dir. */
	assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
	close(saved);
	assert_int_equal(r, 0);
	assert_int_equal(lo.o.calls, 1);
	assert_int_equal(lo.o.error, 0);
	assert_true(pthread_equal(lo.o.thread, pthread_self())); /* run on this thread */
	assert_false(lo.line_before_answer);
	assert_true(log_has_line(log_path));
}

/* A call on a thread of its own, as a CSI server's pool thread makes it. */
struct call {
	struct fix *f;
	struct volume_request *req;
	long long timeout_ms;
	struct outcome *o;
	pthread_t thread;
};

static void *call_main(void *arg)
{
	struct call *c = arg;

	assert_int_equal(reconciler_submit(c->f->r, c->req, c->timeout_ms, on_done, c->o), 0);
	return NULL;
}

static void call_start(struct call *c, struct fix *f, struct volume_request *req,
		       long long timeout_ms, struct outcome *o)
{
	*c = (struct call){ .f = f, .req = req, .timeout_ms = timeout_ms, .o = o };
	assert_int_equal(pthread_create(&c->thread, NULL, call_main, c), 0);
}

/* A publish of another volume at another target of the fixture's pod. */
static struct volume_request *other_publish_request(struct fix *f, char *target, size_t size)
{
	struct volume_request *req = publish_request(f);
	char parent[700];

	snprintf(parent, sizeof(parent), "%s/pods/uid-2/volumes/kubernetes.io~csi/pv-2",
		 f->kubelet);
	assert_int_equal(path_mkdir_p(parent, 0750), 0);
	snprintf(target, size, "%s/mount", parent);
	free(req->volume_id);
	free(req->path);
	req->volume_id = strdup("vol-2");
	req->path = strdup(target);
	return req;
}

/* Whether two set-ups wait at the fake's gate. */
static bool two_at_gate(void *arg)
{
	unsigned n;

	pthread_mutex_lock(&fake.lock);
	n = fake.gate_waiting;
	pthread_mutex_unlock(&fake.lock);
	return n >= 2;
}

static bool status_answered(void *arg)
{
	struct fix *f = arg;
	struct volume_request_result res = { 0 };
	int k = reconciler_request(f->r, volume_request_new(VOLUME_REQUEST_STATUS), scaled(5000),
				   &res);

	free(res.status_json);
	return k == 0 && res.error == 0;
}

/* A set-up held past the request's time (a hung mount), on the thread that made the call: the
 * caller is told -ETIMEDOUT (ABORTED for CSI) by the reconciler's timer, with the operation
 * still running; meanwhile the reconciler answers a status request, and another volume's
 * publish is taken and starts its own set-up (the gate holds every set-up, so it is seen
 * waiting there: not behind the first).  The change stays, the mount follows once the set-up goes
 * on, and a repeat is then answered at once, OK. */
static void test_submit_times_out_change_stays(void **state)
{
	struct fix *f = *state;
	struct outcome o, other, again;
	struct call c, d;
	char other_target[700];

	outcome_init(&o);
	outcome_init(&other);
	outcome_init(&again);
	fake_gate_set(false);
	call_start(&c, f, publish_request(f), 200, &o);
	assert_true(test_wait_until(fake_gate_has_waiter, NULL, scaled(10000)));
	assert_true(test_wait_until(outcome_told, &o, scaled(10000)));
	pthread_mutex_lock(&o.lock);
	assert_int_equal(o.r, -ETIMEDOUT);
	assert_int_equal(o.calls, 1);
	assert_false(pthread_equal(o.thread, c.thread)); /* the reconciler's timer told it */
	pthread_mutex_unlock(&o.lock);
	assert_false(test_is_mountpoint(f->target));
	/* The hung set-up holds its own call only. */
	assert_true(status_answered(f));
	call_start(&d, f, other_publish_request(f, other_target, sizeof(other_target)),
		   scaled(10000), &other);
	assert_true(test_wait_until(two_at_gate, NULL, scaled(10000)));

	fake_gate_set(true);
	assert_true(test_wait_until(is_mountpoint, f->target, scaled(10000)));
	pthread_join(c.thread, NULL);
	pthread_join(d.thread, NULL);
	assert_true(test_wait_until(outcome_told, &other, scaled(10000)));
	pthread_mutex_lock(&other.lock);
	assert_int_equal(other.r, 0);
	assert_int_equal(other.error, 0);
	pthread_mutex_unlock(&other.lock);
	assert_true(test_is_mountpoint(other_target));
	assert_int_equal(reconciler_submit(f->r, publish_request(f), scaled(10000), on_done,
					   &again),
			 0);
	assert_true(test_wait_until(outcome_told, &again, scaled(10000)));
	pthread_mutex_lock(&again.lock);
	assert_int_equal(again.r, 0);
	assert_int_equal(again.error, 0);
	pthread_mutex_unlock(&again.lock);
	/* Told once: the completion of the first request, which timed out, told nobody. */
	pthread_mutex_lock(&o.lock);
	assert_int_equal(o.calls, 1);
	pthread_mutex_unlock(&o.lock);
	umount2(other_target, MNT_DETACH);
}

/* Two publishes of one volume at one target, racing: one set-up runs, both are told OK once
 * (the second joins the first, on whichever thread), and the target holds one mount. */
static void test_two_calls_race_on_one_target(void **state)
{
	struct fix *f = *state;
	struct outcome a, b;
	struct call ca, cb;

	outcome_init(&a);
	outcome_init(&b);
	fake_gate_set(false);
	call_start(&ca, f, publish_request(f), scaled(10000), &a);
	call_start(&cb, f, publish_request(f), scaled(10000), &b);
	assert_true(test_wait_until(fake_gate_has_waiter, NULL, scaled(10000)));
	fake_gate_set(true);
	pthread_join(ca.thread, NULL);
	pthread_join(cb.thread, NULL);
	assert_true(test_wait_until(outcome_told, &a, scaled(10000)));
	assert_true(test_wait_until(outcome_told, &b, scaled(10000)));
	pthread_mutex_lock(&a.lock);
	pthread_mutex_lock(&b.lock);
	assert_int_equal(a.calls, 1);
	assert_int_equal(b.calls, 1);
	assert_int_equal(a.r, 0);
	assert_int_equal(b.r, 0);
	assert_int_equal(a.error, 0);
	assert_int_equal(b.error, 0);
	pthread_mutex_unlock(&b.lock);
	pthread_mutex_unlock(&a.lock);
	assert_int_equal(fake_count("set_up.done", f->src), 1);
	assert_int_equal(test_count_mounts_under(f->target), 1);
}

/* The reconciler stops with a request in flight: it is told -ESHUTDOWN, once; nothing leaks
 * (ASan). */
static void *open_gate_later(void *arg)
{
	usleep(300 * 1000);
	fake_gate_set(true);
	return NULL;
}

static void test_submit_in_flight_at_stop(void **state)
{
	struct fix *f = *state;
	struct outcome o;
	struct call c;
	pthread_t t;

	outcome_init(&o);
	fake_gate_set(false);
	call_start(&c, f, publish_request(f), scaled(60000), &o);
	assert_true(test_wait_until(fake_gate_has_waiter, NULL, scaled(10000)));
	/* The stop waits for the operation in flight, on the calling thread or a worker: the
	 * gate opens while it does. */
	assert_int_equal(pthread_create(&t, NULL, open_gate_later, NULL), 0);
	f->r = reconciler_free(f->r);
	pthread_join(t, NULL);
	pthread_join(c.thread, NULL);
	pthread_mutex_lock(&o.lock);
	assert_int_equal(o.calls, 1);
	assert_int_equal(o.r, 0);
	/* Mounted before the stop answered what was left, or told to retry. */
	assert_true(o.error == 0 || o.error == -ESHUTDOWN);
	pthread_mutex_unlock(&o.lock);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		FIXTURE_CASE(test_submit_answered_on_calling_thread),
		FIXTURE_CASE(test_submit_times_out_change_stays),
		FIXTURE_CASE(test_two_calls_race_on_one_target),
		FIXTURE_CASE(test_paced_calls_wake_no_other_thread),
		FIXTURE_CASE(test_call_logs_after_its_answer),
		FIXTURE_CASE(test_submit_in_flight_at_stop),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
