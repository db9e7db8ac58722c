/* test-csi-controller.c - the CSI Controller service (`volagent run --csi --controller`) through
 * a real agent and the independent Python client (tests/csi/csi_client.py): CreateVolume
 * (idempotent, sizes, parameters, base paths outside the prefixes, topology), GetCapacity going
 * down and up, DeleteVolume (while published, a mount inside, ids not ours, twice),
 * ControllerExpandVolume, the records surviving a SIGKILL and restart, and an agent without
 * --controller answering as before.  The base path is a 64 MiB tmpfs of the test's own, whose
 * free space nothing else touches.  Root, private mount namespace; runs on the build host (no
 * project quotas there: an enforced size is refused, which is checked; tests/vm/test-quota.sh
 * checks enforcement). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "csi-calls.h"
#include "csi-env.h"
#include "testlib.h"

#define MIB (1024LL * 1024)
#define CAP_LIST "[" CSI_CAP_MOUNT "]"

struct env {
	struct csi_env csi;
	char prefix[600]; /* --local-path-prefix */
	char base[700];	  /* a tmpfs below it */
	char outside[600];
};

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));

	csi_env_init(&e->csi, fixture_new("controller"));
	snprintf(e->prefix, sizeof(e->prefix), "%s/volumes", e->csi.f->dir);
	snprintf(e->base, sizeof(e->base), "%s/fast", e->prefix);
	snprintf(e->outside, sizeof(e->outside), "%s/outside", e->csi.f->dir);
	assert_int_equal(mkdir(e->prefix, 0755), 0);
	assert_int_equal(mkdir(e->base, 0755), 0);
	assert_int_equal(mkdir(e->outside, 0755), 0);
	assert_int_equal(mount("tmpfs", e->base, "tmpfs", 0, "size=64m"), 0);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;

	fixture_free(e->csi.f);
	umount2(e->base, MNT_DETACH);
	free(e);
	return 0;
}

/* Entries of dir but "." and "..". */
static int count_entries(const char *dir)
{
	struct dirent *de;
	DIR *d = opendir(dir);
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return n;
}

static int write_at(const char *dir, const char *name, const char *content)
{
	char path[1200];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return test_write_file(path, content);
}

static void start(struct env *e)
{
	csi_env_start_with(&e->csi, (const char *const[]){ "--controller", "--local-path-prefix",
							   e->prefix, NULL });
}

/* The JSON of answer line n of out, which must be "OK {...}" (caller decrefs). */
static json_t *answer_json(const char *out, int n)
{
	const char *l = csi_line(out, n);
	json_t *o;

	if (strncmp(l, "OK ", 3) != 0)
		fail_msg("answer %d is \"%s\", expected OK", n, l);
	o = json_loads(l + 3, 0, NULL);
	assert_non_null(o);
	return o;
}

/* A CreateVolume line of name below base with required bytes (0: no capacity_range) and the
 * other parameters' members (e.g. ", \"enforceSize\": \"false\""). */
static void add_create(char *calls, size_t size, const char *name, const char *base,
		       long long required, const char *params)
{
	char range[100] = "";

	if (required)
		snprintf(range, sizeof(range), "\"capacity_range\": {\"required_bytes\": %lld}, ",
			 required);
	csi_calls_add(
		calls, size,
		"Controller/CreateVolume {\"name\": \"%s\", %s\"volume_capabilities\": " CAP_LIST
		", \"parameters\": {\"basePath\": \"%s\"%s}}\n",
		name, range, base, params);
}

/* CreateVolume of name (recorded size) and its volume id into id (>= 200). */
static void create(struct env *e, const char *name, long long required, char *id)
{
	char calls[2048] = "";
	json_t *o;
	char *out;

	add_create(calls, sizeof(calls), name, e->base, required, ", \"enforceSize\": \"false\"");
	out = csi_env_call(&e->csi, calls);
	o = answer_json(out, 0);
	snprintf(id, 200, "%s",
		 json_string_value(json_object_get(json_object_get(o, "volume"), "volume_id")));
	json_decref(o);
	free(out);
}

