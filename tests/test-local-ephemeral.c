/* test-local-ephemeral.c - CSI inline ephemeral volumes of the local plugin
 * (`csi.storage.k8s.io/ephemeral: "true"`) through a real `volagent run --csi` driven by the
 * independent Python client (tests/csi/csi_client.py), and the same from a pod spec file: a
 * fresh directory per publish below <state-dir>/local-ephemeral, bound into the target, removed
 * with its data at unpublish; adopted by an agent restarted after SIGKILL; a symlink or a bind
 * mount planted inside never makes the removal touch anything outside.  Root, private mount
 * namespace; runs on the build host (a size on ephemeral volumes needs project quotas: see
 * test-quota.c for sizes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "csi-env.h"
#include "testlib.h"

static int setup(void **state)
{
	struct csi_env *e = calloc(1, sizeof(*e));

	csi_env_init(e, fixture_new("ephemeral"));
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct csi_env *e = *state;

	fixture_free(e->f);
	free(e);
	return 0;
}

#define EPHEMERAL_CTX                                                                              \
	"\"volume_capability\": {\"mount\": {}, \"access_mode\": {\"mode\": "                      \
	"\"SINGLE_NODE_WRITER\"}}, \"volume_context\": {\"type\": \"local\", "                     \
	"\"csi.storage.k8s.io/ephemeral\": \"true\", \"csi.storage.k8s.io/pod.name\": \"web-0\", " \
	"\"csi.storage.k8s.io/pod.namespace\": \"default\"}"

static char *publish(struct csi_env *e, const char *vol, const char *target)
{
	char calls[2048];

	snprintf(calls, sizeof(calls),
		 "Node/NodePublishVolume {\"volume_id\": \"%s\", \"target_path\": \"%s\", "
		 "%s}\n",
		 vol, target, EPHEMERAL_CTX);
	return csi_env_call(e, calls);
}

static char *unpublish(struct csi_env *e, const char *vol, const char *target)
{
	char calls[2048];

	snprintf(calls, sizeof(calls),
		 "Node/NodeUnpublishVolume {\"volume_id\": \"%s\", \"target_path\": \"%s\"}\n", vol,
		 target);
	return csi_env_call(e, calls);
}

/* How many directories the ephemeral base holds (-1: no base). */
static int ephemeral_dirs(struct csi_env *e)
{
	char base[700];
	struct dirent *d;
	DIR *dir;
	int n = 0;

	snprintf(base, sizeof(base), "%s/local-ephemeral", e->f->state);
	dir = opendir(base);
	if (!dir)
		return -1;
	while ((d = readdir(dir)))
		if (d->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

/* The one directory in the ephemeral base, into buf (>= 800). */
static const char *ephemeral_dir(struct csi_env *e, char *buf)
{
	char base[700];
	struct dirent *d;
	DIR *dir;

	snprintf(base, sizeof(base), "%s/local-ephemeral", e->f->state);
	dir = opendir(base);
	assert_non_null(dir);
	while ((d = readdir(dir)) && d->d_name[0] == '.')
		;
	assert_non_null(d);
	snprintf(buf, 800, "%s/%s", base, d->d_name);
	closedir(dir);
	return buf;
}

static bool no_ephemeral_dirs(void *e)
{
	return ephemeral_dirs(e) == 0;
}

static void write_in(const char *dir, const char *name, const char *text)
{
	char p[900];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	assert_int_equal(test_write_file(p, text), 0);
}

static bool file_is(const char *dir, const char *name, const char *text)
{
	char p[900], *data;
	bool same;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	data = test_read_file(p);
	same = data && strcmp(data, text) == 0;
	free(data);
	return same;
}

static void test_publish_write_unpublish(void **state)
{
	struct csi_env *e = *state;
	char t1[700], t2[700];
	char *out;

	csi_env_start(e);
	csi_env_target(e, "pod-1", "eph-a", t1);
	csi_env_target(e, "pod-2", "eph-b", t2);
	out = publish(e, "csi-aaa", t1);
	assert_line(out, 0, "OK {}");
	free(out);
	out = publish(e, "csi-aaa", t1); /* again: the same */
	assert_line(out, 0, "OK {}");
	free(out);
	out = publish(e, "csi-bbb", t2);
	assert_line(out, 0, "OK {}");
	free(out);
	assert_true(test_is_mountpoint(t1));
	assert_true(test_is_mountpoint(t2));
	assert_int_equal(ephemeral_dirs(e), 2);
	write_in(t1, "data", "one");
	assert_false(file_is(t2, "data", "one")); /* a fresh directory each */

	out = unpublish(e, "csi-aaa", t1);
	assert_line(out, 0, "OK {}");
	free(out);
	assert_false(test_is_mountpoint(t1));
	assert_int_equal(ephemeral_dirs(e), 1); /* the data went with it */
	out = unpublish(e, "csi-bbb", t2);
	assert_line(out, 0, "OK {}");
	free(out);
	assert_int_equal(ephemeral_dirs(e), 0);
}

/* Publishes vol at t, writes data in it and waits until the journal has it (CSI entries are
 * saved a moment after the call; a publish lost with them is one kubelet calls again), so
 * that the agent can be killed. */
static void published_with(struct csi_env *e, const char *vol, const char *t, const char *data)
{
	char j[700];
	char *out = publish(e, vol, t);

	assert_line(out, 0, "OK {}");
	free(out);
	write_in(t, "data", data);
	snprintf(j, sizeof(j), "%s/journal.json", e->f->state);
	assert_true(test_wait_file_text(j, vol, true, 10000));
}

static void test_sigkill_then_restart(void **state)
{
	struct csi_env *e = *state;
	char t[700];
	char *out;

	csi_env_start(e);
	csi_env_target(e, "pod-k", "eph-k", t);
	published_with(e, "csi-kkk", t, "kept");
	fixture_stop(e->f, SIGKILL);
	csi_env_start(e);
	/* Adopted: still the same mount and data. */
	assert_true(test_is_mountpoint(t));
	assert_true(file_is(t, "data", "kept"));
	assert_int_equal(ephemeral_dirs(e), 1);
	out = unpublish(e, "csi-kkk", t);
	assert_line(out, 0, "OK {}");
	free(out);
	assert_false(test_is_mountpoint(t));
	assert_int_equal(ephemeral_dirs(e), 0);
}

static void test_planted_link_and_mount(void **state)
{
	struct csi_env *e = *state;
	char t[700], outside[700], outside2[700], p[900];
	char *out;

	snprintf(outside, sizeof(outside), "%s/outside", e->f->dir);
	snprintf(outside2, sizeof(outside2), "%s/outside2", e->f->dir);
	mkdir(outside, 0755);
	mkdir(outside2, 0755);
	write_in(outside, "precious", "a");
	write_in(outside2, "precious", "b");
	csi_env_start(e);
	csi_env_target(e, "pod-p", "eph-p", t);
	out = publish(e, "csi-ppp", t);
	assert_line(out, 0, "OK {}");
	free(out);
	/* Inside the volume: a link to a directory outside, a link to a file outside, and a
	 * directory outside bound onto a subdirectory. */
	snprintf(p, sizeof(p), "%s/link", t);
	assert_int_equal(symlink(outside, p), 0);
	snprintf(p, sizeof(p), "%s/filelink", t);
	snprintf(outside2 + strlen(outside2), 40, "/precious");
	assert_int_equal(symlink(outside2, p), 0);
	outside2[strlen(outside2) - strlen("/precious")] = '\0';
	{
		char sub[900], mnt[900], dir[800];

		snprintf(sub, sizeof(sub), "%s/sub", t);
		assert_int_equal(mkdir(sub, 0755), 0);
		snprintf(mnt, sizeof(mnt), "%s/sub/mnt", t);
		assert_int_equal(mkdir(mnt, 0755), 0);
		/* Mounted in the volume's directory itself (someone on the node), not through
		 * the pod's target. */
		snprintf(mnt, sizeof(mnt), "%s/sub/mnt", ephemeral_dir(e, dir));
		assert_int_equal(mount(outside2, mnt, NULL, MS_BIND, NULL), 0);
	}

	/* The removal leaves the planted mount (and its directories) in place and says so. */
	out = unpublish(e, "csi-ppp", t);
	assert_line(out, 0, "ERR");
	assert_line(out, 0, "another mount; left it in place");
	free(out);
	assert_true(file_is(outside, "precious", "a"));
	assert_true(file_is(outside2, "precious", "b"));
	/* The target stays bound, so the failure stays recorded and is retried. */
	assert_true(test_is_mountpoint(t));

	/* Its planter removes the mount: the next unpublish removes the rest. */
	{
		char dir[800], mnt[900];

		snprintf(mnt, sizeof(mnt), "%s/sub/mnt", ephemeral_dir(e, dir));
		assert_int_equal(umount2(mnt, MNT_DETACH), 0);
	}
	out = unpublish(e, "csi-ppp", t);
	assert_line(out, 0, "OK {}");
	free(out);
	assert_false(test_is_mountpoint(t));
	assert_int_equal(ephemeral_dirs(e), 0);
	assert_true(file_is(outside, "precious", "a"));
	assert_true(file_is(outside2, "precious", "b"));
}

/* Writes spec file file of pod uid with an ephemeral volume "scratch" and waits until its
 * target (into target, >= 512) is mounted. */
static void pod_spec_mounted(struct agent_fixture *f, const char *file, const char *uid,
			     char *target)
{
	char spec[256];

	snprintf(spec, sizeof(spec),
		 "{\"pod\": {\"uid\": \"%s\"}, \"volumes\": [{\"name\": \"scratch\", "
		 "\"local\": {\"ephemeral\": true}}]}",
		 uid);
	assert_int_equal(fixture_write_pod(f, file, spec), 0);
	fixture_pod_dir(f, uid, "scratch", target);
	assert_true(fixture_wait_pod_state(f, target, "mounted", -1, 10000));
}

/* The same from a pod spec file: "local": {"ephemeral": true}. */
static void test_pod_spec(void **state)
{
	struct csi_env *e = *state;
	struct agent_fixture *f = e->f;
	char target[512];

	assert_int_equal(fixture_start(f, NULL), 0);
	pod_spec_mounted(f, "p.json", "pod-e", target);
	assert_int_equal(ephemeral_dirs(e), 1);
	write_in(target, "data", "x");
	assert_int_equal(fixture_remove_pod(f, "p.json"), 0);
	assert_true(fixture_wait_unmounted(target, 10000));
	/* The directory goes right after the unmount, in the same operation. */
	assert_true(test_wait_until(no_ephemeral_dirs, e, 10000));
}

static bool one_ephemeral_dir(void *e)
{
	return ephemeral_dirs(e) == 1;
}

/* An ephemeral directory whose target is gone while the agent was down (its pod removed from
 * the spec dir, its bind unmounted, as a reboot does): no target the agent knows refers to it
 * and nothing mounts it, so the pass that makes the restarted agent ready removes it.  The
 * directory of a CSI volume still published, and its data, stay. */
static void test_orphan_removed_at_restart(void **state)
{
	struct csi_env *e = *state;
	struct agent_fixture *f = e->f;
	char t[700], target[512], dir[800];
	char *out;

	csi_env_start(e);
	csi_env_target(e, "pod-k", "eph-k", t);
	published_with(e, "csi-keep", t, "kept");
	pod_spec_mounted(f, "gone.json", "pod-g", target);
	write_in(target, "data", "orphan");
	assert_int_equal(ephemeral_dirs(e), 2);

	fixture_stop(f, SIGKILL);
	assert_int_equal(fixture_remove_pod(f, "gone.json"), 0);
	assert_int_equal(umount2(target, MNT_DETACH), 0);
	csi_env_start(e);
	assert_true(test_wait_until(one_ephemeral_dir, e, 10000));
	assert_true(fixture_wait_log(f, "removed an ephemeral volume's directory", 10000));
	/* The one left is the published volume's, with its data. */
	assert_true(test_is_mountpoint(t));
	assert_true(file_is(t, "data", "kept"));
	assert_true(file_is(ephemeral_dir(e, dir), "data", "kept"));
	out = unpublish(e, "csi-keep", t);
	assert_line(out, 0, "OK {}");
	free(out);
	assert_int_equal(ephemeral_dirs(e), 0);
}

/* A publish at t (into buf, >= 700) answered OK whose journal record was never saved (the
 * state dir's filesystem full, so every save fails; a SIGKILL in the 200 ms before the save
 * leaves the same), with "unsaved" written in it; then what a reboot leaves (the agent killed,
 * its bind gone, room on the state dir again) and the agent started again and ready.  kubelet
 * still records the target (vol_data.json). */
static void unsaved_publish_then_reboot(struct csi_env *e, char *t)
{
	struct agent_fixture *f = e->f;
	char parent[700], filler[700];
	char *out;

	assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", f->state, NULL }), 0);
	assert_int_equal(mount("tmpfs", f->state, "tmpfs", 0, "size=1m"), 0);
	csi_env_start(e);
	snprintf(filler, sizeof(filler), "%s/filler", f->state);
	assert_int_equal(test_fill_fs(filler), 0);
	csi_env_target(e, "pod-r", "eph-r", t);
	snprintf(parent, sizeof(parent), "%.*s", (int)(strrchr(t, '/') - t), t);
	csi_write_kubelet_record(parent, "csi.volagent.io", "csi-rec");
	out = publish(e, "csi-rec", t);
	assert_line(out, 0, "OK {}");
	free(out);
	assert_true(fixture_wait_log(f, "cannot save the journal", 10000));

	fixture_stop(f, SIGKILL);
	assert_int_equal(unlink(filler), 0);
	write_in(t, "data", "unsaved");
	assert_int_equal(umount2(t, MNT_DETACH), 0);
	csi_env_start(e);
	/* The status answer comes from the reconciler thread after the pass that made the
	 * agent ready, and so after its orphan sweep. */
	assert_true(fixture_wait_ready(f, NULL, 10000));
}

/* Kubelet's unpublish of t removes the ephemeral directory; then the agent stops cleanly. */
static void unpublish_removes_dir_then_stop(struct csi_env *e, const char *t)
{
	char *out = unpublish(e, "csi-rec", t);

	assert_line(out, 0, "OK {}");
	free(out);
	assert_int_equal(ephemeral_dirs(e), 0);
	assert_int_equal(fixture_stop(e->f, SIGTERM), 0);
	assert_int_equal(umount2(e->f->state, 0), 0);
}

/* The agent lost its record of a publish (unsaved_publish_then_reboot): kubelet's record keeps
 * the directory and its data from the orphan sweep; kubelet's next publish finds the data, its
 * unpublish removes the directory. */
static void test_unrecorded_publish_kept_by_kubelet_record(void **state)
{
	struct csi_env *e = *state;
	struct agent_fixture *f = e->f;
	char t[700];
	char *out;

	unsaved_publish_then_reboot(e, t);
	assert_int_equal(ephemeral_dirs(e), 1);
	assert_int_equal(fixture_log_count(f, "removed an ephemeral volume's directory"), 0);

	out = publish(e, "csi-rec", t);
	assert_line(out, 0, "OK {}");
	free(out);
	assert_true(file_is(t, "data", "unsaved"));
	unpublish_removes_dir_then_stop(e, t);
}

/* The agent lost its record of a publish (unsaved_publish_then_reboot) and the pod went while
 * it was down: kubelet's unpublish that follows removes the directory and its data at once,
 * not only at the agent's next start (issue 43). */
static void test_unpublish_after_lost_record_removes_dir(void **state)
{
	struct csi_env *e = *state;
	char t[700];

	unsaved_publish_then_reboot(e, t);
	assert_int_equal(ephemeral_dirs(e), 1);
	unpublish_removes_dir_then_stop(e, t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_publish_write_unpublish, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sigkill_then_restart, setup, teardown),
		cmocka_unit_test_setup_teardown(test_planted_link_and_mount, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pod_spec, setup, teardown),
		cmocka_unit_test_setup_teardown(test_orphan_removed_at_restart, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unrecorded_publish_kept_by_kubelet_record,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_unpublish_after_lost_record_removes_dir, setup,
						teardown),
	};

	if (!csi_env_have_client()) {
		fprintf(stderr, "python3-grpcio or python3-grpc-tools missing: skipped\n");
		return 77;
	}
	test_enter_private_mountns();
	return cmocka_run_group_tests_name("local ephemeral volumes", tests, NULL, NULL);
}
