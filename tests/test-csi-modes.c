/* test-csi-modes.c - CSI access modes on one node, through a real `volagent run --csi` and
 * its real socket, driven by the independent Python client (tests/csi/csi_client.py), with
 * real mounts: a local directory volume and a local block-device volume (a loop device with
 * ext4, `type=local` with the device's path).  Root, private mount namespace.
 *
 * For each access mode: stage, publish at a first target, repeat it, publish at a second
 * target; the second is OK or FAILED_PRECONDITION as the spec's table for plugins with
 * SINGLE_NODE_MULTI_WRITER says, and reader modes are mounted read-only.  Then the conflicts:
 * a publish with another mode than the stage's or another target's, and the error rows of
 * the spec that need a device (unstage and unpublish of another volume's path, expand with
 * another capability).  The rbd cases are in test-rbd-agent.c (they need a Ceph cluster). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "csi-calls.h"
#include "csi-env.h"
#include "testlib.h"

struct modes_env {
	struct csi_env csi;
	char src[600];	 /* the directory volume's source */
	const char *dev; /* the block volume's loop device, ext4 after the first stage */
};

static int setup(void **state)
{
	struct modes_env *e = calloc(1, sizeof(*e));

	csi_env_init(&e->csi, fixture_new("csimodes"));
	snprintf(e->src, sizeof(e->src), "%s/src", e->csi.f->dir);
	mkdir(e->src, 0755);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct modes_env *e = *state;

	fixture_free(e->csi.f); /* stops the agent, unmounts, detaches the loop device */
	free(e);
	return 0;
}

enum kind {
	DIRECTORY,
	BLOCK_DEVICE
};

/* The volume capability (into cap) and context (into ctx) of a stage or publish of a volume
 * of kind k with access mode mode; both buffers >= 200 bytes. */
static void cap_and_ctx(struct modes_env *e, enum kind k, const char *mode, char *cap, char *ctx)
{
	snprintf(cap, 200, "{\"mount\": {%s}, \"access_mode\": {\"mode\": \"%s\"}}",
		 k == BLOCK_DEVICE ? "\"fs_type\": \"ext4\"" : "", mode);
	csi_local_ctx(k == BLOCK_DEVICE ? e->dev : e->src, ctx);
}

struct mode_case {
	const char *mode;
	bool second_ok; /* a second target on this node is allowed */
	bool read_only; /* the mode mounts read-only */
	bool second_ro; /* the second publish asks readonly */
};

/* Stage, publish at t1 (twice), publish at t2; check the answers and the mounts; clean up. */
static void run_case(struct modes_env *e, enum kind k, const struct mode_case *c, int n)
{
	char vol[64], uid1[64], uid2[64], t1[700], t2[700], stg[700], cap[200], ctx[200];
	char calls[8192] = "";
	char file[800], *out, *data;

	snprintf(vol, sizeof(vol), "%s-%d", k == BLOCK_DEVICE ? "blk" : "dir", n);
	snprintf(uid1, sizeof(uid1), "pod-%s-a", vol);
	snprintf(uid2, sizeof(uid2), "pod-%s-b", vol);
	csi_env_target(&e->csi, uid1, "pv", t1);
	csi_env_target(&e->csi, uid2, "pv", t2);
	csi_env_staging(&e->csi, vol, stg);
	cap_and_ctx(e, k, c->mode, cap, ctx);
	csi_calls_stage(calls, sizeof(calls), vol, stg, cap, ctx, NULL);
	csi_calls_publish(calls, sizeof(calls), vol, stg, t1, cap, ctx, NULL);
	csi_calls_publish(calls, sizeof(calls), vol, stg, t1, cap, ctx, NULL);
	csi_calls_publish(calls, sizeof(calls), vol, stg, t2, cap, ctx,
			  c->second_ro ? "\"readonly\": true" : "\"readonly\": false");
	print_message("%s volume, %s\n", k == BLOCK_DEVICE ? "block-device" : "directory", c->mode);
	out = csi_env_call(&e->csi, calls);
	assert_line(out, 0, "OK {}");
	assert_line(out, 1, "OK {}");
	assert_line(out, 2, "OK {}"); /* the same publish again */
	if (c->second_ok) {
		assert_line(out, 3, "OK {}");
	} else {
		assert_line(out, 3, "ERR FAILED_PRECONDITION");
		assert_line(out, 3, c->mode);
		assert_line(out, 3, t1); /* names the other target */
	}
	free(out);
	assert_true(test_is_mountpoint(t1));
	assert_int_equal(test_mount_is_ro(t1), c->read_only);
	assert_int_equal(test_is_mountpoint(t2), c->second_ok);
	if (c->second_ok)
		assert_int_equal(test_mount_is_ro(t2), c->read_only || c->second_ro);
	/* Several writers: what one target writes, the other reads. */
	if (c->second_ok && !c->read_only && !c->second_ro) {
		snprintf(file, sizeof(file), "%s/from-t2", t2);
		assert_int_equal(test_write_file(file, vol), 0);
		snprintf(file, sizeof(file), "%s/from-t2", t1);
		data = test_read_file(file);
		assert_non_null(data);
		assert_string_equal(data, vol);
		free(data);
		unlink(file);
	}
	calls[0] = '\0';
	csi_calls_unpublish(calls, sizeof(calls), vol, t1);
	csi_calls_unpublish(calls, sizeof(calls), vol, t2);
	csi_calls_unstage(calls, sizeof(calls), vol, stg);
	out = csi_env_call(&e->csi, calls);
	for (int i = 0; i < 3; i++)
		assert_line(out, i, "OK {}");
	free(out);
	assert_false(test_is_mountpoint(t1));
	assert_false(test_is_mountpoint(t2));
	assert_false(test_is_mountpoint(stg));
}

