/* csi-node.c - see csi-node.h. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <linux/major.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "block-map.h"
#include "crypt-volume.h"
#include "csi-node.h"
#include "csi.pb-c.h"
#include "fs-probe.h"
#include "macro.h"
#include "mount-options.h"
#include "mount-util.h"
#include "plugin.h"
#include "quota.h"

#define EXT4_SUPER_MAGIC 0xEF53
#define XFS_SUPER_MAGIC 0x58465342
#define DEFAULT_WAIT_MS 110000 /* kubelet gives a Node call about 2 minutes */
#define DEADLINE_MARGIN_MS 200 /* answer before the client gives up */

static bool reader_only(enum csi_access_mode m)
{
	return m == CSI_MODE_SINGLE_NODE_READER_ONLY || m == CSI_MODE_MULTI_NODE_READER_ONLY;
}

/* Whether the mode allows one publish target per node: every SINGLE_NODE_* mode but
 * SINGLE_NODE_MULTI_WRITER (CSI spec, NodePublishVolume: a second target is
 * FAILED_PRECONDITION for "Non MULTI_NODE_..." modes).  SINGLE_NODE_WRITER keeps its meaning
 * from before SINGLE_NODE_MULTI_WRITER was advertised: one target. */
static bool single_writer(enum csi_access_mode m)
{
	return m == CSI_MODE_SINGLE_NODE_WRITER || m == CSI_MODE_SINGLE_NODE_SINGLE_WRITER ||
	       m == CSI_MODE_SINGLE_NODE_READER_ONLY;
}

static const char *mode_name(enum csi_access_mode m)
{
	const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(
		&csi__v1__volume_capability__access_mode__mode__descriptor, (int)m);

	return v ? v->name : "UNKNOWN";
}

/* "Exceeds capabilities" (FAILED_PRECONDITION) of a stage or publish: a writer on several
 * nodes of a volume whose filesystem (ext4, xfs) lives on a device other nodes can attach too
 * (rbd).  Two nodes mounting it read-write corrupt it.  A node-local volume (PLUGIN_NODE_LOCAL:
 * a device or directory of this host) exists on this node only, so there MULTI_NODE_* means
 * several targets here; NFS is shared by design.
 * Returns 0, or -EOPNOTSUPP with reply set. */
static int check_mode_fits_volume(const struct volume_plugin *p, const struct volume_spec *spec,
				  const struct csi_volume_capability *cap, struct csi_reply *reply)
{
	if (!cap->present || (cap->access_mode != CSI_MODE_MULTI_NODE_SINGLE_WRITER &&
			      cap->access_mode != CSI_MODE_MULTI_NODE_MULTI_WRITER))
		return 0;
	/* Only a filesystem the agent itself puts on an attached device (rbd's ext4/xfs) breaks
	 * when written from several nodes; nfs is shared by design, a local volume exists on
	 * this node only, and a raw block device is the pod's to share (as ceph-csi allows). */
	if (plugin_is_node_local(p) || !plugin_has_attach(p) || spec->block)
		return 0;
	csi_reply_set(
		reply, CSI_FAILED_PRECONDITION,
		"volume_capability.access_mode: %s is not supported by %s volumes with a "
		"filesystem: it would be written from several nodes; use a SINGLE_NODE_* mode, "
		"MULTI_NODE_READER_ONLY or a block volume",
		mode_name(cap->access_mode), p->name);
	return -EOPNOTSUPP;
}

/* Adds the options of the list csv (field names it for an error) to spec, split as libmount
 * splits them: a quoted value keeps its commas (an SELinux context="..." label). */
static int add_options(struct volume_spec *spec, const char *csv, const char *field,
		       struct csi_reply *reply)
{
	char **v = NULL;
	int r = mount_options_split(csv, &v);

	if (r == -EINVAL) {
		csi_reply_set(reply, CSI_INVALID_ARGUMENT,
			      "%s: an empty option, an unclosed quote or a control character in "
			      "\"%s\"",
			      field, csv);
		return r;
	}
	for (char **o = v; r == 0 && o && *o; o++)
		r = volume_spec_add_mount_option(spec, *o);
	mount_options_free(v);
	return r;
}

/* An encrypted CSI volume's passphrase comes in the secrets (crypt-volume.h), never from a
 * file on the node that a volume_context could name. */
