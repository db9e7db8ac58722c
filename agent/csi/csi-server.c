/* csi-server.c - the CSI Identity and Node services over grpc-core.  See csi-server.h.
 *
 * Threads: the grpc-core queue thread runs the handlers below: it decodes, validates what
 * needs no file system access, claims the volume's in-flight slot and queues a job; the
 * cheap RPCs are answered right there.  CSI workers take jobs, check the paths on disk, call
 * the backend op, release the slot and answer.  s->lock guards the job queue, the in-flight
 * set and the draining flags; it is never held across an op or a gRPC call. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "csi.pb-c.h"

#include "csi-server.h"
#include "unix-socket.h"
#include "grpc-core.h"
#include "log.h"
#include "macro.h"
#include "registration.h"

#define VOLUME_ID_MAX 4096
/* Secret values shorter than this cannot be told apart from ordinary words in a message. */
#define SECRET_SCRUB_MIN 4
#define HARD_STOP_MS 2000
#define REGISTRATION_GRACE_MS 1000

enum rpc {
	RPC_GET_PLUGIN_INFO,
	RPC_GET_PLUGIN_CAPABILITIES,
	RPC_PROBE,
	RPC_NODE_GET_CAPABILITIES,
	RPC_NODE_GET_INFO,
	RPC_STAGE,
	RPC_UNSTAGE,
	RPC_PUBLISH,
	RPC_UNPUBLISH,
	RPC_STATS,
	RPC_EXPAND,
	RPC_COUNT,
};

struct rpc_desc {
	const char *path;
	const char *name;
	const ProtobufCMessageDescriptor *request;
	bool worker; /* goes to a CSI worker */
};

static const struct rpc_desc rpcs[RPC_COUNT] = {
    [RPC_GET_PLUGIN_INFO] = {"/csi.v1.Identity/GetPluginInfo", "GetPluginInfo",
			     &csi__v1__get_plugin_info_request__descriptor, false},
    [RPC_GET_PLUGIN_CAPABILITIES] = {"/csi.v1.Identity/GetPluginCapabilities",
				     "GetPluginCapabilities",
				     &csi__v1__get_plugin_capabilities_request__descriptor, false},
    [RPC_PROBE] = {"/csi.v1.Identity/Probe", "Probe", &csi__v1__probe_request__descriptor, false},
    [RPC_NODE_GET_CAPABILITIES] = {"/csi.v1.Node/NodeGetCapabilities", "NodeGetCapabilities",
				   &csi__v1__node_get_capabilities_request__descriptor, false},
    [RPC_NODE_GET_INFO] = {"/csi.v1.Node/NodeGetInfo", "NodeGetInfo",
			   &csi__v1__node_get_info_request__descriptor, false},
    [RPC_STAGE] = {"/csi.v1.Node/NodeStageVolume", "NodeStageVolume",
		   &csi__v1__node_stage_volume_request__descriptor, true},
    [RPC_UNSTAGE] = {"/csi.v1.Node/NodeUnstageVolume", "NodeUnstageVolume",
		     &csi__v1__node_unstage_volume_request__descriptor, true},
    [RPC_PUBLISH] = {"/csi.v1.Node/NodePublishVolume", "NodePublishVolume",
		     &csi__v1__node_publish_volume_request__descriptor, true},
    [RPC_UNPUBLISH] = {"/csi.v1.Node/NodeUnpublishVolume", "NodeUnpublishVolume",
		       &csi__v1__node_unpublish_volume_request__descriptor, true},
    [RPC_STATS] = {"/csi.v1.Node/NodeGetVolumeStats", "NodeGetVolumeStats",
		   &csi__v1__node_get_volume_stats_request__descriptor, true},
    [RPC_EXPAND] = {"/csi.v1.Node/NodeExpandVolume", "NodeExpandVolume",
		    &csi__v1__node_expand_volume_request__descriptor, true},
};

/* Every protobuf-c map entry has this layout. */
struct pb_map_entry {
	ProtobufCMessage base;
	char *key;
	char *value;
};

struct inflight {
	struct inflight *next;
	char *volume_id;
	bool stats;
};

/* A Node request on its way from the queue thread to a worker and back. */
struct job {
	struct job *next;
	enum rpc rpc;
	struct gcore_call *call;
	ProtobufCMessage *msg;
	const char *volume_id; /* in msg */
	bool stats_slot;
	struct timespec deadline; /* {0, 0}: none */
	/* Paths to check on disk before the op: field name and value. */
	const char *path_field[2];
	const char *path[2];
};

struct method_ctx {
	struct csi_server *s;
	enum rpc rpc;
};

struct csi_server {
	char *socket_path;
	char *driver_name;
	char *node_id;
	char *kubelet_root; /* without trailing '/'; "" for "/" */
	gid_t gid;
	long long max_volumes_per_node;
	int n_workers;
	int grace_ms;
	bool registration;
	const struct csi_node_ops *ops;
	void *userdata;

	struct gcore *g;
	struct registration *reg;
	struct method_ctx ctx[RPC_COUNT];
	_Atomic bool ready;
	_Atomic bool stopping;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct job *queue_head, *queue_tail;
	struct inflight *inflight;
	bool draining;	   /* past the grace: queued jobs get UNAVAILABLE */
	bool workers_stop; /* workers exit once the queue is empty */
	pthread_t *workers;
	int n_started;
	bool started;
	bool leaked;
};

/* --- small helpers --------------------------------------------------------------------- */

long long csi_deadline_remaining_ms(const struct timespec *deadline)
{
	struct timespec now;
	long long ms;

	if (!deadline || (deadline->tv_sec == 0 && deadline->tv_nsec == 0))
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (long long)(deadline->tv_sec - now.tv_sec) * 1000 +
	     (deadline->tv_nsec - now.tv_nsec) / 1000000;
	return ms > 0 ? ms : 0;
}

const char *csi_map_get(const struct csi_map *map, const char *key)
{
	for (size_t i = 0; map && i < map->n; i++)
		if (streq(map->items[i].key, key))
			return map->items[i].value;
	return NULL;
}

enum csi_code csi_code_from_errno(int negative_errno)
{
	switch (-negative_errno) {
	case 0:
		return CSI_OK;
	case ENOENT:
		return CSI_NOT_FOUND;
	case EINVAL:
		return CSI_INVALID_ARGUMENT;
	case EEXIST:
		return CSI_ALREADY_EXISTS;
	case EAGAIN:
	case EBUSY:
		return CSI_ABORTED;
	case ETIMEDOUT:
		return CSI_DEADLINE_EXCEEDED;
	case EOPNOTSUPP:
		return CSI_FAILED_PRECONDITION;
	case ERANGE:
	case EFBIG:
		return CSI_OUT_OF_RANGE;
	case ENOSPC:
		return CSI_RESOURCE_EXHAUSTED;
	case EPERM:
	case EACCES:
		return CSI_PERMISSION_DENIED;
	case ENOSYS:
		return CSI_UNIMPLEMENTED;
	case ESHUTDOWN:
		return CSI_UNAVAILABLE;
	default:
		return CSI_INTERNAL;
	}
}