static const struct mode_case cases[] = {
	/* today's behaviour: one target (the spec's "Non MULTI_NODE_..." row) */
	{ "SINGLE_NODE_WRITER", false, false, false },
	{ "SINGLE_NODE_READER_ONLY", false, true, true },
	{ "MULTI_NODE_READER_ONLY", true, true, true },
	/* local volumes exist on this node only: several targets here */
	{ "MULTI_NODE_SINGLE_WRITER", true, false, false },
	{ "MULTI_NODE_MULTI_WRITER", true, false, false },
	/* ReadWriteOncePod: a second target is refused, even a read-only one */
	{ "SINGLE_NODE_SINGLE_WRITER", false, false, true },
	{ "SINGLE_NODE_MULTI_WRITER", true, false, false },
};

static void test_capability_advertised(void **state)
{
	struct modes_env *e = *state;
	char *out;

	csi_env_start(&e->csi);
	out = csi_env_call(&e->csi, "Node/NodeGetCapabilities {}\n");
	assert_line(out, 0, "SINGLE_NODE_MULTI_WRITER");
	free(out);
	assert_int_equal(fixture_stop(e->csi.f, SIGTERM), 0);
}

/* Every row of cases[] on a volume of kind k, on one agent. */
static void run_cases(struct modes_env *e, enum kind k)
{
	csi_env_start(&e->csi);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(e, k, &cases[i], (int)i);
	assert_int_equal(fixture_stop(e->csi.f, SIGTERM), 0);
}

static void test_modes_directory_volume(void **state)
{
	run_cases(*state, DIRECTORY);
}

static void test_modes_block_device_volume(void **state)
{
	struct modes_env *e = *state;

	e->dev = fixture_add_loop(e->csi.f, 64 << 20);
	assert_non_null(e->dev);
	run_cases(e, BLOCK_DEVICE);
}

/* Two publishes that ask different modes: the second is FAILED_PRECONDITION ("COs SHOULD NOT
 * call NodePublishVolume a second time with a different volume_capability"), whether the
 * first mode came from the stage or from another target; nothing mounted is touched. */
static void test_mode_conflicts(void **state)
{
	struct modes_env *e = *state;
	char t1[700], t2[700], t3[700], stg[700], stg2[700], cap[200], ctx[200], cap2[200];
	char calls[8192] = "", *out;
	int id;

	e->dev = fixture_add_loop(e->csi.f, 64 << 20);
	assert_non_null(e->dev);
	csi_env_target(&e->csi, "pod-c1", "pv", t1);
	csi_env_target(&e->csi, "pod-c2", "pv", t2);
	csi_env_target(&e->csi, "pod-c3", "pv", t3);
	csi_env_staging(&e->csi, "cb", stg);
	csi_env_staging(&e->csi, "cd", stg2);
	csi_env_start(&e->csi);
	cap_and_ctx(e, BLOCK_DEVICE, "SINGLE_NODE_SINGLE_WRITER", cap2, ctx);
	cap_and_ctx(e, BLOCK_DEVICE, "SINGLE_NODE_MULTI_WRITER", cap, ctx);
	csi_calls_stage(calls, sizeof(calls), "cb", stg, cap, ctx, NULL);
	csi_calls_publish(calls, sizeof(calls), "cb", stg, t1, cap, ctx, NULL);
	csi_calls_publish(calls, sizeof(calls), "cb", stg, t2, cap2, ctx, NULL);
	out = csi_env_call(&e->csi, calls);
	assert_line(out, 0, "OK {}");
	assert_line(out, 1, "OK {}");
	assert_line(out, 2,
		    "ERR FAILED_PRECONDITION volume cb is staged with access mode "
		    "SINGLE_NODE_MULTI_WRITER, not SINGLE_NODE_SINGLE_WRITER");
	free(out);
	assert_true(test_is_mountpoint(t1));
	assert_false(test_is_mountpoint(t2));
	id = test_mount_id(t1);

	/* A directory volume published without a stage: the first target's mode decides. */
	cap_and_ctx(e, DIRECTORY, "MULTI_NODE_MULTI_WRITER", cap2, ctx);
	cap_and_ctx(e, DIRECTORY, "SINGLE_NODE_MULTI_WRITER", cap, ctx);
	calls[0] = '\0';
	csi_calls_publish(calls, sizeof(calls), "cd", stg2, t2, cap, ctx, NULL);
	csi_calls_publish(calls, sizeof(calls), "cd", stg2, t3, cap2, ctx, NULL);
	out = csi_env_call(&e->csi, calls);
	assert_line(out, 0, "OK {}");
	assert_line(out, 1, "ERR FAILED_PRECONDITION");
	assert_line(out, 1, "access mode SINGLE_NODE_MULTI_WRITER, not MULTI_NODE_MULTI_WRITER");
	assert_line(out, 1, t2);
	free(out);
	assert_true(test_is_mountpoint(t2));
	assert_false(test_is_mountpoint(t3));
	assert_int_equal(test_mount_id(t1), id);
	assert_int_equal(fixture_stop(e->csi.f, SIGTERM), 0);
}