/* GetCapacity of the test's base path. */
static long long capacity(struct env *e)
{
	char calls[1024] = "";
	long long bytes;
	json_t *o;
	char *out;

	csi_calls_add(calls, sizeof(calls),
		      "Controller/GetCapacity {\"parameters\": {\"basePath\": \"%s\"}}\n", e->base);
	out = csi_env_call(&e->csi, calls);
	o = answer_json(out, 0);
	/* proto3 JSON writes int64 as a string, and leaves out a zero */
	bytes = json_object_get(o, "available_capacity")
			? atoll(json_string_value(json_object_get(o, "available_capacity")))
			: 0;
	json_decref(o);
	free(out);
	return bytes;
}

static void test_off_answers_as_before(void **state)
{
	struct env *e = *state;
	char *out;

	csi_env_start(&e->csi);
	out = csi_env_call(&e->csi, "Identity/GetPluginCapabilities {}\n"
				    "Controller/ControllerGetCapabilities {}\n"
				    "Controller/CreateVolume {\"name\": \"a\"}\n");
	assert_string_equal(csi_line(out, 0),
			    "OK {\"capabilities\": [{\"service\": {\"type\": "
			    "\"VOLUME_ACCESSIBILITY_CONSTRAINTS\"}}, {\"volume_expansion\": "
			    "{\"type\": \"ONLINE\"}}]}");
	assert_line(out, 1, "ERR UNIMPLEMENTED");
	assert_line(out, 2, "ERR UNIMPLEMENTED");
	free(out);
	csi_env_stop_clean(&e->csi);
}

static void test_capabilities(void **state)
{
	struct env *e = *state;
	char *out;

	start(e);
	out = csi_env_call(&e->csi, "Identity/GetPluginCapabilities {}\n"
				    "Controller/ControllerGetCapabilities {}\n"
				    "Controller/ListVolumes {}\n"
				    "Controller/ControllerPublishVolume {\"volume_id\": \"x\"}\n"
				    "Controller/CreateSnapshot {\"name\": \"s\"}\n");
	assert_line(out, 0, "{\"service\": {\"type\": \"CONTROLLER_SERVICE\"}}");
	assert_line(out, 0, "VOLUME_ACCESSIBILITY_CONSTRAINTS");
	assert_string_equal(
		csi_line(out, 1),
		"OK {\"capabilities\": [{\"rpc\": {\"type\": \"CREATE_DELETE_VOLUME\"}}, "
		"{\"rpc\": {\"type\": \"GET_CAPACITY\"}}, {\"rpc\": {\"type\": "
		"\"EXPAND_VOLUME\"}}]}");
	for (int i = 2; i < 5; i++)
		assert_line(out, i, "ERR UNIMPLEMENTED");
	free(out);
	csi_env_stop_clean(&e->csi);
}

