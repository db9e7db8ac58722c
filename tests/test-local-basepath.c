/* test-local-basepath.c - local directory volumes made per volume below a base path
 * (`basePath`, as OpenEBS Local PV hostpath hands them out), through a real `volagent run
 * --csi` driven by the independent Python client (tests/csi/csi_client.py) and through a pod
 * spec file: the directory <basePath>/<volume id> is made once (mode 0750), survives unstage
 * with its data, is never reached through a symlink planted in its place, and nothing is made
 * when basePath is missing.  Root, private mount namespace; runs on the build host. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "csi-calls.h"
#include "csi-env.h"
#include "file-check.h"
#include "testlib.h"

struct env {
	struct csi_env csi;
	char base[600];
	char outside[600];
};

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));

	csi_env_init(&e->csi, fixture_new("basepath"));
	snprintf(e->base, sizeof(e->base), "%s/base", e->csi.f->dir);
	snprintf(e->outside, sizeof(e->outside), "%s/outside", e->csi.f->dir);
	mkdir(e->base, 0755);
	mkdir(e->outside, 0755);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;

	fixture_free(e->csi.f);
	free(e);
	return 0;
}

/* The calls of a stage and a publish of vol with context ctx (the JSON object's inside) at a
 * new pod's target, into calls (>= 4096 bytes), which it returns; the target in target (>=
 * 700). */
static const char *stage_publish(struct env *e, const char *vol, const char *uid, const char *ctx,
				 char *target, char *calls)
{
	char stg[700];
	const char *cap = "\"volume_capability\": {\"mount\": {}, \"access_mode\": {\"mode\": "
			  "\"SINGLE_NODE_WRITER\"}}";

	csi_env_target(&e->csi, uid, vol, target);
	csi_env_staging(&e->csi, vol, stg);
	snprintf(calls, 4096,
		 "Node/NodeStageVolume {\"volume_id\": \"%s\", \"staging_target_path\": \"%s\", "
		 "%s, \"volume_context\": {%s}}\n"
		 "Node/NodePublishVolume {\"volume_id\": \"%s\", \"staging_target_path\": \"%s\", "
		 "\"target_path\": \"%s\", %s, \"volume_context\": {%s}}\n",
		 vol, stg, cap, ctx, vol, stg, target, cap, ctx);
	return calls;
}

/* The calls of an unpublish of vol at target and an unstage of it, into calls (>= 2048
 * bytes), which it returns. */
static const char *unpublish_unstage(struct env *e, const char *vol, const char *target,
				     char *calls)
{
	char stg[700];

	csi_env_staging(&e->csi, vol, stg);
	calls[0] = '\0';
	csi_calls_unpublish(calls, 2048, vol, target);
	csi_calls_unstage(calls, 2048, vol, stg);
	return calls;
}