/* The rows of the spec's error tables that need a device volume, in the spec's order:
 * NodeUnstageVolume and NodeUnpublishVolume "Volume does not exist" (another volume is at the
 * path: NOT_FOUND, and it stays mounted), NodeExpandVolume "Exceeds capabilities"
 * (INVALID_ARGUMENT: another access mode than the volume's). */
static void test_error_rows_with_a_device(void **state)
{
	struct modes_env *e = *state;
	char t1[700], stg[700], cap[200], ctx[200], calls[8192] = "", *out;

	e->dev = fixture_add_loop(e->csi.f, 64 << 20);
	assert_non_null(e->dev);
	csi_env_target(&e->csi, "pod-e", "pv", t1);
	csi_env_staging(&e->csi, "ev", stg);
	csi_env_start(&e->csi);
	cap_and_ctx(e, BLOCK_DEVICE, "SINGLE_NODE_WRITER", cap, ctx);
	csi_calls_stage(calls, sizeof(calls), "ev", stg, cap, ctx, NULL);
	csi_calls_publish(calls, sizeof(calls), "ev", stg, t1, cap, ctx, NULL);
	/* NodeUnstageVolume and NodeUnpublishVolume: NOT_FOUND */
	csi_calls_unstage(calls, sizeof(calls), "other", stg);
	csi_calls_unpublish(calls, sizeof(calls), "other", t1);
	/* NodeExpandVolume: INVALID_ARGUMENT (Exceeds capabilities), then OK */
	csi_calls_add(calls, sizeof(calls),
		      "Node/NodeExpandVolume {\"volume_id\": \"ev\", \"volume_path\": \"%s\", "
		      "\"staging_target_path\": \"%s\", \"volume_capability\": {\"mount\": {}, "
		      "\"access_mode\": {\"mode\": \"MULTI_NODE_MULTI_WRITER\"}}}\n"
		      "Node/NodeExpandVolume {\"volume_id\": \"ev\", \"volume_path\": \"%s\", "
		      "\"staging_target_path\": \"%s\", \"volume_capability\": {\"mount\": {}, "
		      "\"access_mode\": {\"mode\": \"SINGLE_NODE_WRITER\"}}}\n",
		      t1, stg, t1, stg);
	out = csi_env_call(&e->csi, calls);
	assert_line(out, 0, "OK {}");
	assert_line(out, 1, "OK {}");
	assert_line(out, 2, "ERR NOT_FOUND volume other is not staged at");
	assert_line(out, 3, "ERR NOT_FOUND volume other is not published at");
	assert_line(out, 4,
		    "ERR INVALID_ARGUMENT volume_capability.access_mode: "
		    "MULTI_NODE_MULTI_WRITER, but volume ev is used as SINGLE_NODE_WRITER");
	assert_line(out, 5, "OK {\"capacity_bytes\"");
	free(out);
	assert_true(test_is_mountpoint(stg));
	assert_true(test_is_mountpoint(t1));
	assert_int_equal(fixture_stop(e->csi.f, SIGTERM), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_capability_advertised, setup, teardown),
		cmocka_unit_test_setup_teardown(test_modes_directory_volume, setup, teardown),
		cmocka_unit_test_setup_teardown(test_modes_block_device_volume, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mode_conflicts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_error_rows_with_a_device, setup, teardown),
	};

	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	if (access("/usr/bin/python3", X_OK) < 0 ||
	    test_run((const char *const[]){ "/usr/bin/python3", "-c", "import grpc, grpc_tools",
					    NULL }) != 0) {
		fprintf(stderr, "python3-grpcio or python3-grpc-tools missing: skipped\n");
		return 77;
	}
	test_enter_private_mountns();
	return cmocka_run_group_tests_name("csi access modes", tests, NULL, NULL);
}