int csi_endpoint_parse(const char *endpoint, char **ret_path, struct error_info *err)
{
	const char *p;

	if (!endpoint || !*endpoint)
		return err_set(err, -EINVAL, "CSI endpoint: empty");
	if (startswith(endpoint, "unix://"))
		p = endpoint + strlen("unix://");
	else if (startswith(endpoint, "unix:"))
		p = endpoint + strlen("unix:");
	else
		p = endpoint;
	if (p[0] != '/')
		return err_set(err, -EINVAL,
			       "CSI endpoint %s: want unix:///absolute/path or an absolute path",
			       endpoint);
	if (strlen(p) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return err_set(err, -ENAMETOOLONG, "CSI endpoint %s: socket path too long",
			       endpoint);
	*ret_path = strdup(p);
	if (!*ret_path)
		return err_set(err, -ENOMEM, "out of memory");
	return 0;
}

const char *csi_endpoint_from_env_or(const char *def)
{
	const char *e = getenv("CSI_ENDPOINT");

	return e && *e ? e : def;
}

char *csi_default_endpoint(const char *kubelet_root, const char *driver_name)
{
	const char *root = kubelet_root ? kubelet_root : CSI_DEFAULT_KUBELET_ROOT;

	return strdup_printf("unix://%s/plugins/%s/csi.sock", streq(root, "/") ? "" : root,
			     driver_name);
}

/* CSI: at most 63 characters, alphanumeric at both ends, [-._a-zA-Z0-9] between. */
static bool driver_name_valid(const char *n)
{
	size_t len = strlen(n);

	if (len == 0 || len > 63 || !isalnum((unsigned char)n[0]) ||
	    !isalnum((unsigned char)n[len - 1]))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)n[i]) && !strchr("-._", n[i]))
			return false;
	return true;
}

/* An absolute path with no empty, "." or ".." component and no trailing '/'. */
static bool path_normalized(const char *p)
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

static int mkdir_parents(const char *path, mode_t mode)
{
	_cleanup_free_ char *p = strdup(path);

	if (!p)
		return -ENOMEM;
	for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdir(p, mode) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	return 0;
}

/* --- answers ----------------------------------------------------------------------------- */

