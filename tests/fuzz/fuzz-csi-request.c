/* fuzz-csi-request.c - libFuzzer target for CSI requests: arbitrary bytes as the body of a CSI
 * call, through csi_request_check(), which is the server's own decoding (protobuf-c) and
 * validation, then into a backend that checks what the server promises it
 * (csi-server.h): every path absolute, normalized and strictly below the kubelet root,
 * required fields present, a known access mode, sane capacity numbers.  The symlink walk on
 * disk is left out (check_fs = false): it is lstat on the checked, normalized path only.
 *
 * Input: byte 0 picks the method, byte 1 the settings (bit 0: the backend has stage and
 * unstage; bit 1: the kubelet root is "/" instead of /var/lib/kubelet), the rest is the
 * serialized request.  tests/fuzz/make-csi-seeds.sh writes the seeds. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "csi-server.h"

#define FUZZ_CHECK(cond)                  \
	do {                              \
		if (!(cond))              \
			__builtin_trap(); \
	} while (0)

static const char *const methods[] = {
	"/csi.v1.Node/NodeStageVolume",	   "/csi.v1.Node/NodeUnstageVolume",
	"/csi.v1.Node/NodePublishVolume",  "/csi.v1.Node/NodeUnpublishVolume",
	"/csi.v1.Node/NodeGetVolumeStats", "/csi.v1.Node/NodeExpandVolume",
	"/csi.v1.Identity/GetPluginInfo",  "/csi.v1.Identity/GetPluginCapabilities",
	"/csi.v1.Identity/Probe",	   "/csi.v1.Node/NodeGetCapabilities",
	"/csi.v1.Node/NodeGetInfo",
};

static const char *root;  /* the kubelet root of this input, "" for "/" */
static bool echoed;	  /* op_publish echoed a secret into its message */
static size_t echoed_len; /* its length */

/* What the server promises about a path it hands on: absolute, no "", "." or ".." component,
 * no control character, strictly below the kubelet root. */
static void check_path(const char *p, bool required)
{
	size_t rl = strlen(root);

	FUZZ_CHECK(p);
	if (!*p) {
		FUZZ_CHECK(!required);
		return;
	}
	FUZZ_CHECK(strlen(p) < PATH_MAX);
	FUZZ_CHECK(strncmp(p, root, rl) == 0 && p[rl] == '/' && p[rl + 1] != '\0');
	for (const char *c = p; *c; c++)
		FUZZ_CHECK((unsigned char)*c >= 0x20);
	for (const char *c = p + 1;;) {
		const char *slash = strchr(c, '/');
		size_t len = slash ? (size_t)(slash - c) : strlen(c);

		FUZZ_CHECK(len > 0 && strncmp(c, ".", len) != 0 && strncmp(c, "..", len) != 0);
		if (!slash)
			break;
		c = slash + 1;
	}
}

static void check_id(const char *id)
{
	FUZZ_CHECK(id && *id && strlen(id) <= 4096);
}

static void check_map(const struct csi_map *m)
{
	for (size_t i = 0; i < m->n; i++)
		FUZZ_CHECK(m->items[i].key && m->items[i].value);
	if (m->n)
		FUZZ_CHECK(csi_map_get(m, m->items[m->n - 1].key) != NULL);
}

static void check_capability(const struct csi_volume_capability *c, bool required)
{
	if (!c->present) {
		FUZZ_CHECK(!required);
		return;
	}
	FUZZ_CHECK(c->access_type == CSI_ACCESS_MOUNT || c->access_type == CSI_ACCESS_BLOCK);
	FUZZ_CHECK(c->access_mode > CSI_MODE_UNKNOWN &&
		   c->access_mode <= CSI_MODE_SINGLE_NODE_MULTI_WRITER);
	FUZZ_CHECK(c->fs_type && c->volume_mount_group);
	for (size_t i = 0; i < c->n_mount_flags; i++)
		FUZZ_CHECK(c->mount_flags[i] != NULL);
}

static int op_stage(void *u, const struct csi_stage_request *q, struct csi_reply *reply)
{
	check_id(q->volume_id);
	check_path(q->staging_target_path, true);
	check_capability(&q->capability, true);
	check_map(&q->publish_context);
	check_map(&q->volume_context);
	check_map(&q->secrets);
	return 0;
}