static void test_create(void **state)
{
	struct env *e = *state;
	char calls[8192] = "", id[200], dir[1000], node[200], val[4096];
	json_t *o, *v;
	char *out;

	start(e);
	snprintf(node, sizeof(node), "%s", "");
	create(e, "pvc-1", 4 * MIB, id);
	assert_true(strncmp(id, "lv1-", 4) == 0);
	/* The directory is made at once, with the record on it. */
	snprintf(dir, sizeof(dir), "%s/%s", e->base, id);
	assert_true(getxattr(dir, "trusted.volagent.provision", val, sizeof(val)) > 0);

	/* The same again: the same volume; another size, or enforced: ALREADY_EXISTS. */
	add_create(calls, sizeof(calls), "pvc-1", e->base, 4 * MIB, ", \"enforceSize\": \"false\"");
	add_create(calls, sizeof(calls), "pvc-1", e->base, 8 * MIB, ", \"enforceSize\": \"false\"");
	add_create(calls, sizeof(calls), "pvc-1", e->base, 4 * MIB, "");
	out = csi_env_call(&e->csi, calls);
	o = answer_json(out, 0);
	v = json_object_get(o, "volume");
	assert_string_equal(json_string_value(json_object_get(v, "volume_id")), id);
	assert_string_equal(json_string_value(json_object_get(v, "capacity_bytes")), "4194304");
	assert_string_equal(json_string_value(
				    json_object_get(json_object_get(v, "volume_context"), "type")),
			    "local");
	assert_string_equal(json_string_value(json_object_get(json_object_get(v, "volume_context"),
							      "basePath")),
			    e->base);
	/* Recorded only: no size for the node to enforce. */
	assert_null(json_object_get(json_object_get(v, "volume_context"), "size"));
	snprintf(node, sizeof(node), "%s",
		 json_string_value(json_object_get(
			 json_object_get(json_array_get(json_object_get(v, "accessible_topology"),
							0),
					 "segments"),
			 "topology.csi.volagent.io/node")));
	assert_true(node[0]);
	json_decref(o);
	assert_line(out, 1, "ERR ALREADY_EXISTS");
	assert_line(out, 2, "ERR ALREADY_EXISTS");
	free(out);

	/* Refusals, each naming its field. */
	calls[0] = '\0';
	csi_calls_add(calls, sizeof(calls),
		      "Controller/CreateVolume {\"volume_capabilities\": " CAP_LIST
		      ", \"parameters\": {\"basePath\": \"%s\"}}\n",
		      e->base);
	csi_calls_add(calls, sizeof(calls),
		      "Controller/CreateVolume {\"name\": \"x\", \"parameters\": {\"basePath\": "
		      "\"%s\"}}\n",
		      e->base);
	csi_calls_add(calls, sizeof(calls),
		      "Controller/CreateVolume {\"name\": \"x\", \"volume_capabilities\": "
		      "[" CSI_CAP_BLOCK "], \"parameters\": {\"basePath\": \"%s\"}}\n",
		      e->base);
	add_create(calls, sizeof(calls), "x", e->outside, MIB, "");
	add_create(calls, sizeof(calls), "x", e->base, MIB, ", \"color\": \"blue\"");
	csi_calls_add(calls, sizeof(calls),
		      "Controller/CreateVolume {\"name\": \"x\", \"capacity_range\": "
		      "{\"required_bytes\": 2048, \"limit_bytes\": 1024}, \"volume_capabilities\": "
		      "" CAP_LIST ", \"parameters\": {\"basePath\": \"%s\"}}\n",
		      e->base);
	add_create(calls, sizeof(calls), "x", e->base, 1024 * MIB, ", \"enforceSize\": \"false\"");
	/* Enforced (the default) on a filesystem without project quotas. */
	add_create(calls, sizeof(calls), "x", e->base, MIB, "");
	csi_calls_add(calls, sizeof(calls),
		      "Controller/CreateVolume {\"name\": \"x\", \"volume_capabilities\": " CAP_LIST
		      ", \"parameters\": {\"basePath\": \"%s\"}, \"accessibility_requirements\": "
		      "{\"requisite\": [{\"segments\": {\"topology.csi.volagent.io/node\": "
		      "\"another-node\"}}]}}\n",
		      e->base);
	csi_calls_add(calls, sizeof(calls),
		      "Controller/CreateVolume {\"name\": \"x\", \"volume_capabilities\": " CAP_LIST
		      ", \"parameters\": {}}\n");
	out = csi_env_call(&e->csi, calls);
	assert_line(out, 0, "ERR INVALID_ARGUMENT name: required");
	assert_line(out, 1, "ERR INVALID_ARGUMENT volume_capabilities: required");
	assert_line(out, 2, "ERR INVALID_ARGUMENT volume_capabilities[0].block");
	assert_line(out, 3, "ERR INVALID_ARGUMENT basePath: ");
	assert_line(out, 3, "is not below a --local-path-prefix");
	assert_line(out, 4, "ERR INVALID_ARGUMENT parameters: unknown key \"color\"");
	assert_line(out, 5, "ERR OUT_OF_RANGE capacity_range: limit_bytes 1024 is below");
	assert_line(out, 6, "ERR RESOURCE_EXHAUSTED capacity_range: 1073741824 bytes asked");
	assert_line(out, 7, "ERR FAILED_PRECONDITION enforceSize: ");
	assert_line(out, 7, e->base);
	assert_line(out, 8, "ERR RESOURCE_EXHAUSTED accessibility_requirements");
	assert_line(out, 9, "ERR INVALID_ARGUMENT basePath: required");
	free(out);
	/* None of them made a directory; the first volume is the only one. */
	assert_int_equal(count_entries(e->base), 1);
	assert_int_equal(count_entries(e->outside), 0);
	csi_env_stop_clean(&e->csi);
}