static void reply_message(struct gcore_call *call, const ProtobufCMessage *msg)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	_cleanup_free_ uint8_t *buf = malloc(len ? len : 1);

	if (!buf) {
		gcore_call_fail(call, GCORE_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	protobuf_c_message_pack(msg, buf);
	gcore_call_reply(call, buf, len);
}

/* Answers a Node call with an error, logging it once (the handler boundary). */
static void fail_call(struct gcore_call *call, enum rpc rpc, const char *volume_id, int code,
		      const char *message)
{
	enum log_level lvl =
	    (code == CSI_ABORTED || code == CSI_UNAVAILABLE || code == CSI_DEADLINE_EXCEEDED)
		? LOG_LVL_INFO
		: LOG_LVL_WARNING;

	log_event(lvl, NULL, "CSI call failed", "method", rpcs[rpc].name, "volume",
		  volume_id ? volume_id : "", "code", gcore_status_name(code), "error", message,
		  (char *)NULL);
	gcore_call_fail(call, code, message);
}

static void failf(struct gcore_call *call, enum rpc rpc, const char *volume_id, int code,
		  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void failf(struct gcore_call *call, enum rpc rpc, const char *volume_id, int code,
		  const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fail_call(call, rpc, volume_id, code, msg);
}

/* --- Identity and the cheap Node RPCs, inline on the queue thread ----------------------- */

static void handle_get_plugin_info(struct csi_server *s, struct gcore_call *call)
{
	Csi__V1__GetPluginInfoResponse resp = CSI__V1__GET_PLUGIN_INFO_RESPONSE__INIT;

	resp.name = s->driver_name;
	resp.vendor_version = (char *)VOLAGENT_VERSION;
	reply_message(call, &resp.base);
}

static void handle_get_plugin_capabilities(struct csi_server *s, struct gcore_call *call)
{
	Csi__V1__GetPluginCapabilitiesResponse resp =
	    CSI__V1__GET_PLUGIN_CAPABILITIES_RESPONSE__INIT;
	Csi__V1__PluginCapability__Service svc = CSI__V1__PLUGIN_CAPABILITY__SERVICE__INIT;
	Csi__V1__PluginCapability__VolumeExpansion exp =
	    CSI__V1__PLUGIN_CAPABILITY__VOLUME_EXPANSION__INIT;
	Csi__V1__PluginCapability caps[2] = {CSI__V1__PLUGIN_CAPABILITY__INIT,
					     CSI__V1__PLUGIN_CAPABILITY__INIT};
	Csi__V1__PluginCapability *list[2];
	size_t n = 0;

	/* Volumes are reachable on this node only: NodeGetInfo reports the topology. */
	svc.type = CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__VOLUME_ACCESSIBILITY_CONSTRAINTS;
	caps[n].type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE;
	caps[n].service = &svc;
	list[n] = &caps[n];
	n++;
	if (s->ops->expand) {
		exp.type = CSI__V1__PLUGIN_CAPABILITY__VOLUME_EXPANSION__TYPE__ONLINE;
		caps[n].type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_VOLUME_EXPANSION;
		caps[n].volume_expansion = &exp;
		list[n] = &caps[n];
		n++;
	}
	resp.n_capabilities = n;
	resp.capabilities = list;
	reply_message(call, &resp.base);
}

static void handle_probe(struct csi_server *s, struct gcore_call *call)
{
	Csi__V1__ProbeResponse resp = CSI__V1__PROBE_RESPONSE__INIT;
	Google__Protobuf__BoolValue ready = GOOGLE__PROTOBUF__BOOL_VALUE__INIT;

	ready.value = atomic_load(&s->ready);
	resp.ready = &ready;
	reply_message(call, &resp.base);
}

static bool has_stage(const struct csi_server *s)
{
	return s->ops->stage && s->ops->unstage;
}

static void handle_node_get_capabilities(struct csi_server *s, struct gcore_call *call)
{
	Csi__V1__NodeGetCapabilitiesResponse resp = CSI__V1__NODE_GET_CAPABILITIES_RESPONSE__INIT;
	Csi__V1__NodeServiceCapability__RPC rpc[4];
	Csi__V1__NodeServiceCapability caps[4];
	Csi__V1__NodeServiceCapability *list[4];
	Csi__V1__NodeServiceCapability__RPC__Type types[4];
	size_t n = 0;

	if (has_stage(s))
		types[n++] = CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME;
	if (s->ops->get_volume_stats) {
		types[n++] = CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME_STATS;
		types[n++] = CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__VOLUME_CONDITION;
	}
	if (s->ops->expand)
		types[n++] = CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME;
	for (size_t i = 0; i < n; i++) {
		csi__v1__node_service_capability__rpc__init(&rpc[i]);
		csi__v1__node_service_capability__init(&caps[i]);
		rpc[i].type = types[i];
		caps[i].type_case = CSI__V1__NODE_SERVICE_CAPABILITY__TYPE_RPC;
		caps[i].rpc = &rpc[i];
		list[i] = &caps[i];
	}
	resp.n_capabilities = n;
	resp.capabilities = list;
	reply_message(call, &resp.base);
}

static void handle_node_get_info(struct csi_server *s, struct gcore_call *call)
{
	Csi__V1__NodeGetInfoResponse resp = CSI__V1__NODE_GET_INFO_RESPONSE__INIT;
	Csi__V1__Topology topo = CSI__V1__TOPOLOGY__INIT;
	Csi__V1__Topology__SegmentsEntry seg = CSI__V1__TOPOLOGY__SEGMENTS_ENTRY__INIT;
	Csi__V1__Topology__SegmentsEntry *segs[1] = {&seg};

	resp.node_id = s->node_id;
	resp.max_volumes_per_node = s->max_volumes_per_node;
	seg.key = (char *)CSI_TOPOLOGY_KEY;
	seg.value = s->node_id;
	topo.n_segments = 1;
	topo.segments = segs;
	resp.accessible_topology = &topo;
	reply_message(call, &resp.base);
}

/* --- validation -------------------------------------------------------------------------- */

struct vctx {
	const struct csi_server *s;
	int code;
	char msg[1024];
};

static bool vfail(struct vctx *v, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool vfail(struct vctx *v, int code, const char *fmt, ...)
{
	va_list ap;

	v->code = code;
	va_start(ap, fmt);
	vsnprintf(v->msg, sizeof(v->msg), fmt, ap);
	va_end(ap);
	return false;
}

static bool empty(const char *s)
{
	return !s || !*s;
}

static bool check_volume_id(struct vctx *v, const char *id)
{
	if (empty(id))
		return vfail(v, CSI_INVALID_ARGUMENT, "volume_id: required");
	if (strlen(id) > VOLUME_ID_MAX)
		return vfail(v, CSI_INVALID_ARGUMENT, "volume_id: longer than %d bytes",
			     VOLUME_ID_MAX);
	return true;
}

/* The lexical part of the path rules; the symlink part runs on a worker. */
static bool check_path(struct vctx *v, const char *field, const char *path, bool required)
{
	const char *root = v->s->kubelet_root;
	size_t rl = strlen(root);

	if (empty(path))
		return required ? vfail(v, CSI_INVALID_ARGUMENT, "%s: required", field) : true;
	if (strlen(path) >= PATH_MAX)
		return vfail(v, CSI_INVALID_ARGUMENT, "%s: longer than PATH_MAX", field);
	for (const char *c = path; *c; c++)
		if ((unsigned char)*c < 0x20)
			return vfail(v, CSI_INVALID_ARGUMENT, "%s: control character in path",
				     field);
	if (path[0] != '/')
		return vfail(v, CSI_INVALID_ARGUMENT, "%s: %s is not an absolute path", field,
			     path);
	if (!path_normalized(path))
		return vfail(v, CSI_INVALID_ARGUMENT,
			     "%s: %s is not normalized (empty, \".\" or \"..\" component)", field,
			     path);
	if (strncmp(path, root, rl) != 0 || path[rl] != '/' || path[rl + 1] == '\0')
		return vfail(v, CSI_INVALID_ARGUMENT, "%s: %s is not under the kubelet root %s",
			     field, path, rl ? root : "/");
	return true;
}

static bool check_capability(struct vctx *v, const Csi__V1__VolumeCapability *cap, bool required)
{
	if (!cap)
		return required ? vfail(v, CSI_INVALID_ARGUMENT, "volume_capability: required")
				: true;
	if (cap->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK &&
	    cap->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT)
		return vfail(v, CSI_INVALID_ARGUMENT,
			     "volume_capability.access_type: required (block or mount)");
	if (!cap->access_mode)
		return vfail(v, CSI_INVALID_ARGUMENT, "volume_capability.access_mode: required");
	if ((int)cap->access_mode->mode <= CSI_MODE_UNKNOWN ||
	    (int)cap->access_mode->mode > CSI_MODE_SINGLE_NODE_MULTI_WRITER)
		return vfail(v, CSI_INVALID_ARGUMENT,
			     "volume_capability.access_mode.mode: unknown mode %d",
			     (int)cap->access_mode->mode);
	return true;
}

/* Checks job->msg and fills the job's volume id and paths; false with v set. */
static bool validate(struct vctx *v, struct job *j)
{
	const struct csi_server *s = v->s;

	switch (j->rpc) {
	case RPC_STAGE: {
		Csi__V1__NodeStageVolumeRequest *r = (void *)j->msg;

		j->volume_id = r->volume_id;
		j->path_field[0] = "staging_target_path";
		j->path[0] = r->staging_target_path;
		return check_volume_id(v, r->volume_id) &&
		       check_path(v, "staging_target_path", r->staging_target_path, true) &&
		       check_capability(v, r->volume_capability, true);
	}
	case RPC_UNSTAGE: {
		Csi__V1__NodeUnstageVolumeRequest *r = (void *)j->msg;

		j->volume_id = r->volume_id;
		j->path_field[0] = "staging_target_path";
		j->path[0] = r->staging_target_path;
		return check_volume_id(v, r->volume_id) &&
		       check_path(v, "staging_target_path", r->staging_target_path, true);
	}
	case RPC_PUBLISH: {
		Csi__V1__NodePublishVolumeRequest *r = (void *)j->msg;

		j->volume_id = r->volume_id;
		j->path_field[0] = "target_path";
		j->path[0] = r->target_path;
		j->path_field[1] = "staging_target_path";
		j->path[1] = r->staging_target_path;
		if (!check_volume_id(v, r->volume_id) ||
		    !check_path(v, "target_path", r->target_path, true))
			return false;
		/* CSI: with STAGE_UNSTAGE_VOLUME advertised, a missing staging path is a
		 * FAILED_PRECONDITION, not an INVALID_ARGUMENT. */
		if (has_stage(s) && empty(r->staging_target_path))
			return vfail(v, CSI_FAILED_PRECONDITION,
				     "staging_target_path: required, the driver has "
				     "STAGE_UNSTAGE_VOLUME");
		return check_path(v, "staging_target_path", r->staging_target_path, false) &&
		       check_capability(v, r->volume_capability, true);
	}
	case RPC_UNPUBLISH: {
		Csi__V1__NodeUnpublishVolumeRequest *r = (void *)j->msg;

		j->volume_id = r->volume_id;
		j->path_field[0] = "target_path";
		j->path[0] = r->target_path;
		return check_volume_id(v, r->volume_id) &&
		       check_path(v, "target_path", r->target_path, true);
	}
	case RPC_STATS: {
		Csi__V1__NodeGetVolumeStatsRequest *r = (void *)j->msg;

		j->volume_id = r->volume_id;
		j->stats_slot = true;
		j->path_field[0] = "volume_path";
		j->path[0] = r->volume_path;
		j->path_field[1] = "staging_target_path";
		j->path[1] = r->staging_target_path;
		return check_volume_id(v, r->volume_id) &&
		       check_path(v, "volume_path", r->volume_path, true) &&
		       check_path(v, "staging_target_path", r->staging_target_path, false);
	}
	case RPC_EXPAND: {
		Csi__V1__NodeExpandVolumeRequest *r = (void *)j->msg;

		j->volume_id = r->volume_id;
		j->path_field[0] = "volume_path";
		j->path[0] = r->volume_path;
		j->path_field[1] = "staging_target_path";
		j->path[1] = r->staging_target_path;
		if (!check_volume_id(v, r->volume_id) ||
		    !check_path(v, "volume_path", r->volume_path, true) ||
		    !check_path(v, "staging_target_path", r->staging_target_path, false) ||
		    !check_capability(v, r->volume_capability, false))
			return false;
		if (r->capacity_range) {
			int64_t req = r->capacity_range->required_bytes;
			int64_t lim = r->capacity_range->limit_bytes;

			if (req < 0)
				return vfail(v, CSI_INVALID_ARGUMENT,
					     "capacity_range.required_bytes: negative");
			if (lim < 0)
				return vfail(v, CSI_INVALID_ARGUMENT,
					     "capacity_range.limit_bytes: negative");
			if (lim && req > lim)
				return vfail(v, CSI_INVALID_ARGUMENT,
					     "capacity_range.limit_bytes: below required_bytes");
		}
		return true;
	}
	default:
		return vfail(v, CSI_INTERNAL, "not a Node volume RPC");
	}
}

/* No component of path below the kubelet root is a symlink.  Components that do not exist
 * end the walk (the backend creates them); other lstat errors (a dead FUSE or NFS mount at
 * the target answers ENOTCONN or ESTALE) are no symlink either. */
static bool check_no_symlink(struct vctx *v, const char *field, const char *path)
{
	size_t rl = strlen(v->s->kubelet_root);
	_cleanup_free_ char *p = NULL;

	if (empty(path))
		return true;
	p = strdup(path);
	if (!p)
		return vfail(v, CSI_RESOURCE_EXHAUSTED, "out of memory");
	for (char *c = p + rl + 1;; c++) {
		struct statx stx;
		char *slash = strchr(c, '/');

		if (slash)
			*slash = '\0';
		/* Cached attributes only (AT_STATX_DONT_SYNC): a component that is a mount of a
		 * dead NFS server must not block the worker; only the file type is needed. */
		if (statx(AT_FDCWD, p, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC,
			  STATX_TYPE, &stx) < 0) {
			if (errno == ENOENT || errno == ENOTDIR)
				return true;
		} else if (S_ISLNK(stx.stx_mode)) {
			return vfail(v, CSI_INVALID_ARGUMENT, "%s: %s is a symlink", field, p);
		}
		if (!slash)
			return true;
		*slash = '/';
		c = slash;
	}
}

/* --- in-flight set ----------------------------------------------------------------------- */

/* Claims the volume's slot; false when another call holds it.  Takes s->lock. */
static bool inflight_take(struct csi_server *s, const char *volume_id, bool stats)
{
	struct inflight *f;

	pthread_mutex_lock(&s->lock);
	for (f = s->inflight; f; f = f->next)
		if (f->stats == stats && streq(f->volume_id, volume_id)) {
			pthread_mutex_unlock(&s->lock);
			return false;
		}
	f = calloc(1, sizeof(*f));
	if (f)
		f->volume_id = strdup(volume_id);
	if (!f || !f->volume_id) {
		pthread_mutex_unlock(&s->lock);
		if (f)
			free(f);
		return false;
	}
	f->stats = stats;
	f->next = s->inflight;
	s->inflight = f;
	pthread_mutex_unlock(&s->lock);
	return true;
}

static void inflight_release(struct csi_server *s, const char *volume_id, bool stats)
{
	pthread_mutex_lock(&s->lock);
	for (struct inflight **pp = &s->inflight; *pp; pp = &(*pp)->next) {
		struct inflight *f = *pp;

		if (f->stats == stats && streq(f->volume_id, volume_id)) {
			*pp = f->next;
			free(f->volume_id);
			free(f);
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
}

/* --- jobs -------------------------------------------------------------------------------- */

/* The secrets map of a request, or 0 entries. */
static size_t job_secrets(const struct job *j, struct pb_map_entry ***ret)
{
	switch (j->rpc) {
	case RPC_STAGE:
		*ret = (struct pb_map_entry **)((Csi__V1__NodeStageVolumeRequest *)j->msg)->secrets;
		return ((Csi__V1__NodeStageVolumeRequest *)j->msg)->n_secrets;
	case RPC_PUBLISH:
		*ret =
		    (struct pb_map_entry **)((Csi__V1__NodePublishVolumeRequest *)j->msg)->secrets;
		return ((Csi__V1__NodePublishVolumeRequest *)j->msg)->n_secrets;
	case RPC_EXPAND:
		*ret =
		    (struct pb_map_entry **)((Csi__V1__NodeExpandVolumeRequest *)j->msg)->secrets;
		return ((Csi__V1__NodeExpandVolumeRequest *)j->msg)->n_secrets;
	default:
		*ret = NULL;
		return 0;
	}
}

/* Replaces a message that contains a secret value of the request. */
static void scrub_message(const struct job *j, char *msg, size_t size)
{
	struct pb_map_entry **e;
	size_t n = j->msg ? job_secrets(j, &e) : 0;

	for (size_t i = 0; i < n; i++) {
		const char *val = e[i]->value;

		if (val && strlen(val) >= SECRET_SCRUB_MIN && strstr(msg, val)) {
			snprintf(msg, size, "error message withheld: it contained a secret value");
			return;
		}
	}
}

static struct job *job_free(struct job *j)
{
	struct pb_map_entry **e;
	size_t n;

	if (!j)
		return NULL;
	if (j->msg) {
		n = job_secrets(j, &e);
		for (size_t i = 0; i < n; i++)
			if (e[i]->value)
				explicit_bzero(e[i]->value, strlen(e[i]->value));
		protobuf_c_message_free_unpacked(j->msg, NULL);
	}
	free(j);
	return NULL;
}

static void queue_push(struct csi_server *s, struct job *j)
{
	pthread_mutex_lock(&s->lock);
	if (s->queue_tail)
		s->queue_tail->next = j;
	else
		s->queue_head = j;
	s->queue_tail = j;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/* Builds the backend's view of a protobuf map; *ret is NULL for an empty map. */
static int map_view(size_t n, void **entries, struct csi_kv **ret, struct csi_map *map)
{
	struct csi_kv *kv = NULL;

	if (n) {
		kv = calloc(n, sizeof(*kv));
		if (!kv)
			return -ENOMEM;
		for (size_t i = 0; i < n; i++) {
			struct pb_map_entry *e = entries[i];

			kv[i].key = e->key ? e->key : "";
			kv[i].value = e->value ? e->value : "";
		}
	}
	*ret = kv;
	map->items = kv;
	map->n = n;
	return 0;
}

/* Wipes and frees a view that may hold secret pointers. */
static void map_view_free(struct csi_kv *kv, size_t n)
{
	if (kv)
		explicit_bzero(kv, n * sizeof(*kv));
	free(kv);
}

static void capability_view(const Csi__V1__VolumeCapability *cap, struct csi_volume_capability *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->fs_type = "";
	ret->volume_mount_group = "";
	if (!cap)
		return;
	ret->present = true;
	ret->access_mode = (enum csi_access_mode)cap->access_mode->mode;
	if (cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK) {
		ret->access_type = CSI_ACCESS_BLOCK;
		return;
	}
	ret->access_type = CSI_ACCESS_MOUNT;
	if (cap->mount) {
		ret->fs_type = cap->mount->fs_type ? cap->mount->fs_type : "";
		ret->mount_flags = (const char *const *)cap->mount->mount_flags;
		ret->n_mount_flags = cap->mount->n_mount_flags;
		ret->volume_mount_group =
		    cap->mount->volume_mount_group ? cap->mount->volume_mount_group : "";
	}
}

#define MAP_ARGS(r, field) (r)->n_##field, (void **)(r)->field

/* Calls the op for j; returns what it returned, or -ENOMEM. */
static int run_op(struct csi_server *s, struct job *j, struct csi_reply *reply)
{
	const struct csi_node_ops *ops = s->ops;
	struct csi_kv *kv[3] = {NULL, NULL, NULL};
	size_t nkv[3] = {0, 0, 0};
	int r = -ENOMEM;

	switch (j->rpc) {
	case RPC_STAGE: {
		Csi__V1__NodeStageVolumeRequest *m = (void *)j->msg;
		struct csi_stage_request q = {
		    .volume_id = m->volume_id,
		    .staging_target_path = m->staging_target_path,
		    .deadline = j->deadline,
		};

		capability_view(m->volume_capability, &q.capability);
		if (map_view(MAP_ARGS(m, publish_context), &kv[0], &q.publish_context) < 0 ||
		    map_view(MAP_ARGS(m, volume_context), &kv[1], &q.volume_context) < 0 ||
		    map_view(MAP_ARGS(m, secrets), &kv[2], &q.secrets) < 0)
			break;
		nkv[2] = q.secrets.n;
		r = ops->stage(s->userdata, &q, reply);
		break;
	}
	case RPC_UNSTAGE: {
		Csi__V1__NodeUnstageVolumeRequest *m = (void *)j->msg;
		struct csi_unstage_request q = {
		    .volume_id = m->volume_id,
		    .staging_target_path = m->staging_target_path,
		    .deadline = j->deadline,
		};

		r = ops->unstage(s->userdata, &q, reply);
		break;
	}
	case RPC_PUBLISH: {
		Csi__V1__NodePublishVolumeRequest *m = (void *)j->msg;
		struct csi_publish_request q = {
		    .volume_id = m->volume_id,
		    .staging_target_path = m->staging_target_path,
		    .target_path = m->target_path,
		    .readonly = m->readonly,
		    .deadline = j->deadline,
		};

		capability_view(m->volume_capability, &q.capability);
		if (map_view(MAP_ARGS(m, publish_context), &kv[0], &q.publish_context) < 0 ||
		    map_view(MAP_ARGS(m, volume_context), &kv[1], &q.volume_context) < 0 ||
		    map_view(MAP_ARGS(m, secrets), &kv[2], &q.secrets) < 0)
			break;
		nkv[2] = q.secrets.n;
		r = ops->publish(s->userdata, &q, reply);
		break;
	}
	case RPC_UNPUBLISH: {
		Csi__V1__NodeUnpublishVolumeRequest *m = (void *)j->msg;
		struct csi_unpublish_request q = {
		    .volume_id = m->volume_id,
		    .target_path = m->target_path,
		    .deadline = j->deadline,
		};

		r = ops->unpublish(s->userdata, &q, reply);
		break;
	}
	case RPC_STATS: {
		Csi__V1__NodeGetVolumeStatsRequest *m = (void *)j->msg;
		struct csi_stats_request q = {
		    .volume_id = m->volume_id,
		    .volume_path = m->volume_path,
		    .staging_target_path = m->staging_target_path,
		    .deadline = j->deadline,
		};

		r = ops->get_volume_stats(s->userdata, &q, reply);
		break;
	}
	case RPC_EXPAND: {
		Csi__V1__NodeExpandVolumeRequest *m = (void *)j->msg;
		struct csi_expand_request q = {
		    .volume_id = m->volume_id,
		    .volume_path = m->volume_path,
		    .staging_target_path = m->staging_target_path,
		    .deadline = j->deadline,
		};

		if (m->capacity_range) {
			q.required_bytes = m->capacity_range->required_bytes;
			q.limit_bytes = m->capacity_range->limit_bytes;
		}
		capability_view(m->volume_capability, &q.capability);
		if (map_view(MAP_ARGS(m, secrets), &kv[2], &q.secrets) < 0)
			break;
		nkv[2] = q.secrets.n;
		r = ops->expand(s->userdata, &q, reply);
		break;
	}
	default:
		r = -EINVAL;
		break;
	}
	free(kv[0]);
	free(kv[1]);
	map_view_free(kv[2], nkv[2]);
	return r;
}

/* Packs the OK answer of j from the backend's reply. */
static void reply_ok(struct job *j, const struct csi_reply *rep)
{
	switch (j->rpc) {
	case RPC_STAGE: {
		Csi__V1__NodeStageVolumeResponse resp = CSI__V1__NODE_STAGE_VOLUME_RESPONSE__INIT;
		reply_message(j->call, &resp.base);
		break;
	}
	case RPC_UNSTAGE: {
		Csi__V1__NodeUnstageVolumeResponse resp =
		    CSI__V1__NODE_UNSTAGE_VOLUME_RESPONSE__INIT;
		reply_message(j->call, &resp.base);
		break;
	}
	case RPC_PUBLISH: {
		Csi__V1__NodePublishVolumeResponse resp =
		    CSI__V1__NODE_PUBLISH_VOLUME_RESPONSE__INIT;
		reply_message(j->call, &resp.base);
		break;
	}
	case RPC_UNPUBLISH: {
		Csi__V1__NodeUnpublishVolumeResponse resp =
		    CSI__V1__NODE_UNPUBLISH_VOLUME_RESPONSE__INIT;
		reply_message(j->call, &resp.base);
		break;
	}
	case RPC_STATS: {
		Csi__V1__NodeGetVolumeStatsResponse resp =
		    CSI__V1__NODE_GET_VOLUME_STATS_RESPONSE__INIT;
		Csi__V1__VolumeUsage u[2] = {CSI__V1__VOLUME_USAGE__INIT,
					     CSI__V1__VOLUME_USAGE__INIT};
		Csi__V1__VolumeUsage *list[2];
		Csi__V1__VolumeCondition cond = CSI__V1__VOLUME_CONDITION__INIT;
		const struct csi_usage *src[2] = {&rep->bytes, &rep->inodes};
		const Csi__V1__VolumeUsage__Unit units[2] = {CSI__V1__VOLUME_USAGE__UNIT__BYTES,
							     CSI__V1__VOLUME_USAGE__UNIT__INODES};
		size_t n = 0;

		for (size_t i = 0; i < 2; i++) {
			if (!src[i]->valid)
				continue;
			u[n].available = src[i]->available;
			u[n].total = src[i]->total;
			u[n].used = src[i]->used;
			u[n].unit = units[i];
			list[n] = &u[n];
			n++;
		}
		resp.n_usage = n;
		resp.usage = list;
		if (rep->has_condition) {
			cond.abnormal = rep->abnormal;
			cond.message = (char *)rep->condition_message;
			resp.volume_condition = &cond;
		}
		reply_message(j->call, &resp.base);
		break;
	}
	case RPC_EXPAND: {
		Csi__V1__NodeExpandVolumeResponse resp = CSI__V1__NODE_EXPAND_VOLUME_RESPONSE__INIT;
		resp.capacity_bytes = rep->capacity_bytes;
		reply_message(j->call, &resp.base);
		break;
	}
	default:
		gcore_call_fail(j->call, GCORE_INTERNAL, "not a Node volume RPC");
		break;
	}
}

/* On a worker: everything between the queue and the answer. */
static void job_run(struct csi_server *s, struct job *j, bool draining)
{
	struct csi_reply reply;
	struct vctx v = {.s = s};
	int r;

	memset(&reply, 0, sizeof(reply));
	if (draining) {
		reply.code = CSI_UNAVAILABLE;
		snprintf(reply.message, sizeof(reply.message), "the driver is shutting down");
	} else if (csi_deadline_remaining_ms(&j->deadline) == 0) {
		reply.code = CSI_DEADLINE_EXCEEDED;
		snprintf(reply.message, sizeof(reply.message),
			 "deadline passed while the request waited for a worker");
	} else if (!check_no_symlink(&v, j->path_field[0], j->path[0]) ||
		   !check_no_symlink(&v, j->path_field[1], j->path[1])) {
		reply.code = v.code;
		snprintf(reply.message, sizeof(reply.message), "%.*s",
			 (int)sizeof(reply.message) - 1, v.msg);
	} else {
		r = run_op(s, j, &reply);
		if (r < 0 && reply.code == CSI_OK)
			reply.code = csi_code_from_errno(r);
		if (r >= 0 && reply.code != CSI_OK && !reply.message[0])
			r = -EIO;
		if (reply.code != CSI_OK && !reply.message[0])
			snprintf(reply.message, sizeof(reply.message), "%s",
				 strerror(r < 0 ? -r : EIO));
	}
	reply.message[sizeof(reply.message) - 1] = '\0';
	reply.condition_message[sizeof(reply.condition_message) - 1] = '\0';
	scrub_message(j, reply.message, sizeof(reply.message));
	scrub_message(j, reply.condition_message, sizeof(reply.condition_message));

	/* Free the slot before answering: kubelet may call again as soon as it has the answer. */
	inflight_release(s, j->volume_id, j->stats_slot);
	if (reply.code == CSI_OK) {
		log_debug("csi", "CSI call done", "method", rpcs[j->rpc].name, "volume",
			  j->volume_id);
		reply_ok(j, &reply);
	} else {
		fail_call(j->call, j->rpc, j->volume_id, (int)reply.code, reply.message);
	}
	j->call = NULL;
}

static void *worker_main(void *arg)
{
	struct csi_server *s = arg;

	for (;;) {
		struct job *j;
		bool draining;

		pthread_mutex_lock(&s->lock);
		while (!s->queue_head && !s->workers_stop)
			pthread_cond_wait(&s->cond, &s->lock);
		j = s->queue_head;
		if (!j) {
			pthread_mutex_unlock(&s->lock);
			break;
		}
		s->queue_head = j->next;
		if (!s->queue_head)
			s->queue_tail = NULL;
		draining = s->draining;
		pthread_mutex_unlock(&s->lock);

		job_run(s, j, draining);
		job_free(j);
	}
	return NULL;
}

/* --- the handler every method shares ---------------------------------------------------- */

static void handle_call(struct gcore_call *call, void *userdata)
{
	struct method_ctx *ctx = userdata;
	struct csi_server *s = ctx->s;
	enum rpc rpc = ctx->rpc;
	struct vctx v = {.s = s};
	struct job *j;
	const void *data;
	size_t len;

	data = gcore_call_request(call, &len);
	if (!data) {
		fail_call(call, rpc, NULL, CSI_INVALID_ARGUMENT, "request: no message");
		return;
	}
	if (!rpcs[rpc].worker) {
		ProtobufCMessage *m = protobuf_c_message_unpack(rpcs[rpc].request, NULL, len, data);

		if (!m) {
			fail_call(call, rpc, NULL, CSI_INVALID_ARGUMENT, "request: cannot decode");
			return;
		}
		protobuf_c_message_free_unpacked(m, NULL);
		switch (rpc) {
		case RPC_GET_PLUGIN_INFO:
			handle_get_plugin_info(s, call);
			break;
		case RPC_GET_PLUGIN_CAPABILITIES:
			handle_get_plugin_capabilities(s, call);
			break;
		case RPC_PROBE:
			handle_probe(s, call);
			break;
		case RPC_NODE_GET_CAPABILITIES:
			handle_node_get_capabilities(s, call);
			break;
		case RPC_NODE_GET_INFO:
			handle_node_get_info(s, call);
			break;
		default:
			gcore_call_fail(call, GCORE_INTERNAL, "no handler");
			break;
		}
		return;
	}

	if ((rpc == RPC_STAGE && !s->ops->stage) || (rpc == RPC_UNSTAGE && !s->ops->unstage) ||
	    (rpc == RPC_PUBLISH && !s->ops->publish) ||
	    (rpc == RPC_UNPUBLISH && !s->ops->unpublish) ||
	    (rpc == RPC_STATS && !s->ops->get_volume_stats) ||
	    (rpc == RPC_EXPAND && !s->ops->expand)) {
		failf(call, rpc, NULL, CSI_UNIMPLEMENTED, "%s is not implemented by this driver",
		      rpcs[rpc].name);
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		fail_call(call, rpc, NULL, CSI_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	j->rpc = rpc;
	j->call = call;
	gcore_call_deadline(call, &j->deadline);
	j->msg = protobuf_c_message_unpack(rpcs[rpc].request, NULL, len, data);
	if (!j->msg) {
		fail_call(call, rpc, NULL, CSI_INVALID_ARGUMENT, "request: cannot decode");
		job_free(j);
		return;
	}
	if (!validate(&v, j)) {
		scrub_message(j, v.msg, sizeof(v.msg));
		fail_call(call, rpc, empty(j->volume_id) ? NULL : j->volume_id, v.code, v.msg);
		job_free(j);
		return;
	}
	if (atomic_load(&s->stopping) && gcore_stopping(s->g)) {
		/* Arrived just before the shutdown began; nobody waits on a new op now. */
		fail_call(call, rpc, j->volume_id, CSI_UNAVAILABLE, "the driver is shutting down");
		job_free(j);
		return;
	}
	if (!inflight_take(s, j->volume_id, j->stats_slot)) {
		failf(call, rpc, j->volume_id, CSI_ABORTED,
		      "an operation on volume %s is already in progress", j->volume_id);
		job_free(j);
		return;
	}
	queue_push(s, j);
}

/* --- life cycle -------------------------------------------------------------------------- */

struct csi_server *csi_server_new(const struct csi_server_config *cfg,
				  const struct csi_node_ops *ops, void *userdata,
				  struct error_info *err)
{
	static const struct csi_node_ops no_ops;
	struct csi_server *s;
	_cleanup_free_ char *def_endpoint = NULL;
	const char *root, *endpoint;
	char host[256];
	int r;

	if (!cfg || !cfg->driver_name || !driver_name_valid(cfg->driver_name)) {
		err_set(err, -EINVAL,
			"driver name %s%s%s: want 1-63 characters [A-Za-z0-9._-], alphanumeric "
			"at both ends",
			cfg && cfg->driver_name ? "\"" : "",
			cfg && cfg->driver_name ? cfg->driver_name : "(none)",
			cfg && cfg->driver_name ? "\"" : "");
		return NULL;
	}
	root =
	    cfg->kubelet_root && *cfg->kubelet_root ? cfg->kubelet_root : CSI_DEFAULT_KUBELET_ROOT;
	if (!path_normalized(root)) {
		err_set(err, -EINVAL, "kubelet root %s: want an absolute, normalized path", root);
		return NULL;
	}
	if (cfg->max_volumes_per_node < 0) {
		err_set(err, -EINVAL, "max volumes per node: negative");
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->ops = ops ? ops : &no_ops;
	s->userdata = userdata;
	s->gid = (gid_t)-1;
	s->max_volumes_per_node = cfg->max_volumes_per_node;
	s->n_workers = cfg->workers > 0 ? cfg->workers : CSI_DEFAULT_WORKERS;
	s->grace_ms = cfg->grace_ms >= 0 ? cfg->grace_ms : CSI_DEFAULT_GRACE_MS;
	s->registration = cfg->registration;
	atomic_init(&s->ready, false);
	atomic_init(&s->stopping, false);
	s->driver_name = strdup(cfg->driver_name);
	s->kubelet_root = strdup(streq(root, "/") ? "" : root);
	if (cfg->node_id && *cfg->node_id) {
		s->node_id = strdup(cfg->node_id);
	} else {
		if (gethostname(host, sizeof(host)) < 0 || !host[0]) {
			err_set(err, -errno ? -errno : -EINVAL, "node id: cannot get the hostname");
			return csi_server_free(s);
		}
		host[sizeof(host) - 1] = '\0';
		s->node_id = strdup(host);
	}
	if (!s->driver_name || !s->kubelet_root || !s->node_id) {
		err_set(err, -ENOMEM, "out of memory");
		return csi_server_free(s);
	}
	if (cfg->socket_group && *cfg->socket_group &&
	    unix_socket_group_gid(cfg->socket_group, &s->gid) < 0) {
		err_set(err, -EINVAL, "socket group %s: no such group", cfg->socket_group);
		return csi_server_free(s);
	}
	endpoint = cfg->endpoint;
	if (!endpoint || !*endpoint) {
		def_endpoint = csi_default_endpoint(root, cfg->driver_name);
		if (!def_endpoint) {
			err_set(err, -ENOMEM, "out of memory");
			return csi_server_free(s);
		}
		endpoint = def_endpoint;
	}
	r = csi_endpoint_parse(endpoint, &s->socket_path, err);
	if (r < 0)
		return csi_server_free(s);
	return s;
}

int csi_server_start(struct csi_server *s, struct error_info *err)
{
	struct error_info local;
	struct gcore_config gc = {0};
	sigset_t all, old;
	int r;

	if (!err)
		err = &local;
	if (!s || s->started)
		return err_set(err, -EINVAL, "CSI server already started");
	r = mkdir_parents(s->socket_path, 0755);
	if (r < 0)
		return err_set(err, r, "cannot create the directory of %s: %s", s->socket_path,
			       strerror(-r));
	gc.socket_path = s->socket_path;
	gc.mode = s->gid == (gid_t)-1 ? 0600 : 0660;
	gc.gid = s->gid;
	gc.calls_per_method = s->n_workers + 4;
	s->g = gcore_new(&gc, err);
	if (!s->g)
		return err->code;
	for (int i = 0; i < RPC_COUNT; i++) {
		s->ctx[i] = (struct method_ctx){.s = s, .rpc = (enum rpc)i};
		r = gcore_add_method(s->g, rpcs[i].path, handle_call, &s->ctx[i]);
		if (r < 0) {
			s->g = gcore_free(s->g);
			return err_set(err, r, "cannot register %s", rpcs[i].path);
		}
	}

	s->workers = calloc((size_t)s->n_workers, sizeof(*s->workers));
	if (!s->workers) {
		s->g = gcore_free(s->g);
		return err_set(err, -ENOMEM, "out of memory");
	}
	/* Workers take no signals: main owns them. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (; s->n_started < s->n_workers; s->n_started++) {
		r = -pthread_create(&s->workers[s->n_started], NULL, worker_main, s);
		if (r < 0)
			break;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	s->started = true;
	if (r < 0) {
		err_set(err, r, "cannot start CSI workers: %s", strerror(-r));
		goto out_stop;
	}

	r = gcore_start(s->g, err);
	if (r < 0) {
		err_prefix(err, "CSI socket");
		goto out_stop;
	}
	if (s->registration) {
		struct registration_config rc = {
		    .kubelet_root = *s->kubelet_root ? s->kubelet_root : "/",
		    .driver_name = s->driver_name,
		    .csi_socket_path = s->socket_path,
		};

		s->reg = registration_new(&rc, err);
		r = s->reg ? registration_start(s->reg, err) : err->code;
		if (r < 0)
			goto out_stop;
	}
	log_info("CSI server listening", "socket", s->socket_path, "driver", s->driver_name, "node",
		 s->node_id, "registration", s->reg ? registration_socket_path(s->reg) : "off");
	return 0;

out_stop:
	csi_server_shutdown(s, 0);
	s->reg = registration_free(s->reg);
	s->g = gcore_free(s->g);
	return r;
}

void csi_server_set_ready(struct csi_server *s, bool ready)
{
	atomic_store(&s->ready, ready);
}

bool csi_server_stopping(const struct csi_server *s)
{
	return atomic_load(&((struct csi_server *)s)->stopping);
}

const char *csi_server_socket_path(const struct csi_server *s)
{
	return s->socket_path;
}

/* The grace has passed: queued jobs are answered UNAVAILABLE without their op. */
static void on_grace_expired(void *userdata)
{
	struct csi_server *s = userdata;

	pthread_mutex_lock(&s->lock);
	s->draining = true;
	pthread_mutex_unlock(&s->lock);
}

int csi_server_shutdown(struct csi_server *s, int grace_ms)
{
	int r = 0;

	if (!s || !s->started)
		return 0;
	if (grace_ms < 0)
		grace_ms = s->grace_ms;
	atomic_store(&s->stopping, true);
	/* Kubelet first loses the registration socket, then the CSI one. */
	if (s->reg)
		registration_shutdown(s->reg, REGISTRATION_GRACE_MS);
	if (s->g) {
		r = gcore_shutdown(s->g, grace_ms, HARD_STOP_MS, on_grace_expired, s);
		if (r < 0) {
			s->leaked = true;
			return r;
		}
	}
	/* No call is owned any more: the queue is empty and no op runs. */
	pthread_mutex_lock(&s->lock);
	s->workers_stop = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	for (int i = 0; i < s->n_started; i++)
		pthread_join(s->workers[i], NULL);
	s->n_started = 0;
	s->leaked = false;
	return 0;
}

struct csi_server *csi_server_free(struct csi_server *s)
{
	if (!s)
		return NULL;
	if (s->started && csi_server_shutdown(s, 0) < 0) {
		/* An op still runs and will touch s: leak rather than crash. */
		log_warning("CSI calls still running at exit, not freeing the server", "socket",
			    s->socket_path);
		return NULL;
	}
	s->reg = registration_free(s->reg);
	s->g = gcore_free(s->g);
	while (s->inflight) {
		struct inflight *f = s->inflight;

		s->inflight = f->next;
		free(f->volume_id);
		free(f);
	}
	free(s->workers);
	free(s->socket_path);
	free(s->driver_name);
	free(s->node_id);
	free(s->kubelet_root);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
	return NULL;
}

/* --- checking a request without a server (fuzzing, tests) -------------------------------- */

static int check_stage_noop(void *userdata, const struct csi_stage_request *req,
			    struct csi_reply *reply)
{
	return 0;
}

static int check_unstage_noop(void *userdata, const struct csi_unstage_request *req,
			      struct csi_reply *reply)
{
	return 0;
}

int csi_request_check(const struct csi_check_config *cfg, const char *method, const void *data,
		      size_t len, struct csi_reply *ret_reply)
{
	/* Only whether stage and unstage exist matters to the checks. */
	static const struct csi_node_ops with_stage = {
		.stage = check_stage_noop,
		.unstage = check_unstage_noop,
	};
	static const struct csi_node_ops without_stage = { 0 };
	const char *root = cfg->kubelet_root && *cfg->kubelet_root ? cfg->kubelet_root
								     : CSI_DEFAULT_KUBELET_ROOT;
	struct csi_server s = { 0 };
	struct job j = { 0 };
	struct vctx v = { .s = &s };
	int rpc = -1, r;

	memset(ret_reply, 0, sizeof(*ret_reply));
	for (int i = 0; i < RPC_COUNT; i++)
		if (streq(rpcs[i].path, method))
			rpc = i;
	if (rpc < 0)
		return -ENOENT;
	/* The server's own view: the root without a trailing '/', "" for "/". */
	s.kubelet_root = strdup(streq(root, "/") ? "" : root);
	if (!s.kubelet_root)
		return -ENOMEM;
	/* With ops, whether staging is served follows from them, as in the server. */
	s.ops = cfg->ops ? cfg->ops : cfg->has_stage ? &with_stage : &without_stage;
	s.userdata = cfg->userdata;
	j.rpc = (enum rpc)rpc;
	j.msg = protobuf_c_message_unpack(rpcs[rpc].request, NULL, len, data);
	if (!j.msg) {
		ret_reply->code = CSI_INVALID_ARGUMENT;
		snprintf(ret_reply->message, sizeof(ret_reply->message), "request: cannot decode");
		r = -EINVAL;
		goto out;
	}
	if (!rpcs[rpc].worker) {
		r = 0; /* answered by the queue thread from the server's settings alone */
		goto out;
	}
	if (!validate(&v, &j) ||
	    (cfg->check_fs && (!check_no_symlink(&v, j.path_field[0], j.path[0]) ||
			       !check_no_symlink(&v, j.path_field[1], j.path[1])))) {
		scrub_message(&j, v.msg, sizeof(v.msg));
		ret_reply->code = v.code;
		snprintf(ret_reply->message, sizeof(ret_reply->message), "%.*s",
			 (int)sizeof(ret_reply->message) - 1, v.msg);
		r = -EINVAL;
		goto out;
	}
	if (!cfg->ops) {
		r = 0;
		goto out;
	}
	if ((j.rpc == RPC_STAGE && !cfg->ops->stage) || (j.rpc == RPC_UNSTAGE && !cfg->ops->unstage) ||
	    (j.rpc == RPC_PUBLISH && !cfg->ops->publish) ||
	    (j.rpc == RPC_UNPUBLISH && !cfg->ops->unpublish) ||
	    (j.rpc == RPC_STATS && !cfg->ops->get_volume_stats) ||
	    (j.rpc == RPC_EXPAND && !cfg->ops->expand)) {
		ret_reply->code = CSI_UNIMPLEMENTED;
		snprintf(ret_reply->message, sizeof(ret_reply->message),
			 "%s is not implemented by this driver", rpcs[rpc].name);
		r = -ENOSYS;
		goto out;
	}
	/* As job_run answers. */
	r = run_op(&s, &j, ret_reply);
	if (r < 0 && ret_reply->code == CSI_OK)
		ret_reply->code = csi_code_from_errno(r);
	if (r >= 0 && ret_reply->code != CSI_OK && !ret_reply->message[0])
		r = -EIO;
	if (ret_reply->code != CSI_OK && !ret_reply->message[0])
		snprintf(ret_reply->message, sizeof(ret_reply->message), "%s",
			 strerror(r < 0 ? -r : EIO));
	ret_reply->message[sizeof(ret_reply->message) - 1] = '\0';
	ret_reply->condition_message[sizeof(ret_reply->condition_message) - 1] = '\0';
	scrub_message(&j, ret_reply->message, sizeof(ret_reply->message));
	scrub_message(&j, ret_reply->condition_message, sizeof(ret_reply->condition_message));
out:
	if (j.msg)
		protobuf_c_message_free_unpacked(j.msg, NULL);
	free(s.kubelet_root);
	return r;
}