static int op_unstage(void *u, const struct csi_unstage_request *q, struct csi_reply *reply)
{
	check_id(q->volume_id);
	check_path(q->staging_target_path, true);
	return 0;
}

static int op_publish(void *u, const struct csi_publish_request *q, struct csi_reply *reply)
{
	bool has_stage = *(bool *)u;

	check_id(q->volume_id);
	check_path(q->target_path, true);
	check_path(q->staging_target_path, has_stage);
	check_capability(&q->capability, true);
	check_map(&q->publish_context);
	check_map(&q->volume_context);
	check_map(&q->secrets);
	/* A backend may echo its input; the server must withhold a message holding a secret. */
	if (q->secrets.n && strlen(q->secrets.items[0].value) < 400) {
		echoed = true;
		echoed_len = strlen(q->secrets.items[0].value);
		snprintf(reply->message, sizeof(reply->message), "x %s y",
			 q->secrets.items[0].value);
		reply->code = CSI_INTERNAL;
		return -EIO;
	}
	return 0;
}

static int op_unpublish(void *u, const struct csi_unpublish_request *q, struct csi_reply *reply)
{
	check_id(q->volume_id);
	check_path(q->target_path, true);
	return 0;
}

static int op_stats(void *u, const struct csi_stats_request *q, struct csi_reply *reply)
{
	check_id(q->volume_id);
	check_path(q->volume_path, true);
	check_path(q->staging_target_path, false);
	return 0;
}

static int op_expand(void *u, const struct csi_expand_request *q, struct csi_reply *reply)
{
	check_id(q->volume_id);
	check_path(q->volume_path, true);
	check_path(q->staging_target_path, false);
	check_capability(&q->capability, false);
	check_map(&q->secrets);
	FUZZ_CHECK(q->required_bytes >= 0 && q->limit_bytes >= 0);
	FUZZ_CHECK(!q->limit_bytes || q->required_bytes <= q->limit_bytes);
	return 0;
}

static const struct csi_node_ops ops_full = {
	.stage = op_stage,
	.unstage = op_unstage,
	.publish = op_publish,
	.unpublish = op_unpublish,
	.get_volume_stats = op_stats,
	.expand = op_expand,
};

static const struct csi_node_ops ops_no_stage = {
	.publish = op_publish,
	.unpublish = op_unpublish,
	.get_volume_stats = op_stats,
	.expand = op_expand,
};

/* Stats and expand look a volume up at volume_path: a path that cannot hold one is NOT_FOUND. */
static bool lookup_only(const char *method)
{
	return !strcmp(method, "/csi.v1.Node/NodeGetVolumeStats") ||
	       !strcmp(method, "/csi.v1.Node/NodeExpandVolume");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct csi_reply reply;
	bool has_stage;
	struct csi_check_config cfg = { 0 };
	const char *method;
	int r;

	if (size < 2)
		return 0;
	method = methods[data[0] % (sizeof(methods) / sizeof(methods[0]))];
	has_stage = !(data[1] & 1);
	cfg.kubelet_root = data[1] & 2 ? "/" : "/var/lib/kubelet";
	root = data[1] & 2 ? "" : "/var/lib/kubelet";
	cfg.has_stage = has_stage;
	cfg.ops = has_stage ? &ops_full : &ops_no_stage;
	cfg.userdata = &has_stage;

	echoed = false;
	r = csi_request_check(&cfg, method, data + 2, size - 2, &reply);
	FUZZ_CHECK(memchr(reply.message, '\0', sizeof(reply.message)) != NULL);
	if (r == -EINVAL) {
		/* Refused: a code and a message saying why. */
		FUZZ_CHECK(reply.code == CSI_INVALID_ARGUMENT ||
			   reply.code == CSI_FAILED_PRECONDITION ||
			   (reply.code == CSI_NOT_FOUND && lookup_only(method)));
		FUZZ_CHECK(reply.message[0] != '\0');
	} else if (r == -ENOSYS) {
		FUZZ_CHECK(!has_stage && reply.code == CSI_UNIMPLEMENTED);
	} else if (r == -EIO) {
		/* The secret op_publish echoed never comes back (values of 4 bytes or more). */
		FUZZ_CHECK(echoed && reply.code == CSI_INTERNAL);
		if (echoed_len >= 4)
			FUZZ_CHECK(strstr(reply.message, "withheld") != NULL);
	} else {
		FUZZ_CHECK(r == 0);
	}
	return 0;
}