static int refuse_passphrase_file(const char *key, struct csi_reply *reply)
{
	if (!streq(key, CRYPT_VOLUME_ATTR_FILE))
		return 0;
	csi_reply_set(reply, CSI_INVALID_ARGUMENT,
		      "volume_context.%s: not taken over CSI; give the passphrase in "
		      "secrets." CRYPT_VOLUME_SECRET,
		      key);
	return -EINVAL;
}

/* Builds the spec a volume_context, capability and secrets describe, and finds its plugin.
 * On a bad context, answers INVALID_ARGUMENT naming the key and returns -EINVAL. */
static int spec_from_request(const char *volume_id, const struct csi_map *context,
			     const struct csi_volume_capability *cap, const struct csi_map *secrets,
			     struct volume_spec **ret_spec, const struct volume_plugin **ret_plugin,
			     struct csi_reply *reply)
{
	_cleanup_volume_spec_ struct volume_spec *spec = NULL;
	const char *type = csi_map_get(context, "type");
	struct error_info err = { 0 };

	if (!type || !*type) {
		csi_reply_set(reply, CSI_INVALID_ARGUMENT,
			      "volume_context.type: required (one of: %s)", plugin_names());
		return -EINVAL;
	}
	spec = volume_spec_new(type);
	if (!spec)
		return -ENOMEM;
	for (size_t i = 0; i < context->n; i++) {
		const struct csi_kv *kv = &context->items[i];
		int r = 0;

		/* Namespaced keys (csi.storage.k8s.io/pod.name, storage.kubernetes.io/...) are
		 * metadata kubelet and provisioners add, not plugin fields. */
		if (streq(kv->key, "type") || strchr(kv->key, '/'))
			continue;
		if (refuse_passphrase_file(kv->key, reply) < 0)
			return -EINVAL;
		if (streq(kv->key, "mountOptions"))
			r = add_options(spec, kv->value, "volume_context.mountOptions", reply);
		else
			r = volume_spec_set(spec, kv->key, kv->value);
		if (r < 0)
			return r;
	}
	/* A CSI inline ephemeral volume (kubelet says so in the context): the plugin makes a
	 * fresh volume for this publish and removes it at unpublish. */
	if (streq_ptr(csi_map_get(context, "csi.storage.k8s.io/ephemeral"), "true") &&
	    volume_spec_set(spec, "ephemeral", "true") < 0)
		return -ENOMEM;
	/* A directory per volume below basePath is named by the volume id, which the request
	 * gives, never the context. */
	if (csi_map_get(context, "basePath") &&
	    volume_spec_set(spec, "volumeId", volume_id ? volume_id : "") < 0)
		return -ENOMEM;
	if (cap->present && cap->fs_type[0] && volume_spec_set(spec, "fsType", cap->fs_type) < 0)
		return -ENOMEM;
	for (size_t i = 0; cap->present && i < cap->n_mount_flags; i++) {
		int r = add_options(spec, cap->mount_flags[i],
				    "volume_capability.mount.mount_flags", reply);

		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < secrets->n; i++)
		if (volume_spec_set_secret(spec, secrets->items[i].key, secrets->items[i].value) <
		    0)
			return -ENOMEM;
	spec->read_only = cap->present && reader_only(cap->access_mode);
	spec->block = cap->present && cap->access_type == CSI_ACCESS_BLOCK;
	if (plugin_find_for_spec(spec, ret_plugin, &err) < 0 ||
	    plugin_validate(*ret_plugin, spec, &err) < 0) {
		csi_reply_set(reply, CSI_INVALID_ARGUMENT, "volume_context.%s", err_msg(&err));
		return -EINVAL;
	}
	if (spec->block && !plugin_has_block(*ret_plugin)) {
		csi_reply_set(reply, CSI_FAILED_PRECONDITION,
			      "volume_capability.block: %s volumes have no raw block mode; ask for "
			      "a mount volume",
			      type);
		return -EOPNOTSUPP;
	}
	if (spec->block && !plugin_uses_device(*ret_plugin, spec)) {
		csi_reply_set(reply, CSI_FAILED_PRECONDITION,
			      "volume_capability.block: this %s volume is no block device (a "
			      "directory?); ask for a mount volume",
			      type);
		return -EOPNOTSUPP;
	}
	*ret_spec = TAKE_PTR(spec);
	return 0;
}

