/* test-csi-requests.c - the reconciler's asynchronous request API (reconciler_submit), what a
 * CSI volume call is answered through: a real reconciler on a temp root, real bind mounts, in
 * a private mount namespace (root only; skipped otherwise).
 *
 * The plugin is the tests' fake (tests/lib/fake-plugin.h): its set-up is a real bind mount of
 * the volume's source directory, but it first waits until the test opens its gate.  That holds
 * an operation in flight for as long as a case needs, which no real mount does on demand: a
 * stand-in for a slow mount (an NFS server that is slow to answer, a long mkfs).
 *
 * Covers: the outcome told once, on the reconciler thread, with nobody waiting; a request
 * whose time runs out told -ETIMEDOUT while its change stays in force (a repeat then finds it
 * done); and requests still in flight when the reconciler is freed told -ESHUTDOWN. */
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

/* The outcome is told once, on the reconciler's thread, after the mount is there. */
static void test_submit_answered_on_reconciler_thread(void **state)
{
	struct fix *f = *state;
	struct outcome o;

	outcome_init(&o);
	assert_int_equal(reconciler_submit(f->r, publish_request(f), scaled(10000), on_done, &o),
			 0);
	assert_true(test_wait_until(outcome_told, &o, scaled(10000)));
	pthread_mutex_lock(&o.lock);
	assert_int_equal(o.calls, 1);
	assert_int_equal(o.r, 0);
	assert_int_equal(o.error, 0);
	assert_false(pthread_equal(o.thread, pthread_self()));
	pthread_mutex_unlock(&o.lock);
	assert_true(test_is_mountpoint(f->target));
}

/* A set-up held past the request's time: the caller is told -ETIMEDOUT (ABORTED for CSI) by
 * the reconciler's timer, with the operation still running; the change stays, the mount
 * follows once the set-up goes on, and a repeat is then answered at once, OK. */
static void test_submit_times_out_change_stays(void **state)
{
	struct fix *f = *state;
	struct outcome o, again;

	outcome_init(&o);
	outcome_init(&again);
	fake_gate_set(false);
	assert_int_equal(reconciler_submit(f->r, publish_request(f), 200, on_done, &o), 0);
	assert_true(test_wait_until(fake_gate_has_waiter, NULL, scaled(10000)));
	assert_true(test_wait_until(outcome_told, &o, scaled(10000)));
	pthread_mutex_lock(&o.lock);
	assert_int_equal(o.r, -ETIMEDOUT);
	assert_int_equal(o.calls, 1);
	pthread_mutex_unlock(&o.lock);
	assert_false(test_is_mountpoint(f->target));

	fake_gate_set(true);
	assert_true(test_wait_until(is_mountpoint, f->target, scaled(10000)));
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
	pthread_t t;

	outcome_init(&o);
	fake_gate_set(false);
	assert_int_equal(reconciler_submit(f->r, publish_request(f), scaled(60000), on_done, &o),
			 0);
	assert_true(test_wait_until(fake_gate_has_waiter, NULL, scaled(10000)));
	/* The stop waits for the operation in flight: the gate opens while it does. */
	assert_int_equal(pthread_create(&t, NULL, open_gate_later, NULL), 0);
	f->r = reconciler_free(f->r);
	pthread_join(t, NULL);
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
		FIXTURE_CASE(test_submit_answered_on_reconciler_thread),
		FIXTURE_CASE(test_submit_times_out_change_stays),
		FIXTURE_CASE(test_submit_in_flight_at_stop),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