static void test_capacity_down_and_up(void **state)
{
	struct env *e = *state;
	char id1[200], id2[200], id3[200], calls[2048] = "";
	long long c0, c1, c2;

	start(e);
	c0 = capacity(e);
	assert_true(c0 > 60 * MIB && c0 <= 64 * MIB);
	create(e, "pvc-a", 8 * MIB, id1);
	c1 = capacity(e);
	assert_int_equal(c1, c0 - 8 * MIB);
	create(e, "pvc-b", 16 * MIB, id2);
	c2 = capacity(e);
	assert_int_equal(c2, c1 - 16 * MIB);
	/* An unsized volume reserves nothing. */
	create(e, "pvc-c", 0, id3);
	assert_int_equal(capacity(e), c2);
	/* Another node's segment has none of it. */
	csi_calls_add(calls, sizeof(calls),
		      "Controller/GetCapacity {\"parameters\": {\"basePath\": \"%s\"}, "
		      "\"accessible_topology\": {\"segments\": {\"topology.csi.volagent.io/node\": "
		      "\"another-node\"}}}\n",
		      e->base);
	CSI_CALL_WANT(&e->csi, calls, { 0, "OK {\"maximum_volume_size\": \"0\"}" });

	calls[0] = '\0';
	csi_calls_add(calls, sizeof(calls), "Controller/DeleteVolume {\"volume_id\": \"%s\"}\n",
		      id2);
	CSI_CALL_WANT(&e->csi, calls, { 0, "OK {}" });
	assert_int_equal(capacity(e), c1);
	calls[0] = '\0';
	csi_calls_add(calls, sizeof(calls), "Controller/DeleteVolume {\"volume_id\": \"%s\"}\n",
		      id1);
	CSI_CALL_WANT(&e->csi, calls, { 0, "OK {}" });
	assert_int_equal(capacity(e), c0);
	csi_env_stop_clean(&e->csi);
}

