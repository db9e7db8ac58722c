/* test-csi-requests.c - the reconciler's asynchronous request API (reconciler_submit), what a
 * CSI volume call is answered through: a real reconciler on a temp root, real bind mounts, in
 * a private mount namespace (root only; skipped otherwise).
 *
 * The plugin is a small one of the test's own ("gate"): its set-up is a real bind mount of
 * the volume's source directory, but it first waits until the test opens a gate.  That holds
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

#include "macro.h"
#include "mount-util.h"
#include "path-util.h"
#include "plugin.h"
#include "reconciler.h"
#include "testlib.h"

/* --- the gate plugin --- */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool open;	  /* set-ups may go on */
	unsigned waiting; /* set-ups waiting at the gate */
} gate = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void gate_set(bool open)
{
	pthread_mutex_lock(&gate.lock);
	gate.open = open;
	pthread_cond_broadcast(&gate.cond);
	pthread_mutex_unlock(&gate.lock);
}

static bool gate_has_waiter(void *arg)
{
	bool r;

	pthread_mutex_lock(&gate.lock);
	r = gate.waiting > 0;
	pthread_mutex_unlock(&gate.lock);
	return r;
}

static bool gate_can_support(const struct volume_spec *spec)
{
	return streq(spec->type, "gate");
}

static int gate_validate(const struct volume_spec *spec, struct error_info *err)
{
	const char *path = volume_spec_get(spec, "path");

	if (!path || path[0] != '/')
		return err_set(err, -EINVAL, "path: must be an absolute path");
	return 0;
}

static char *gate_get_volume_name(const struct volume_spec *spec)
{
	return strdup_printf("gate:%s", volume_spec_get(spec, "path"));
}

static int gate_set_up_at(const struct volume_mounter *m, const struct mount_target *target,
			  struct error_info *err)
{
	_cleanup_close_ int fd = -1;

	pthread_mutex_lock(&gate.lock);
	gate.waiting++;
	pthread_cond_broadcast(&gate.cond);
	while (!gate.open)
		pthread_cond_wait(&gate.cond, &gate.lock);
	gate.waiting--;
	pthread_mutex_unlock(&gate.lock);
	fd = open(volume_spec_get(m->spec, "path"), O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return err_set(err, -errno, "source: %s", strerror(errno));
	return mnt_util_bind_at(fd, target->parent_fd, target->name, m->read_only, err);
}

static int gate_tear_down_at(const char *volume_name, const char *pod_uid, const char *target,
			     struct error_info *err)
{
	int r = mnt_util_umount(target, 0, err);

	return r == -EINVAL ? 0 : r;
}

static int gate_check_set_up(const struct volume_mounter *m, const char *target,
			     struct mount_seen *seen, struct error_info *err)
{
	return mnt_util_is_mount_root(target) == 1;
}

static const struct volume_ops gate_ops = {
	.can_support = gate_can_support,
	.validate = gate_validate,
	.get_volume_name = gate_get_volume_name,
	.set_up_at = gate_set_up_at,
	.tear_down_at = gate_tear_down_at,
	.check_set_up = gate_check_set_up,
};

static const struct volume_plugin gate_plugin = {
	.name = "gate",
	.ops = &gate_ops,
};

static const struct volume_plugin *const gate_table[] = { &gate_plugin };

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
	plugin_registry_set(gate_table, ARRAY_SIZE(gate_table));
	gate_set(true);
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

	gate_set(true); /* a case that failed may have left set-ups waiting */
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
	req->spec = volume_spec_new("gate");
	assert_non_null(req->spec);
	assert_int_equal(volume_spec_set(req->spec, "path", f->src), 0);
	req->plugin = &gate_plugin;
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
	gate_set(false);
	assert_int_equal(reconciler_submit(f->r, publish_request(f), 200, on_done, &o), 0);
	assert_true(test_wait_until(gate_has_waiter, NULL, scaled(10000)));
	assert_true(test_wait_until(outcome_told, &o, scaled(10000)));
	pthread_mutex_lock(&o.lock);
	assert_int_equal(o.r, -ETIMEDOUT);
	assert_int_equal(o.calls, 1);
	pthread_mutex_unlock(&o.lock);
	assert_false(test_is_mountpoint(f->target));

	gate_set(true);
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
	gate_set(true);
	return NULL;
}

static void test_submit_in_flight_at_stop(void **state)
{
	struct fix *f = *state;
	struct outcome o;
	pthread_t t;

	outcome_init(&o);
	gate_set(false);
	assert_int_equal(reconciler_submit(f->r, publish_request(f), scaled(60000), on_done, &o),
			 0);
	assert_true(test_wait_until(gate_has_waiter, NULL, scaled(10000)));
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
		cmocka_unit_test_setup_teardown(test_submit_answered_on_reconciler_thread, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_submit_times_out_change_stays, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_submit_in_flight_at_stop, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
