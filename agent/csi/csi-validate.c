/* csi-validate.c - the pure checks of CSI Node requests.  See csi-validate.h.  Golden tests:
 * tests/files/csi-requests/ -> tests/expected/csi-requests/ (tests/test-csi-validate.c). */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "csi-validate.h"
#include "macro.h"

/* Sets v's code and message (printf arguments); false, so that a check can
 * `return refuse(...)`. */
#define refuse(v, c, ...) \
	((v)->code = (c), snprintf((v)->message, sizeof((v)->message), __VA_ARGS__), false)

static bool empty(const char *s)
{
	return !s || !*s;
}

bool csi_path_normalized(const char *p)
{
	if (p[0] != '/')
		return false;
	if (streq(p, "/"))
		return true;
	for (const char *c = p + 1;;) {
		const char *slash = strchr(c, '/');
		size_t len = slash ? (size_t)(slash - c) : strlen(c);

		if (len == 0 || (len == 1 && c[0] == '.') ||
		    (len == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!slash)
			return true;
		c = slash + 1;
	}
}

/* A required string field that was not sent. */
static bool require(struct csi_verdict *v, const char *field, const char *value)
{
	return empty(value) ? refuse(v, CSI_INVALID_ARGUMENT, "%s: required", field) : true;
}

static bool check_volume_id(struct csi_verdict *v, const char *id)
{
	if (strlen(id) > CSI_VOLUME_ID_MAX)
		return refuse(v, CSI_INVALID_ARGUMENT, "volume_id: longer than %d bytes",
			      CSI_VOLUME_ID_MAX);
	return true;
}

/* Whether path (below the kubelet root, checked) lies in one of the dirs kubelet hands to CSI
 * drivers: <root>/pods/ (publish targets) and <root>/plugins/ (staging paths, raw block
 * files).  Its other dirs (pki, plugins_registry, pod-resources, its checkpoints) are never
 * a driver's to mount on or unmount. */
static bool check_csi_dir(const struct csi_validate_config *cfg, struct csi_verdict *v,
			  enum csi_code code, const char *field, const char *path)
{
	const char *rel = path + strlen(cfg->kubelet_root) + 1;

	if ((strncmp(rel, "pods/", 5) == 0 && rel[5]) ||
	    (strncmp(rel, "plugins/", 8) == 0 && rel[8]))
		return true;
	return refuse(v, code,
		      "%s: %s is not in %s/pods/ or %s/plugins/, the dirs kubelet gives "
		      "CSI drivers",
		      field, path, cfg->kubelet_root, cfg->kubelet_root);
}

/* The lexical path rules; an absent path passes (presence is checked first).  A path that
 * breaks them is answered with code. */
static bool check_path(const struct csi_validate_config *cfg, struct csi_verdict *v,
		       enum csi_code code, const char *field, const char *path)
{
	const char *root = cfg->kubelet_root;
	size_t rl = strlen(root);

	if (empty(path))
		return true;
	if (strlen(path) >= PATH_MAX)
		return refuse(v, code, "%s: longer than PATH_MAX", field);
	for (const char *c = path; *c; c++)
		if ((unsigned char)*c < 0x20)
			return refuse(v, code, "%s: control character in path", field);
	if (path[0] != '/')
		return refuse(v, code, "%s: %s is not an absolute path", field, path);
	if (!csi_path_normalized(path))
		return refuse(v, code,
			      "%s: %s is not normalized (empty, \".\" or \"..\" component)", field,
			      path);
	if (strncmp(path, root, rl) != 0 || path[rl] != '/' || path[rl + 1] == '\0')
		return refuse(v, code, "%s: %s is not under the kubelet root %s", field, path,
			      rl ? root : "/");
	return check_csi_dir(cfg, v, code, field, path);
}

/* The layout protobuf-c gives every map<string, string> entry. */
struct pb_map_entry {
	ProtobufCMessage base;
	char *key;
	char *value;
};

/* A map within the spec's 4 KiB, keys and values together.  Only lengths are read: nothing
 * of an oversized request is copied before it is refused. */
static bool check_map(struct csi_verdict *v, const char *field, size_t n, void *const *entries)
{
	size_t total = 0;

	for (size_t i = 0; i < n; i++) {
		const struct pb_map_entry *e = entries[i];

		total += (e->key ? strlen(e->key) : 0) + (e->value ? strlen(e->value) : 0);
		if (total > CSI_MAP_MAX)
			return refuse(v, CSI_INVALID_ARGUMENT,
				      "%s: more than %d bytes of keys and values (the CSI spec's "
				      "limit for a map)",
				      field, CSI_MAP_MAX);
	}
	return true;
}

#define CHECK_MAP(v, r, field) check_map(v, #field, (r)->n_##field, (void *const *)(r)->field)

/* The three maps of a stage or publish request. */
#define CHECK_MAPS(v, r)                                                 \
	(CHECK_MAP(v, r, publish_context) && CHECK_MAP(v, r, secrets) && \
	 CHECK_MAP(v, r, volume_context))

static bool check_capability(struct csi_verdict *v, const Csi__V1__VolumeCapability *cap)
{
	if (!cap)
		return true;
	if (cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT && cap->mount) {
		size_t total = 0;

		if (cap->mount->fs_type && strlen(cap->mount->fs_type) > CSI_STRING_MAX)
			return refuse(v, CSI_INVALID_ARGUMENT,
				      "volume_capability.mount.fs_type: longer than %d bytes",
				      CSI_STRING_MAX);
		for (size_t i = 0; i < cap->mount->n_mount_flags; i++) {
			total += strlen(cap->mount->mount_flags[i]);
			if (total > CSI_MOUNT_FLAGS_MAX)
				return refuse(v, CSI_INVALID_ARGUMENT,
					      "volume_capability.mount.mount_flags: more than %d "
					      "bytes in all",
					      CSI_MOUNT_FLAGS_MAX);
		}
	}
	if (cap->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK &&
	    cap->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT)
		return refuse(v, CSI_INVALID_ARGUMENT,
			      "volume_capability.access_type: required (block or mount)");
	if (!cap->access_mode)
		return refuse(v, CSI_INVALID_ARGUMENT, "volume_capability.access_mode: required");
	if ((int)cap->access_mode->mode <= 0 ||
	    (int)cap->access_mode->mode >
		    CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER)
		return refuse(v, CSI_INVALID_ARGUMENT,
			      "volume_capability.access_mode.mode: unknown mode %d",
			      (int)cap->access_mode->mode);
	return true;
}

static void set_paths(struct csi_request_info *info, const char *f0, const char *p0, const char *f1,
		      const char *p1)
{
	info->path_field[0] = f0;
	info->path[0] = p0;
	info->path_field[1] = f1;
	info->path[1] = p1;
}

bool csi_validate_stage(const struct csi_validate_config *cfg, const ProtobufCMessage *msg,
			struct csi_request_info *info, struct csi_verdict *v)
{
	const Csi__V1__NodeStageVolumeRequest *r = (const void *)msg;

	*info = (struct csi_request_info){ .volume_id = r->volume_id };
	set_paths(info, "staging_target_path", r->staging_target_path, NULL, NULL);
	if (!require(v, "volume_id", r->volume_id) ||
	    !require(v, "staging_target_path", r->staging_target_path))
		return false;
	if (!r->volume_capability)
		return refuse(v, CSI_INVALID_ARGUMENT, "volume_capability: required");
	return check_volume_id(v, r->volume_id) &&
	       check_path(cfg, v, CSI_INVALID_ARGUMENT, "staging_target_path",
			  r->staging_target_path) &&
	       check_capability(v, r->volume_capability) && CHECK_MAPS(v, r);
}

bool csi_validate_unstage(const struct csi_validate_config *cfg, const ProtobufCMessage *msg,
			  struct csi_request_info *info, struct csi_verdict *v)
{
	const Csi__V1__NodeUnstageVolumeRequest *r = (const void *)msg;

	*info = (struct csi_request_info){ .volume_id = r->volume_id };
	set_paths(info, "staging_target_path", r->staging_target_path, NULL, NULL);
	return require(v, "volume_id", r->volume_id) &&
	       require(v, "staging_target_path", r->staging_target_path) &&
	       check_volume_id(v, r->volume_id) &&
	       check_path(cfg, v, CSI_INVALID_ARGUMENT, "staging_target_path",
			  r->staging_target_path);
}

/* Whether kubelet marks the publish as a CSI inline ephemeral volume. */
static bool publish_is_ephemeral(const Csi__V1__NodePublishVolumeRequest *r)
{
	for (size_t i = 0; i < r->n_volume_context; i++)
		if (r->volume_context[i]->key &&
		    !strcmp(r->volume_context[i]->key, "csi.storage.k8s.io/ephemeral"))
			return r->volume_context[i]->value &&
			       !strcmp(r->volume_context[i]->value, "true");
	return false;
}

bool csi_validate_publish(const struct csi_validate_config *cfg, const ProtobufCMessage *msg,
			  struct csi_request_info *info, struct csi_verdict *v)
{
	const Csi__V1__NodePublishVolumeRequest *r = (const void *)msg;

	*info = (struct csi_request_info){ .volume_id = r->volume_id };
	set_paths(info, "target_path", r->target_path, "staging_target_path",
		  r->staging_target_path);
	if (!require(v, "volume_id", r->volume_id) || !require(v, "target_path", r->target_path))
		return false;
	if (!r->volume_capability)
		return refuse(v, CSI_INVALID_ARGUMENT, "volume_capability: required");
	if (!check_volume_id(v, r->volume_id) ||
	    !check_path(cfg, v, CSI_INVALID_ARGUMENT, "target_path", r->target_path) ||
	    !check_path(cfg, v, CSI_INVALID_ARGUMENT, "staging_target_path",
			r->staging_target_path) ||
	    !check_capability(v, r->volume_capability) || !CHECK_MAPS(v, r))
		return false;
	/* CSI: with STAGE_UNSTAGE_VOLUME advertised, a missing staging path is a
	 * FAILED_PRECONDITION (the volume cannot have been staged), not an INVALID_ARGUMENT;
	 * except for an inline ephemeral volume, which is never staged. */
	if (cfg->has_stage && empty(r->staging_target_path) && !publish_is_ephemeral(r))
		return refuse(v, CSI_FAILED_PRECONDITION,
			      "staging_target_path: required, the driver has STAGE_UNSTAGE_VOLUME");
	return true;
}

bool csi_validate_unpublish(const struct csi_validate_config *cfg, const ProtobufCMessage *msg,
			    struct csi_request_info *info, struct csi_verdict *v)
{
	const Csi__V1__NodeUnpublishVolumeRequest *r = (const void *)msg;

	*info = (struct csi_request_info){ .volume_id = r->volume_id };
	set_paths(info, "target_path", r->target_path, NULL, NULL);
	return require(v, "volume_id", r->volume_id) && require(v, "target_path", r->target_path) &&
	       check_volume_id(v, r->volume_id) &&
	       check_path(cfg, v, CSI_INVALID_ARGUMENT, "target_path", r->target_path);
}

/* A volume_path that cannot hold a published volume: no volume is found there. */
static bool check_lookup_path(const struct csi_validate_config *cfg, struct csi_verdict *v,
			      const char *path)
{
	if (check_path(cfg, v, CSI_NOT_FOUND, "volume_path", path))
		return true;
	snprintf(v->message + strlen(v->message), sizeof(v->message) - strlen(v->message),
		 "; no volume is published there");
	return false;
}

bool csi_validate_stats(const struct csi_validate_config *cfg, const ProtobufCMessage *msg,
			struct csi_request_info *info, struct csi_verdict *v)
{
	const Csi__V1__NodeGetVolumeStatsRequest *r = (const void *)msg;

	*info = (struct csi_request_info){ .volume_id = r->volume_id, .stats_slot = true };
	set_paths(info, "volume_path", r->volume_path, "staging_target_path",
		  r->staging_target_path);
	return require(v, "volume_id", r->volume_id) && require(v, "volume_path", r->volume_path) &&
	       check_volume_id(v, r->volume_id) &&
	       check_path(cfg, v, CSI_INVALID_ARGUMENT, "staging_target_path",
			  r->staging_target_path) &&
	       check_lookup_path(cfg, v, r->volume_path);
}

bool csi_validate_expand(const struct csi_validate_config *cfg, const ProtobufCMessage *msg,
			 struct csi_request_info *info, struct csi_verdict *v)
{
	const Csi__V1__NodeExpandVolumeRequest *r = (const void *)msg;

	*info = (struct csi_request_info){ .volume_id = r->volume_id };
	set_paths(info, "volume_path", r->volume_path, "staging_target_path",
		  r->staging_target_path);
	if (!require(v, "volume_id", r->volume_id) || !require(v, "volume_path", r->volume_path) ||
	    !check_volume_id(v, r->volume_id) ||
	    !check_path(cfg, v, CSI_INVALID_ARGUMENT, "staging_target_path",
			r->staging_target_path) ||
	    !check_capability(v, r->volume_capability) || !CHECK_MAP(v, r, secrets))
		return false;
	if (r->capacity_range) {
		int64_t req = r->capacity_range->required_bytes;
		int64_t lim = r->capacity_range->limit_bytes;

		if (req < 0)
			return refuse(v, CSI_INVALID_ARGUMENT,
				      "capacity_range.required_bytes: negative");
		if (lim < 0)
			return refuse(v, CSI_INVALID_ARGUMENT,
				      "capacity_range.limit_bytes: negative");
		if (lim && req > lim)
			return refuse(v, CSI_INVALID_ARGUMENT,
				      "capacity_range.limit_bytes: below required_bytes");
	}
	return check_lookup_path(cfg, v, r->volume_path);
}