/* Appends to out (size bytes) at *len as snprintf would, counting what did not fit. */
static void appendf(char *out, size_t size, size_t *len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void appendf(char *out, size_t size, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(*len < size ? out + *len : NULL, *len < size ? size - *len : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		*len += (size_t)n;
}

/* fingerprint() into out; returns its length, which may be size or more (then cut). */
static size_t format_fingerprint(char *out, size_t size, const struct volume_spec *spec,
				 const struct csi_volume_capability *cap, bool read_only)
{
	const char *last = NULL;
	size_t len = 0;

	appendf(out, size, &len, "type=%s;ro=%d;mode=%d;", spec->type, read_only, cap->access_mode);
	if (spec->block) /* only then: a mount volume's fingerprint is as journaled before */
		appendf(out, size, &len, "block;");
	for (size_t n = 0; n < spec->n_attrs; n++) {
		const struct volume_attr *next = NULL;
		for (size_t i = 0; i < spec->n_attrs; i++) {
			const struct volume_attr *a = &spec->attrs[i];
			if ((!last || strcmp(a->key, last) > 0) &&
			    (!next || strcmp(a->key, next->key) < 0))
				next = a;
		}
		appendf(out, size, &len, "%s=%s;", next->key, next->value);
		last = next->key;
	}
	for (char **o = spec->mount_options; *o; o++)
		appendf(out, size, &len, "opt=%s;", *o);
	return len;
}

/* What the request asked, without its secrets: a repeat must ask exactly the same.  Attrs
 * come in the order of the context map, which a client may vary, so they go in key order.
 * Formatted on the stack, and once more into its own allocation if it is longer. */
static char *fingerprint(const struct volume_spec *spec, const struct csi_volume_capability *cap,
			 bool read_only)
{
	char small[1024], *buf;
	size_t len = format_fingerprint(small, sizeof(small), spec, cap, read_only);

	if (len < sizeof(small))
		return strdup(small);
	buf = malloc(len + 1);
	if (buf)
		(void)format_fingerprint(buf, len + 1, spec, cap, read_only);
	return buf;
}

static long long wait_budget(const struct timespec *deadline)
{
	long long left = csi_deadline_remaining_ms(deadline);

	if (left < 0)
		return DEFAULT_WAIT_MS;
	left -= DEADLINE_MARGIN_MS;
	return left < 50 ? 50 : left;
}

/* Maps an outcome to the answer. */
static int answer(int r, const struct volume_request_result *res, struct csi_reply *reply)
{
	/* Not the operation's error: the wait for its outcome ran out, and it goes on. */
	if (r == -ETIMEDOUT) {
		csi_reply_set(reply, CSI_ABORTED, "the operation is still in progress; call again");
		return r;
	}
	if (r < 0) {
		csi_reply_set(reply, csi_code_from_errno(r), "%s", strerror(-r));
		return r;
	}
	if (res->error == 0)
		return 0;
	csi_reply_set(reply, csi_code_from_errno(res->error), "%s",
		      res->message[0] ? res->message : strerror(-res->error));
	return res->error;
}

/* The outcome of a submitted request, on the reconciler thread or this call's own (see
 * reconciler_submit): the deferred call's answer. */
static void request_done(int r, struct volume_request_result *res, void *userdata)
{
	struct csi_deferred *d = userdata;

	csi_deferred_finish(d, answer(r, res, csi_deferred_reply(d)));
}

/* Hands req (consumed) to the reconciler.  Where the server lets the call be answered later
 * (csi_reply_defer), it is answered from the reconciler's completion and this returns
 * CSI_DEFERRED: at once when the reconciler thread takes the call, after the answer when
 * this thread ran it to completion itself (reconciler_submit).  Else it waits for it. */
static int submit(struct csi_node_config *cfg, struct volume_request *req,
		  const struct timespec *deadline, struct csi_reply *reply)
{
	struct csi_deferred *d = csi_reply_defer(reply);
	struct volume_request_result res = { 0 };
	int r;

	if (d) {
		/* d is the reconciler's from here: it may be answered and gone at once. */
		r = reconciler_submit(cfg->reconciler, req, wait_budget(deadline), request_done, d);
		if (r < 0)
			csi_deferred_finish(d, answer(r, NULL, csi_deferred_reply(d)));
		return CSI_DEFERRED;
	}
	r = reconciler_request(cfg->reconciler, req, wait_budget(deadline), &res);
	return answer(r, &res, reply);
}

static struct volume_request *new_request(enum volume_request_kind kind, const char *volume_id,
					  const char *path)
{
	struct volume_request *req = volume_request_new(kind);

	if (!req)
		return NULL;
	req->volume_id = strdup(volume_id);
	req->path = strdup(path);
	if (!req->volume_id || !req->path)
		return volume_request_free(req);
	return req;
}

/* A new request of a volume described by its context (stage, publish), with its spec and
 * plugin.  Returns 0, or a negative errno with reply set where the request is at fault. */
static int new_spec_request(enum volume_request_kind kind, const char *volume_id, const char *path,
			    const struct csi_map *volume_context,
			    const struct csi_volume_capability *capability,
			    const struct csi_map *secrets, struct csi_reply *reply,
			    struct volume_request **ret)
{
	struct volume_request *req;
	struct volume_spec *spec = NULL;
	const struct volume_plugin *plugin;
	int r = spec_from_request(volume_id, volume_context, capability, secrets, &spec, &plugin,
				  reply);

	if (r < 0)
		return r;
	r = check_mode_fits_volume(plugin, spec, capability, reply);
	if (r < 0) {
		volume_spec_unref(spec);
		return r;
	}
	req = new_request(kind, volume_id, path);
	if (!req) {
		volume_spec_unref(spec);
		return -ENOMEM;
	}
	req->spec = spec;
	req->plugin = plugin;
	*ret = req;
	return 0;
}

/* --- raw block volumes (a block capability) ---
 *
 * Staged, the device is held as a file bind-mounted in kubelet's staging dir,
 * <staging_target_path>/dev, so that the mount table shows it (adoption after a restart works
 * as for a mount) and kubelet's dir holds nothing else of ours; the staging dir itself is
 * never mounted on.  Published, the target is a file with the held device bound onto it. */

/* <staging>/dev, the held file of a block volume staged at staging.  NULL on ENOMEM. */
static char *block_held_path(const char *staging)
{
	return strdup_printf("%s/%s", staging, BLOCK_MAP_HELD_NAME);
}

/* Makes req (stage, publish) of a block volume use the held file where it names the staging
 * dir.  Returns 0 or -ENOMEM. */
static int block_request_paths(struct volume_request *req)
{
	char **p = req->kind == VOLUME_REQUEST_STAGE ? &req->path : &req->staging_path;
	char *held;

	if (!req->spec->block || !*p)
		return 0;
	held = block_held_path(*p);
	if (!held)
		return -ENOMEM;
	free(*p);
	*p = held;
	return 0;
}

/* "Volume does not exist" (NOT_FOUND) at stage for a node-local directory volume: staging it
 * mounts nothing, so without this the missing source would only show at publish.  (A
 * device's absence shows when it is staged; an NFS export's only when it is mounted.)
 * Returns 0, or -ENOENT with reply set. */
static int check_directory_source(const struct volume_request *req, struct csi_reply *reply)
{
	const char *path = volume_spec_get(req->spec, "path");
	struct stat st;

	if (!plugin_is_node_local(req->plugin) || !path ||
	    plugin_uses_device(req->plugin, req->spec))
		return 0;
	if (stat(path, &st) == 0 || (errno != ENOENT && errno != ENOTDIR))
		return 0;
	csi_reply_set(reply, CSI_NOT_FOUND, "volume_context.path: %s does not exist", path);
	return -ENOENT;
}

static int node_stage(void *userdata, const struct csi_stage_request *in, struct csi_reply *reply)
{
	struct volume_request *req;
	int r = new_spec_request(VOLUME_REQUEST_STAGE, in->volume_id, in->staging_target_path,
				 &in->volume_context, &in->capability, &in->secrets, reply, &req);

	if (r < 0)
		return r;
	r = check_directory_source(req, reply);
	if (r < 0) {
		volume_request_free(req);
		return r;
	}
	if (block_request_paths(req) < 0) {
		volume_request_free(req);
		return -ENOMEM;
	}
	req->fingerprint = fingerprint(req->spec, &in->capability, req->spec->read_only);
	if (!req->fingerprint) {
		volume_request_free(req);
		return -ENOMEM;
	}
	return submit(userdata, req, &in->deadline, reply);
}

/* Submits a new request that carries nothing but its volume and path (unstage, unpublish). */
static int submit_new(void *userdata, enum volume_request_kind kind, const char *volume_id,
		      const char *path, const struct timespec *deadline, struct csi_reply *reply)
{
	struct volume_request *req = new_request(kind, volume_id, path);

	return req ? submit(userdata, req, deadline, reply) : -ENOMEM;
}

/* NodeUnstage carries no capability: the reconciler unstages at <staging>/dev when the
 * volume is a block volume staged there (staging_path of the request), else at the staging
 * path.  One request, no lookup first. */
static int node_unstage(void *userdata, const struct csi_unstage_request *in,
			struct csi_reply *reply)
{
	struct volume_request *req =
		new_request(VOLUME_REQUEST_UNSTAGE, in->volume_id, in->staging_target_path);

	if (!req)
		return -ENOMEM;
	req->staging_path = block_held_path(in->staging_target_path);
	if (!req->staging_path) {
		volume_request_free(req);
		return -ENOMEM;
	}
	return submit(userdata, req, &in->deadline, reply);
}

/* The pod the publish is for, from kubelet's pod.* keys (podInfoOnMount).  Only those keys
 * are read: the service-account token kubelet may pass in the same map is never taken.
 * Returns 0, or -EINVAL with reply set (a value too long or with a control character). */
static int take_pod_info(const struct csi_map *context, struct pod_info *pod,
			 struct csi_reply *reply)
{
	for (size_t i = 0; i < context->n; i++) {
		struct error_info err = { 0 };
		int r = pod_info_set(pod, context->items[i].key, context->items[i].value, &err);

		if (r == -EINVAL) {
			csi_reply_set(reply, CSI_INVALID_ARGUMENT, "volume_context.%s",
				      err_msg(&err));
			return r;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

static int node_publish(void *userdata, const struct csi_publish_request *in,
			struct csi_reply *reply)
{
	struct volume_request *req;
	bool ro = in->readonly || reader_only(in->capability.access_mode);
	int r = new_spec_request(VOLUME_REQUEST_PUBLISH, in->volume_id, in->target_path,
				 &in->volume_context, &in->capability, &in->secrets, reply, &req);

	if (r < 0)
		return r;
	r = take_pod_info(&in->volume_context, &req->pod, reply);
	if (r < 0) {
		volume_request_free(req);
		return r;
	}
	req->read_only = ro;
	req->single_writer = single_writer(in->capability.access_mode);
	req->staging_path = in->staging_target_path[0] ? strdup(in->staging_target_path) : NULL;
	req->fingerprint = fingerprint(req->spec, &in->capability, ro);
	if (!req->fingerprint || (in->staging_target_path[0] && !req->staging_path) ||
	    block_request_paths(req) < 0) {
		volume_request_free(req);
		return -ENOMEM;
	}
	return submit(userdata, req, &in->deadline, reply);
}

static int node_unpublish(void *userdata, const struct csi_unpublish_request *in,
			  struct csi_reply *reply)
{
	return submit_new(userdata, VOLUME_REQUEST_UNPUBLISH, in->volume_id, in->target_path,
			  &in->deadline, reply);
}

/* Where the node has a CSI volume: whether it is known (staged or published) and whether
 * path is one of its publish targets or its staging mount. */
struct volume_place {
	bool known;
	bool at_path;
	bool uses_device; /* it has a device of its own (mounted at its staging path) */
	bool block;	  /* a raw block volume */
	char plugin[32];
	char device_path[256]; /* its device, when it is attached and held */
};

/* What the reconciler knows of volume_id and whether path is where it is staged or published:
 * one lookup on its thread, not a snapshot of the whole state.  Returns 0 with ret filled, or
 * the answer's negative errno with reply set. */
static int volume_lookup(struct csi_node_config *cfg, const char *volume_id, const char *path,
			 const struct timespec *deadline, struct volume_place *ret,
			 struct csi_reply *reply)
{
	struct volume_request *req = new_request(VOLUME_REQUEST_INFO, volume_id, path);
	struct volume_request_result res = { 0 };
	int r;

	*ret = (struct volume_place){ 0 };
	if (!req)
		return -ENOMEM;
	r = reconciler_request(cfg->reconciler, req, wait_budget(deadline), &res);
	if (r < 0 || res.error < 0)
		return answer(r, &res, reply);
	ret->known = res.known;
	ret->at_path = res.at_path;
	ret->uses_device = res.uses_device;
	ret->block = res.block;
	snprintf(ret->plugin, sizeof(ret->plugin), "%s", res.plugin);
	if (res.device_mounted)
		snprintf(ret->device_path, sizeof(ret->device_path), "%s", res.device_path);
	return 0;
}

/* NOT_FOUND unless the volume of place (looked up) is known and path is where it is
 * published or staged. */
static int require_place(const struct volume_place *ret, const char *volume_id, const char *path,
			 struct csi_reply *reply)
{
	if (!ret->known) {
		csi_reply_set(reply, CSI_NOT_FOUND,
			      "volume %s is not staged or published on this node", volume_id);
		return -ENOENT;
	}
	if (!ret->at_path) {
		csi_reply_set(reply, CSI_NOT_FOUND, "volume %s is not published or staged at %s",
			      volume_id, path);
		return -ENOENT;
	}
	return 0;
}

/* require_place() of a fresh lookup. */
static int require_volume_at(struct csi_node_config *cfg, const char *volume_id, const char *path,
			     const struct timespec *deadline, struct volume_place *ret,
			     struct csi_reply *reply)
{
	int r = volume_lookup(cfg, volume_id, path, deadline, ret, reply);

	return r < 0 ? r : require_place(ret, volume_id, path, reply);
}

/* --- raw block volumes: unstage, stats, expand --- */

/* NodeGetVolumeStats of a block volume: only the device's total bytes (the spec allows
 * nothing else for block). */
static int block_stats(const char *path, struct csi_reply *reply)
{
	struct error_info err = { 0 };
	uint64_t bytes;
	int r = block_map_size(path, &bytes, &err);

	reply->has_condition = true;
	if (r < 0) {
		reply->abnormal = true;
		snprintf(reply->condition_message, sizeof(reply->condition_message), "%s",
			 err_msg(&err));
		return 0;
	}
	snprintf(reply->condition_message, sizeof(reply->condition_message), "block device");
	reply->bytes = (struct csi_usage){ .valid = true, .total = (long long)bytes };
	return 0;
}

/* NodeExpandVolume of a block volume: nothing to resize, the kernel re-reads the device's
 * size (a loop device is told to) and it is reported. */
static int block_expand(const struct csi_expand_request *in, struct csi_reply *reply)
{
	struct error_info err = { 0 };
	uint64_t bytes;
	int r = block_map_reread_size(in->volume_path, &bytes, &err);

	if (r < 0) {
		csi_reply_set(reply, csi_code_from_errno(r), "%s", err_msg(&err));
		return r;
	}
	if (in->required_bytes > 0 && (uint64_t)in->required_bytes > bytes) {
		csi_reply_set(reply, CSI_OUT_OF_RANGE,
			      "volume %s: the device has %llu bytes, fewer than the %lld asked",
			      in->volume_id, (unsigned long long)bytes, in->required_bytes);
		return -ERANGE;
	}
	reply->capacity_bytes = (long long)bytes;
	return 0;
}

/* Whether path, not followed if it is a symlink, is the block device of a raw block volume
 * whose device is device_path: a device node, or a file with one bound over it (kubelet's
 * bind of the published file at volumeDevices/<pv>/dev/<pod uid>), of that device number, or
 * of a loop device over it (the read-only loop a read-only publish binds).  Nothing is
 * judged by the path's shape. */
static bool is_volume_device(const char *path, const char *device_path)
{
	struct loop_info64 info;
	struct stat st, dev;
	int fd;
	bool same;

	if (!device_path[0] || lstat(path, &st) < 0 || !S_ISBLK(st.st_mode) ||
	    stat(device_path, &dev) < 0 || !S_ISBLK(dev.st_mode))
		return false;
	if (st.st_rdev == dev.st_rdev)
		return true;
	if (major(st.st_rdev) != LOOP_MAJOR)
		return false;
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	same = ioctl(fd, LOOP_GET_STATUS64, &info) == 0 && info.lo_rdevice == dev.st_rdev;
	close(fd);
	return same;
}

/* An encrypted raw block volume's device is its mapping: grown to its device first
 * (crypt-volume.h; nothing to do for any other device). */
static int grow_mapping(const struct volume_request_result *info, struct csi_reply *reply)
{
	struct error_info err = { 0 };
	int r = crypt_volume_grow(info->device_path, &err);

	if (r < 0)
		csi_reply_set(reply, csi_code_from_errno(r), "%s", err_msg(&err));
	return r;
}

/* Whether path is a block device node (a published or staged block volume). */
static bool is_block_node(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISBLK(st.st_mode);
}

/* A directory with a size (a project quota, lib/quota.h): the limit is the total and the
 * project's usage the used bytes and inodes; the filesystem's free space caps what is
 * available. */
static void quota_stats(const char *path, struct csi_reply *reply)
{
	struct quota_usage q;
	long long avail;

	if (quota_prj_dir_usage_at(path, &q) <= 0)
		return;
	avail = q.bytes_used >= q.bytes_limit ? 0 : (long long)(q.bytes_limit - q.bytes_used);
	if (avail > reply->bytes.available)
		avail = reply->bytes.available;
	reply->bytes = (struct csi_usage){ true, avail, (long long)q.bytes_limit,
					   (long long)q.bytes_used };
	reply->inodes.used = (long long)q.inodes_used;
	if (q.inodes_limit) {
		reply->inodes.total = (long long)q.inodes_limit;
		reply->inodes.available = q.inodes_used >= q.inodes_limit
						  ? 0
						  : (long long)(q.inodes_limit - q.inodes_used);
	}
}

static int node_get_volume_stats(void *userdata, const struct csi_stats_request *in,
				 struct csi_reply *reply)
{
	struct csi_node_config *cfg = userdata;
	struct fs_probe_result res;
	struct volume_place place;
	struct stat st;
	int r;

	/* Kubelet asks for a raw block volume at its own bind of the published file
	 * (volumeDevices/<pv>/dev/<pod uid>, csi_block.go), a path the agent never published:
	 * answered where the path holds the volume's device. */
	r = volume_lookup(cfg, in->volume_id, in->volume_path, &in->deadline, &place, reply);
	if (r < 0)
		return r;
	if (place.known && !place.at_path && place.block &&
	    is_volume_device(in->volume_path, place.device_path))
		return block_stats(in->volume_path, reply);
	r = require_place(&place, in->volume_id, in->volume_path, reply);
	if (r < 0)
		return r;
	if (lstat(in->volume_path, &st) < 0 && errno == ENOENT) {
		csi_reply_set(reply, CSI_NOT_FOUND, "volume_path %s does not exist",
			      in->volume_path);
		return -ENOENT;
	}
	if (is_block_node(in->volume_path))
		return block_stats(in->volume_path, reply);
	r = fs_probe(in->volume_path, cfg->stats_timeout_ms, &res);
	reply->has_condition = true;
	if (r == -ETIMEDOUT || r == -EAGAIN) {
		reply->abnormal = true;
		snprintf(reply->condition_message, sizeof(reply->condition_message),
			 "statfs of %s did not answer within %d ms (is the server reachable?)",
			 in->volume_path, cfg->stats_timeout_ms);
		return 0;
	}
	if (r < 0)
		return r;
	if (res.error < 0) {
		reply->abnormal = true;
		snprintf(reply->condition_message, sizeof(reply->condition_message),
			 "%s is broken: %s", in->volume_path, strerror(-res.error));
		return 0;
	}
	if (!res.mount_root) {
		reply->abnormal = true;
		snprintf(reply->condition_message, sizeof(reply->condition_message),
			 "%s is not mounted", in->volume_path);
	} else {
		snprintf(reply->condition_message, sizeof(reply->condition_message), "mounted");
	}
	reply->bytes = (struct csi_usage){ true, (long long)res.bytes_available,
					   (long long)res.bytes_total, (long long)res.bytes_used };
	reply->inodes = (struct csi_usage){ true, (long long)res.inodes_available,
					    (long long)res.inodes_total,
					    (long long)res.inodes_used };
	if (quota_fs_type_has_projects(res.fs_type))
		quota_stats(in->volume_path, reply);
	return 0;
}

/* NodeExpandVolume of a volume with no filesystem of ours to grow: a directory shares its
 * host's filesystem (a sized one gets its project quota raised by its plugin) and an NFS
 * export is grown on its server (peer drivers answer OK too).  The capacity is reported when
 * it is known.  Returns 0 (OK), or the plugin's failure to raise a quota. */
static int expand_nothing_to_grow(struct csi_node_config *cfg, const struct csi_expand_request *in,
				  const struct volume_place *place, struct csi_reply *reply)
{
	const struct volume_plugin *p = plugin_find_by_name(place->plugin);
	struct fs_probe_result fs;

	if (plugin_is_node_local(p)) {
		/* A directory of this host: a size (project quota) is raised by the plugin; one
		 * without has no capacity of its own (0). */
		struct error_info err = { 0 };
		unsigned long long capacity = 0;
		int r = plugin_has_expand(p)
				? plugin_expand(p, NULL, NULL, in->volume_path,
						in->required_bytes > 0
							? (unsigned long long)in->required_bytes
							: 0,
						&capacity, &err)
				: 0;

		if (r < 0) {
			csi_reply_set(reply, csi_code_from_errno(r), "%s", err_msg(&err));
			return r;
		}
		reply->capacity_bytes = (long long)capacity;
		return 0;
	}
	if (fs_probe(in->volume_path, cfg->stats_timeout_ms, &fs) == 0 && fs.error == 0 &&
	    fs.mount_root)
		reply->capacity_bytes = (long long)fs.bytes_total;
	return 0;
}

/* "Exceeds capabilities" (INVALID_ARGUMENT) of NodeExpandVolume: a capability whose access
 * mode is not the one the volume was staged (or published) with.  Returns 0, or -EINVAL with
 * reply set. */
static int check_expand_capability(const struct csi_expand_request *in,
				   const struct volume_request_result *info,
				   struct csi_reply *reply)
{
	if (!in->capability.present || info->access_mode < 0 ||
	    (int)in->capability.access_mode == info->access_mode)
		return 0;
	csi_reply_set(reply, CSI_INVALID_ARGUMENT,
		      "volume_capability.access_mode: %s, but volume %s is used as %s",
		      mode_name(in->capability.access_mode), in->volume_id,
		      mode_name((enum csi_access_mode)info->access_mode));
	return -EINVAL;
}

static int node_expand(void *userdata, const struct csi_expand_request *in, struct csi_reply *reply)
{
	struct csi_node_config *cfg = userdata;
	struct volume_request *req =
		new_request(VOLUME_REQUEST_INFO, in->volume_id, in->volume_path);
	struct volume_request_result info = { 0 };
	const struct volume_plugin *p;
	struct error_info err = { 0 };
	unsigned long long capacity = 0;
	struct volume_place place;
	int r;

	if (!req)
		return -ENOMEM;
	r = reconciler_request(cfg->reconciler, req, wait_budget(&in->deadline), &info);
	if (r < 0)
		return answer(r, &info, reply);
	if (!info.known) {
		csi_reply_set(reply, CSI_NOT_FOUND,
			      "volume %s is not staged or published on this node", in->volume_id);
		return -ENOENT;
	}
	r = require_volume_at(cfg, in->volume_id, in->volume_path, &in->deadline, &place, reply);
	if (r < 0)
		return r;
	r = check_expand_capability(in, &info, reply);
	if (r < 0)
		return r;
	if (is_block_node(in->volume_path)) {
		r = grow_mapping(&info, reply);
		return r < 0 ? r : block_expand(in, reply);
	}
	/* The plugin grows it (its expand op); the CSI call knows the device and the path. */
	p = plugin_find_by_name(info.plugin);
	if (!place.uses_device || !plugin_has_expand(p))
		return expand_nothing_to_grow(cfg, in, &place, reply);
	if (!info.device_mounted) {
		csi_reply_set(
			reply, CSI_FAILED_PRECONDITION,
			"volume %s: its device is not mounted at its staging path; stage it first",
			in->volume_id);
		return -EOPNOTSUPP;
	}
	r = plugin_expand(p, NULL, info.device_path[0] ? info.device_path : NULL, in->volume_path,
			  in->required_bytes > 0 ? (unsigned long long)in->required_bytes : 0,
			  &capacity, &err);
	if (r < 0) {
		csi_reply_set(reply, csi_code_from_errno(r), "%s", err_msg(&err));
		return r;
	}
	reply->capacity_bytes = (long long)capacity;
	return 0;
}

const struct csi_node_ops csi_node_ops = {
	.stage = node_stage,
	.unstage = node_unstage,
	.publish = node_publish,
	.unpublish = node_unpublish,
	.get_volume_stats = node_get_volume_stats,
	.expand = node_expand,
	.single_node_multi_writer = true,
};