static void test_made_once_and_kept(void **state)
{
	struct env *e = *state;
	char ctx[800], target[700], dir[800], file[900], calls[4096];
	struct stat st;

	csi_env_start(&e->csi);
	snprintf(ctx, sizeof(ctx), "\"type\": \"local\", \"basePath\": \"%s\"", e->base);
	CSI_CALL_WANT(&e->csi, stage_publish(e, "pv-1", "pod-1", ctx, target, calls),
		      { 0, "OK {}" }, { 1, "OK {}" });
	snprintf(dir, sizeof(dir), "%s/pv-1", e->base);
	assert_int_equal(lstat(dir, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0750);
	assert_true(test_is_mountpoint(target));
	snprintf(file, sizeof(file), "%s/data", target);
	assert_int_equal(test_write_file(file, "kept"), 0);

	CSI_CALL_WANT(&e->csi, unpublish_unstage(e, "pv-1", target, calls), { 0, "OK {}" },
		      { 1, "OK {}" });
	assert_false(test_is_mountpoint(target));
	/* The directory and its data stay: deleting them is not the node's decision. */
	assert_file_text(dir, "data", "kept");

	/* Used again: the same directory, the data there, made once (its inode unchanged). */
	{
		struct stat again;

		CSI_CALL_WANT(&e->csi, stage_publish(e, "pv-1", "pod-2", ctx, target, calls),
			      { 1, "OK {}" });
		assert_int_equal(lstat(dir, &again), 0);
		assert_int_equal(again.st_ino, st.st_ino);
		assert_file_text(target, "data", "kept");
		free(csi_env_call(&e->csi, unpublish_unstage(e, "pv-1", target, calls)));
	}
}

static void test_symlink_and_missing_base(void **state)
{
	struct env *e = *state;
	char ctx[800], target[700], link[800], probe[800], calls[4096];

	csi_env_start(&e->csi);
	/* A link planted where the volume's directory goes: refused, nothing bound, nothing
	 * made through it. */
	snprintf(link, sizeof(link), "%s/pv-evil", e->base);
	assert_int_equal(symlink(e->outside, link), 0);
	snprintf(ctx, sizeof(ctx), "\"type\": \"local\", \"basePath\": \"%s\"", e->base);
	CSI_CALL_WANT(&e->csi, stage_publish(e, "pv-evil", "pod-e", ctx, target, calls),
		      { 0, "OK {}" }, { 1, "is a symlink, refusing to follow it" });
	assert_false(test_is_mountpoint(target));
	assert_int_equal(test_count_mounts_under(e->csi.f->dir), 0);

	/* A link as basePath itself: refused the same way. */
	snprintf(ctx, sizeof(ctx), "\"type\": \"local\", \"basePath\": \"%s\"", link);
	CSI_CALL_WANT(&e->csi, stage_publish(e, "pv-2", "pod-f", ctx, target, calls),
		      { 1, "basePath: " }, { 1, "is a symlink, refusing to follow it" });
	snprintf(probe, sizeof(probe), "%s/pv-2", e->outside);
	assert_int_equal(access(probe, F_OK), -1);

	/* A missing basePath is not made. */
	snprintf(ctx, sizeof(ctx), "\"type\": \"local\", \"basePath\": \"%s/none\"", e->base);
	CSI_CALL_WANT(&e->csi, stage_publish(e, "pv-3", "pod-g", ctx, target, calls),
		      { 1, "ERR NOT_FOUND" }, { 1, "basePath" });
	snprintf(probe, sizeof(probe), "%s/none", e->base);
	assert_int_equal(access(probe, F_OK), -1);

	/* path and basePath together: the request is at fault. */
	snprintf(ctx, sizeof(ctx), "\"type\": \"local\", \"basePath\": \"%s\", \"path\": \"%s\"",
		 e->base, e->outside);
	CSI_CALL_WANT(&e->csi, stage_publish(e, "pv-4", "pod-h", ctx, target, calls),
		      { 0, "ERR INVALID_ARGUMENT" }, { 0, "basePath" });
	assert_int_equal(test_count_mounts_under(e->csi.f->dir), 0);
}

/* The same from a pod spec file: local.basePath with local.volumeId. */
static void test_pod_spec(void **state)
{
	struct env *e = *state;
	struct agent_fixture *f = e->csi.f;
	char target[512], dir[800];
	struct stat st;

	assert_int_equal(fixture_start(f, NULL), 0);
	assert_int_equal(
		fixture_write_podf(f, "p.json",
				   "{\"pod\": {\"uid\": \"pod-p\"}, \"volumes\": [{\"name\": "
				   "\"data\", \"local\": {\"basePath\": \"%s\", "
				   "\"volumeId\": \"web-data\"}}]}",
				   e->base),
		0);
	fixture_pod_dir(f, "pod-p", "data", target);
	assert_true(fixture_wait_pod_state(f, target, "mounted", -1, 10000));
	snprintf(dir, sizeof(dir), "%s/web-data", e->base);
	assert_int_equal(lstat(dir, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(fixture_remove_pod(f, "p.json"), 0);
	assert_true(fixture_wait_unmounted(target, 10000));
	assert_int_equal(lstat(dir, &st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_made_once_and_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlink_and_missing_base, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pod_spec, setup, teardown),
	};

	if (!csi_env_have_client()) {
		fprintf(stderr, "python3-grpcio or python3-grpc-tools missing: skipped\n");
		return 77;
	}
	test_enter_private_mountns();
	return cmocka_run_group_tests_name("local basePath", tests, NULL, NULL);
}