static void test_delete(void **state)
{
	struct env *e = *state;
	char id[200], calls[8192] = "", ctx[1000], stg[700], target[700], dir[1000], inner[1100];
	char foreign[1200];

	start(e);
	create(e, "pvc-d", MIB, id);
	snprintf(dir, sizeof(dir), "%s/%s", e->base, id);

	/* Staged and published: refused, the directory and its data stay. */
	csi_env_staging(&e->csi, id, stg);
	csi_env_target(&e->csi, "pod-d", "pv-d", target);
	snprintf(ctx, sizeof(ctx), "{\"type\": \"local\", \"basePath\": \"%s\"}", e->base);
	csi_calls_stage(calls, sizeof(calls), id, stg, CSI_CAP_MOUNT, ctx, NULL);
	csi_calls_publish(calls, sizeof(calls), id, stg, target, CSI_CAP_MOUNT, ctx, NULL);
	csi_calls_add(calls, sizeof(calls), "Controller/DeleteVolume {\"volume_id\": \"%s\"}\n",
		      id);
	CSI_CALL_WANT(&e->csi, calls, { 0, "OK {}" }, { 1, "OK {}" },
		      { 2, "ERR FAILED_PRECONDITION volume " }, { 2, "is staged or published" });
	assert_true(test_is_mountpoint(target));
	assert_int_equal(write_at(target, "data", "kept"), 0);

	/* Unpublished and unstaged, but a mount left inside: that mount is neither entered
	 * nor removed, and the call fails. */
	calls[0] = '\0';
	csi_calls_unpublish(calls, sizeof(calls), id, target);
	csi_calls_unstage(calls, sizeof(calls), id, stg);
	csi_env_call_ok(&e->csi, calls, 2);
	snprintf(inner, sizeof(inner), "%s/sub", dir);
	assert_int_equal(mkdir(inner, 0755), 0);
	assert_int_equal(mount(e->outside, inner, NULL, MS_BIND, NULL), 0);
	assert_int_equal(write_at(e->outside, "precious", "x"), 0);
	calls[0] = '\0';
	csi_calls_add(calls, sizeof(calls), "Controller/DeleteVolume {\"volume_id\": \"%s\"}\n",
		      id);
	CSI_CALL_WANT(&e->csi, calls, { 0, "ERR FAILED_PRECONDITION" }, { 0, "sub" });
	assert_int_equal(count_entries(e->outside), 1);
	assert_int_equal(umount2(inner, 0), 0);

	/* Now it goes; again, and an id that is not ours, are OK (the spec: gone is deleted);
	 * an id of ours whose base path is outside the prefixes is refused. */
	snprintf(foreign, sizeof(foreign), "lv1-0123456789abcdef%s", e->outside);
	for (char *c = foreign + 20; *c; c++)
		if (*c == '/')
			*c = '.';
	calls[0] = '\0';
	csi_calls_add(calls, sizeof(calls), "Controller/DeleteVolume {\"volume_id\": \"%s\"}\n",
		      id);
	csi_calls_add(calls, sizeof(calls), "Controller/DeleteVolume {\"volume_id\": \"%s\"}\n",
		      id);
	csi_calls_add(calls, sizeof(calls), "Controller/DeleteVolume {\"volume_id\": \"pv-x\"}\n");
	csi_calls_add(calls, sizeof(calls), "Controller/DeleteVolume {\"volume_id\": \"%s\"}\n",
		      foreign);
	csi_calls_add(calls, sizeof(calls), "Controller/DeleteVolume {}\n");
	CSI_CALL_WANT(&e->csi, calls, { 0, "OK {}" }, { 1, "OK {}" }, { 2, "OK {}" },
		      { 3, "ERR INVALID_ARGUMENT volume_id: " }, { 3, "basePath" },
		      { 4, "ERR INVALID_ARGUMENT volume_id: required" });
	assert_int_equal(access(dir, F_OK), -1);
	assert_int_equal(count_entries(e->outside), 1);
	csi_env_stop_clean(&e->csi);
}

static void test_expand(void **state)
{
	struct env *e = *state;
	char id[200], calls[4096] = "";
	long long c0;

	start(e);
	create(e, "pvc-e", 4 * MIB, id);
	c0 = capacity(e);
	csi_calls_add(
		calls, sizeof(calls),
		"Controller/ControllerExpandVolume {\"volume_id\": \"%s\", \"capacity_range\": "
		"{\"required_bytes\": 12582912}}\n",
		id);
	csi_calls_add(
		calls, sizeof(calls),
		"Controller/ControllerExpandVolume {\"volume_id\": \"%s\", \"capacity_range\": "
		"{\"required_bytes\": 1048576}}\n",
		id);
	csi_calls_add(calls, sizeof(calls),
		      "Controller/ControllerExpandVolume {\"volume_id\": \"%s\"}\n", id);
	csi_calls_add(
		calls, sizeof(calls),
		"Controller/ControllerExpandVolume {\"volume_id\": \"lv1-0123456789abcdef%s\", "
		"\"capacity_range\": {\"required_bytes\": 1}}\n",
		".none");
	CSI_CALL_WANT(&e->csi, calls,
		      { 0, "OK {\"capacity_bytes\": \"12582912\", \"node_expansion_required\": "
			   "true}" },
		      { 1, "OK {\"capacity_bytes\": \"12582912\"" },
		      { 2, "ERR INVALID_ARGUMENT capacity_range: required" },
		      { 3, "ERR INVALID_ARGUMENT" });
	assert_int_equal(capacity(e), c0 - 8 * MIB);

	/* The node's part, published: a recorded size has no quota to raise, so the node answers
	 * OK with no capacity of its own (enforced sizes: tests/test-quota.c in the VM). */
	{
		char ctx[1000], stg[700], target[700];

		csi_env_staging(&e->csi, id, stg);
		csi_env_target(&e->csi, "pod-x", "pv-x", target);
		snprintf(ctx, sizeof(ctx), "{\"type\": \"local\", \"basePath\": \"%s\"}", e->base);
		calls[0] = '\0';
		csi_calls_stage(calls, sizeof(calls), id, stg, CSI_CAP_MOUNT, ctx, NULL);
		csi_calls_publish(calls, sizeof(calls), id, stg, target, CSI_CAP_MOUNT, ctx, NULL);
		csi_calls_add(calls, sizeof(calls),
			      "Node/NodeExpandVolume {\"volume_id\": \"%s\", \"volume_path\": "
			      "\"%s\", \"capacity_range\": {\"required_bytes\": 12582912}}\n",
			      id, target);
		csi_calls_unpublish(calls, sizeof(calls), id, target);
		csi_calls_unstage(calls, sizeof(calls), id, stg);
		CSI_CALL_WANT(&e->csi, calls, { 0, "OK {}" }, { 1, "OK {}" }, { 2, "OK {}" },
			      { 3, "OK {}" }, { 4, "OK {}" });
	}
	csi_env_stop_clean(&e->csi);
}

static void test_restart_keeps_records(void **state)
{
	struct env *e = *state;
	char id[200], again[200], calls[2048] = "";
	long long c1;

	start(e);
	create(e, "pvc-r", 8 * MIB, id);
	c1 = capacity(e);
	assert_int_equal(fixture_stop(e->csi.f, SIGKILL), 128 + SIGKILL);
	start(e);
	create(e, "pvc-r", 8 * MIB, again);
	assert_string_equal(again, id);
	assert_int_equal(capacity(e), c1);
	/* 2 MiB at most: the 8 MiB volume is not it. */
	csi_calls_add(calls, sizeof(calls),
		      "Controller/CreateVolume {\"name\": \"pvc-r\", \"capacity_range\": "
		      "{\"limit_bytes\": 2097152}, \"volume_capabilities\": " CAP_LIST
		      ", \"parameters\": {\"basePath\": \"%s\", \"enforceSize\": \"false\"}}\n",
		      e->base);
	CSI_CALL_WANT(&e->csi, calls, { 0, "ERR ALREADY_EXISTS" }, { 0, "8388608 bytes" });
	csi_env_stop_clean(&e->csi);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_off_answers_as_before, setup, teardown),
		cmocka_unit_test_setup_teardown(test_capabilities, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create, setup, teardown),
		cmocka_unit_test_setup_teardown(test_capacity_down_and_up, setup, teardown),
		cmocka_unit_test_setup_teardown(test_delete, setup, teardown),
		cmocka_unit_test_setup_teardown(test_expand, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restart_keeps_records, setup, teardown),
	};

	if (!csi_env_have_client()) {
		fprintf(stderr, "python3-grpcio or python3-grpc-tools missing: skipped\n");
		return 77;
	}
	test_enter_private_mountns();
	return cmocka_run_group_tests_name("CSI controller", tests, NULL, NULL);
}
