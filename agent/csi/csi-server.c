/* csi-server.c - the CSI Identity and Node services over grpc-core.  See csi-server.h.
 *
 * One table row per RPC (csi_rpcs[] below): its method path, request descriptor, the pure
 * validation (csi-validate.c), the call into the backend, the packing of the OK answer, and
 * where its request keeps secrets.  Every answer, refused early or after the op, goes
 * through answer(): it withholds a message holding a secret, logs a failure once and sends.
 *
 * Threads: the cheap RPCs (Identity, NodeGetCapabilities, NodeGetInfo) are answered by the
 * grpc-core queue thread.  The volume RPCs are blocking methods of grpc-core: its pool of
 * `workers` threads waits on their completion queue, and the thread woken for a request runs
 * handle_call(): decodes, validates what needs no file system access, claims the volume's
 * in-flight slot, checks the paths on disk and calls the backend op.  An op that answers at
 * once (stats, expand, a refusal) is answered there and its slot released.  An op may instead
 * defer its answer (csi_reply_defer): the agent's stage, unstage, publish and unpublish hand
 * their request to the reconciler and are answered from its completion (csi_deferred_finish),
 * which releases the slot then: on the pool thread itself when the reconciler was asleep and
 * the pool thread ran the call to completion (agent/core/reconciler-caller.c), else on the
 * reconciler's thread, the pool thread free at once.  A
 * call still deferred when a shutdown's grace ends is answered UNAVAILABLE
 * (deferred_claim_all).  Requests beyond `workers` wait inside gRPC.  s->lock guards the
 * in-flight set, the deferred list and the draining flag; it is never held across an op or a
 * gRPC call. */
#include <ctype.h>
#include <malloc.h>
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

#include "csi-controller.h"
#include "csi-server.h"
#include "unix-socket.h"
#include "grpc-core.h"
#include "log.h"
#include "macro.h"
#include "csi-validate.h"
#include "path-util.h"
#include "secret-mem.h"
#include "registration.h"

/* Secret values shorter than this cannot be told apart from ordinary words in a message. */
#define SECRET_SCRUB_MIN 4
#define HARD_STOP_MS 2000
#define REGISTRATION_GRACE_MS 1000
#define N_RPCS 11

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

struct csi_server;
struct job;

/* One RPC of the Identity or Node service. */
struct csi_rpc {
	const char *path; /* "/csi.v1.Node/NodePublishVolume" */
	const char *name; /* "NodePublishVolume" */
	const ProtobufCMessageDescriptor *request;
	/* Node volume RPCs: the checks that need no state; NULL for the RPCs answered inline
	 * from the server's settings (Identity, NodeGetCapabilities, NodeGetInfo). */
	csi_validate_fn validate;
	/* The op in struct csi_node_ops (offsetof); a NULL op answers UNIMPLEMENTED. */
	size_t op;
	/* Builds the backend's view of j's request and calls the op: its return. */
	int (*call)(const struct csi_server *s, const struct job *j, struct csi_reply *reply);
	/* Packs and sends the OK answer. */
	void (*reply)(const struct csi_server *s, const struct csi_reply *rep,
		      struct gcore_call *call);
	/* Offsets of n_secrets and secrets in the request; 0 when it has none. */
	size_t n_secrets, secrets;
};

/* A request being served, and what its op is given. */
struct job {
	struct csi_server *s;
	const struct csi_rpc *rpc;
	struct gcore_call *call;
	ProtobufCMessage *msg;
	struct csi_request_info info; /* volume id and paths, in msg */
	struct timespec deadline;     /* {0, 0}: none */
	/* The request's secrets, moved out of msg (whose values are wiped) into memory left out
	 * of core dumps as soon as msg is validated (job_take_secrets); the views the backend
	 * gets point here.  secret_mem holds the items and their strings. */
	struct csi_map secrets;
	void *secret_mem;
	struct csi_reply reply;
	/* A deferred job (csi_reply_defer) is on s->deferred until it is finished, or claimed
	 * (answered UNAVAILABLE) at the end of a shutdown's grace; the claimer holds a second
	 * reference until its answer is sent.  Under s->lock. */
	struct job *next_deferred;
	struct job **pprev_deferred; /* what points to j on s->deferred; NULL: not on it */
	atomic_bool claimed;	     /* set under s->lock; once set, the finish never touches s */
	atomic_uint refs;
};

struct method_ctx {
	struct csi_server *s;
	const struct csi_rpc *rpc;
};

struct csi_server {
	char *socket_path;
	char *driver_name;
	char *node_id;
	char *topology_key; /* "topology.<driver name>/node" */
	char *kubelet_root; /* without trailing '/'; "" for "/" */
	gid_t gid;
	long long max_volumes_per_node;
	int n_workers;
	int grace_ms;
	bool registration;
	const struct csi_node_ops *ops;
	void *userdata;
	struct csi_controller *controller; /* NULL: no Controller service */

	struct gcore *g;
	struct registration *reg;
	struct method_ctx ctx[N_RPCS];
	_Atomic bool ready;
	_Atomic bool stopping;

	pthread_mutex_t lock;
	struct inflight *inflight;
	struct job *deferred; /* calls an op answers later (csi_reply_defer) */
	bool draining;	      /* past the grace: calls not yet taken get UNAVAILABLE */
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

/* Whether "topology.<n>/node" is a Kubernetes label key: its prefix must be a DNS subdomain
 * (lowercase alphanumeric labels with '-' inside, joined by single dots), which CSI's driver
 * names need not be ('_', capitals).  Kubelet writes the key onto the Node; the API server
 * refuses an invalid one, and with it the plugin's registration. */
static bool topology_prefix_valid(const char *n)
{
	for (const char *label = n;;) {
		size_t len = strcspn(label, ".");

		if (len == 0 || len > 63 || label[0] == '-' || label[len - 1] == '-')
			return false;
		for (size_t i = 0; i < len; i++)
			if (!islower((unsigned char)label[i]) &&
			    !isdigit((unsigned char)label[i]) && label[i] != '-')
				return false;
		if (!label[len])
			return true;
		label += len + 1;
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

/* The secrets map of a request, or 0 entries. */
static size_t request_secrets(const struct csi_rpc *rpc, const ProtobufCMessage *msg,
			      struct pb_map_entry ***ret)
{
	*ret = NULL;
	if (!msg || !rpc->secrets)
		return 0;
	*ret = *(struct pb_map_entry ***)((char *)msg + rpc->secrets);
	return *(const size_t *)((const char *)msg + rpc->n_secrets);
}

/* Replaces a message that contains a secret value of the request (secrets may be NULL). */
static void scrub_message(const struct csi_map *secrets, char *text, size_t size)
{
	for (size_t i = 0; secrets && i < secrets->n; i++) {
		const char *val = secrets->items[i].value;

		if (val && strlen(val) >= SECRET_SCRUB_MIN && strstr(text, val)) {
			snprintf(text, size, "error message withheld: it contained a secret value");
			return;
		}
	}
}

/* Turns an op's return into the answer: a code it set wins over the errno mapping; a failure
 * always has a message. */
static void reply_settle(int r, struct csi_reply *reply)
{
	if (r < 0 && reply->code == CSI_OK)
		reply->code = csi_code_from_errno(r);
	if (r >= 0 && reply->code != CSI_OK && !reply->message[0])
		r = -EIO;
	if (reply->code != CSI_OK && !reply->message[0])
		snprintf(reply->message, sizeof(reply->message), "%s", strerror(r < 0 ? -r : EIO));
	reply->message[sizeof(reply->message) - 1] = '\0';
	reply->condition_message[sizeof(reply->condition_message) - 1] = '\0';
}

/* Every answer of every RPC: withholds a message that holds one of the request's secrets
 * (NULL: not decoded), then sends the OK answer, or the error, logged once here (the handler
 * boundary). */
static void answer(const struct csi_server *s, const struct csi_rpc *rpc, struct gcore_call *call,
		   const struct csi_map *secrets, const char *volume_id, struct csi_reply *reply)
{
	enum log_level lvl;

	scrub_message(secrets, reply->message, sizeof(reply->message));
	scrub_message(secrets, reply->condition_message, sizeof(reply->condition_message));
	if (reply->code == CSI_OK) {
		if (rpc->validate)
			log_debug("csi", "CSI call done", "method", rpc->name, "volume", volume_id);
		rpc->reply(s, reply, call);
		return;
	}
	lvl = reply->code == CSI_ABORTED || reply->code == CSI_UNAVAILABLE ||
			      reply->code == CSI_DEADLINE_EXCEEDED
		      ? LOG_LVL_INFO
		      : LOG_LVL_WARNING;
	log_event(lvl, NULL, "CSI call failed", "method", rpc->name, "volume",
		  volume_id ? volume_id : "", "code", gcore_status_name((int)reply->code), "error",
		  reply->message, (char *)NULL);
	gcore_call_fail(call, (int)reply->code, reply->message);
}

void csi_reply_set(struct csi_reply *reply, enum csi_code code, const char *fmt, ...)
{
	va_list ap;

	reply->code = code;
	va_start(ap, fmt);
	vsnprintf(reply->message, sizeof(reply->message), fmt, ap);
	va_end(ap);
}

/* --- Identity and the cheap Node RPCs, answered inline on the queue thread --------------- */

static void reply_get_plugin_info(const struct csi_server *s, const struct csi_reply *rep,
				  struct gcore_call *call)
{
	Csi__V1__GetPluginInfoResponse resp = CSI__V1__GET_PLUGIN_INFO_RESPONSE__INIT;

	resp.name = s->driver_name;
	resp.vendor_version = (char *)VOLAGENT_VERSION;
	gcore_call_reply_message(call, &resp.base);
}

static void reply_get_plugin_capabilities(const struct csi_server *s, const struct csi_reply *rep,
					  struct gcore_call *call)
{
	Csi__V1__GetPluginCapabilitiesResponse resp =
		CSI__V1__GET_PLUGIN_CAPABILITIES_RESPONSE__INIT;
	Csi__V1__PluginCapability__Service svc = CSI__V1__PLUGIN_CAPABILITY__SERVICE__INIT;
	Csi__V1__PluginCapability__VolumeExpansion exp =
		CSI__V1__PLUGIN_CAPABILITY__VOLUME_EXPANSION__INIT;
	Csi__V1__PluginCapability__Service ctrl = CSI__V1__PLUGIN_CAPABILITY__SERVICE__INIT;
	Csi__V1__PluginCapability caps[3] = { CSI__V1__PLUGIN_CAPABILITY__INIT,
					      CSI__V1__PLUGIN_CAPABILITY__INIT,
					      CSI__V1__PLUGIN_CAPABILITY__INIT };
	Csi__V1__PluginCapability *list[3];
	size_t n = 0;

	/* Volumes are reachable on this node only: NodeGetInfo reports the topology. */
	svc.type = CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__VOLUME_ACCESSIBILITY_CONSTRAINTS;
	caps[n].type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE;
	caps[n].service = &svc;
	list[n] = &caps[n];
	n++;
	if (s->controller) {
		ctrl.type = CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE;
		caps[n].type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE;
		caps[n].service = &ctrl;
		list[n] = &caps[n];
		n++;
	}
	if (s->ops->expand) {
		exp.type = CSI__V1__PLUGIN_CAPABILITY__VOLUME_EXPANSION__TYPE__ONLINE;
		caps[n].type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_VOLUME_EXPANSION;
		caps[n].volume_expansion = &exp;
		list[n] = &caps[n];
		n++;
	}
	resp.n_capabilities = n;
	resp.capabilities = list;
	gcore_call_reply_message(call, &resp.base);
}

static void reply_probe(const struct csi_server *s, const struct csi_reply *rep,
			struct gcore_call *call)
{
	Csi__V1__ProbeResponse resp = CSI__V1__PROBE_RESPONSE__INIT;
	Google__Protobuf__BoolValue ready = GOOGLE__PROTOBUF__BOOL_VALUE__INIT;

	ready.value = atomic_load(&s->ready);
	resp.ready = &ready;
	gcore_call_reply_message(call, &resp.base);
}

static bool has_stage(const struct csi_server *s)
{
	return s->ops->stage && s->ops->unstage;
}

static void reply_node_get_capabilities(const struct csi_server *s, const struct csi_reply *rep,
					struct gcore_call *call)
{
	Csi__V1__NodeGetCapabilitiesResponse resp = CSI__V1__NODE_GET_CAPABILITIES_RESPONSE__INIT;
	Csi__V1__NodeServiceCapability__RPC rpc[5];
	Csi__V1__NodeServiceCapability caps[5];
	Csi__V1__NodeServiceCapability *list[5];
	Csi__V1__NodeServiceCapability__RPC__Type types[5];
	size_t n = 0;

	if (has_stage(s))
		types[n++] = CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME;
	if (s->ops->get_volume_stats) {
		types[n++] = CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME_STATS;
		types[n++] = CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__VOLUME_CONDITION;
	}
	if (s->ops->expand)
		types[n++] = CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME;
	/* Without it kubelet sends SINGLE_NODE_WRITER for ReadWriteOncePod too. */
	if (s->ops->publish && s->ops->single_node_multi_writer)
		types[n++] = CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__SINGLE_NODE_MULTI_WRITER;
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
	gcore_call_reply_message(call, &resp.base);
}

static void reply_node_get_info(const struct csi_server *s, const struct csi_reply *rep,
				struct gcore_call *call)
{
	Csi__V1__NodeGetInfoResponse resp = CSI__V1__NODE_GET_INFO_RESPONSE__INIT;
	Csi__V1__Topology topo = CSI__V1__TOPOLOGY__INIT;
	Csi__V1__Topology__SegmentsEntry seg = CSI__V1__TOPOLOGY__SEGMENTS_ENTRY__INIT;
	Csi__V1__Topology__SegmentsEntry *segs[1] = { &seg };

	resp.node_id = s->node_id;
	resp.max_volumes_per_node = s->max_volumes_per_node;
	seg.key = s->topology_key;
	seg.value = s->node_id;
	topo.n_segments = 1;
	topo.segments = segs;
	resp.accessible_topology = &topo;
	gcore_call_reply_message(call, &resp.base);
}

/* --- the Node volume RPCs: the backend's view of a request, and the OK answers ----------- */

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

/* The publish_context and volume_context of a stage or publish request m as the backend's
 * views in q; kv (two, NULL at first) holds them until contexts_free().  True when both were
 * made.  The secrets' view is the job's own copy (j->secrets). */
#define CONTEXTS_VIEW(m, q, kv)                                                         \
	(map_view(MAP_ARGS(m, publish_context), &(kv)[0], &(q).publish_context) == 0 && \
	 map_view(MAP_ARGS(m, volume_context), &(kv)[1], &(q).volume_context) == 0)

/* Frees what CONTEXTS_VIEW made. */
static void contexts_free(struct csi_kv *kv[2])
{
	free(kv[0]);
	free(kv[1]);
}

/* The op of rpc in ops, as a plain function pointer (NULL: not served). */
static bool rpc_has_op(const struct csi_rpc *rpc, const struct csi_node_ops *ops)
{
	void (*fn)(void);

	memcpy(&fn, (const char *)ops + rpc->op, sizeof(fn));
	return fn != NULL;
}

static int call_stage(const struct csi_server *s, const struct job *j, struct csi_reply *reply)
{
	const Csi__V1__NodeStageVolumeRequest *m = (const void *)j->msg;
	struct csi_stage_request q = {
		.volume_id = m->volume_id,
		.staging_target_path = m->staging_target_path,
		.secrets = j->secrets,
		.deadline = j->deadline,
	};
	struct csi_kv *kv[2] = { NULL, NULL };
	int r = -ENOMEM;

	capability_view(m->volume_capability, &q.capability);
	if (CONTEXTS_VIEW(m, q, kv))
		r = s->ops->stage(s->userdata, &q, reply);
	contexts_free(kv);
	return r;
}

static int call_unstage(const struct csi_server *s, const struct job *j, struct csi_reply *reply)
{
	const Csi__V1__NodeUnstageVolumeRequest *m = (const void *)j->msg;
	struct csi_unstage_request q = {
		.volume_id = m->volume_id,
		.staging_target_path = m->staging_target_path,
		.deadline = j->deadline,
	};

	return s->ops->unstage(s->userdata, &q, reply);
}

static int call_publish(const struct csi_server *s, const struct job *j, struct csi_reply *reply)
{
	const Csi__V1__NodePublishVolumeRequest *m = (const void *)j->msg;
	struct csi_publish_request q = {
		.volume_id = m->volume_id,
		.staging_target_path = m->staging_target_path,
		.target_path = m->target_path,
		.readonly = m->readonly,
		.secrets = j->secrets,
		.deadline = j->deadline,
	};
	struct csi_kv *kv[2] = { NULL, NULL };
	int r = -ENOMEM;

	capability_view(m->volume_capability, &q.capability);
	if (CONTEXTS_VIEW(m, q, kv))
		r = s->ops->publish(s->userdata, &q, reply);
	contexts_free(kv);
	return r;
}

static int call_unpublish(const struct csi_server *s, const struct job *j, struct csi_reply *reply)
{
	const Csi__V1__NodeUnpublishVolumeRequest *m = (const void *)j->msg;
	struct csi_unpublish_request q = {
		.volume_id = m->volume_id,
		.target_path = m->target_path,
		.deadline = j->deadline,
	};

	return s->ops->unpublish(s->userdata, &q, reply);
}

static int call_stats(const struct csi_server *s, const struct job *j, struct csi_reply *reply)
{
	const Csi__V1__NodeGetVolumeStatsRequest *m = (const void *)j->msg;
	struct csi_stats_request q = {
		.volume_id = m->volume_id,
		.volume_path = m->volume_path,
		.staging_target_path = m->staging_target_path,
		.deadline = j->deadline,
	};

	return s->ops->get_volume_stats(s->userdata, &q, reply);
}

static int call_expand(const struct csi_server *s, const struct job *j, struct csi_reply *reply)
{
	const Csi__V1__NodeExpandVolumeRequest *m = (const void *)j->msg;
	struct csi_expand_request q = {
		.volume_id = m->volume_id,
		.volume_path = m->volume_path,
		.staging_target_path = m->staging_target_path,
		.secrets = j->secrets,
		.deadline = j->deadline,
	};

	if (m->capacity_range) {
		q.required_bytes = m->capacity_range->required_bytes;
		q.limit_bytes = m->capacity_range->limit_bytes;
	}
	capability_view(m->volume_capability, &q.capability);
	return s->ops->expand(s->userdata, &q, reply);
}

/* The OK answers of stage, unstage, publish and unpublish have no fields. */
#define REPLY_EMPTY(fn, type, init)                                             \
	static void fn(const struct csi_server *s, const struct csi_reply *rep, \
		       struct gcore_call *call)                                 \
	{                                                                       \
		type resp = init;                                               \
		gcore_call_reply_message(call, &resp.base);                     \
	}
REPLY_EMPTY(reply_stage, Csi__V1__NodeStageVolumeResponse,
	    CSI__V1__NODE_STAGE_VOLUME_RESPONSE__INIT)
REPLY_EMPTY(reply_unstage, Csi__V1__NodeUnstageVolumeResponse,
	    CSI__V1__NODE_UNSTAGE_VOLUME_RESPONSE__INIT)
REPLY_EMPTY(reply_publish, Csi__V1__NodePublishVolumeResponse,
	    CSI__V1__NODE_PUBLISH_VOLUME_RESPONSE__INIT)
REPLY_EMPTY(reply_unpublish, Csi__V1__NodeUnpublishVolumeResponse,
	    CSI__V1__NODE_UNPUBLISH_VOLUME_RESPONSE__INIT)

static void reply_stats(const struct csi_server *s, const struct csi_reply *rep,
			struct gcore_call *call)
{
	Csi__V1__NodeGetVolumeStatsResponse resp = CSI__V1__NODE_GET_VOLUME_STATS_RESPONSE__INIT;
	Csi__V1__VolumeUsage u[2] = { CSI__V1__VOLUME_USAGE__INIT, CSI__V1__VOLUME_USAGE__INIT };
	Csi__V1__VolumeUsage *list[2];
	Csi__V1__VolumeCondition cond = CSI__V1__VOLUME_CONDITION__INIT;
	const struct csi_usage *src[2] = { &rep->bytes, &rep->inodes };
	const Csi__V1__VolumeUsage__Unit units[2] = { CSI__V1__VOLUME_USAGE__UNIT__BYTES,
						      CSI__V1__VOLUME_USAGE__UNIT__INODES };
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
	gcore_call_reply_message(call, &resp.base);
}

static void reply_expand(const struct csi_server *s, const struct csi_reply *rep,
			 struct gcore_call *call)
{
	Csi__V1__NodeExpandVolumeResponse resp = CSI__V1__NODE_EXPAND_VOLUME_RESPONSE__INIT;

	resp.capacity_bytes = rep->capacity_bytes;
	gcore_call_reply_message(call, &resp.base);
}

/* --- the table ----------------------------------------------------------------------------- */

#define SECRETS(type) .n_secrets = offsetof(type, n_secrets), .secrets = offsetof(type, secrets)

static const struct csi_rpc csi_rpcs[N_RPCS] = {
	{ .path = "/csi.v1.Identity/GetPluginInfo",
	  .name = "GetPluginInfo",
	  .request = &csi__v1__get_plugin_info_request__descriptor,
	  .reply = reply_get_plugin_info },
	{ .path = "/csi.v1.Identity/GetPluginCapabilities",
	  .name = "GetPluginCapabilities",
	  .request = &csi__v1__get_plugin_capabilities_request__descriptor,
	  .reply = reply_get_plugin_capabilities },
	{ .path = "/csi.v1.Identity/Probe",
	  .name = "Probe",
	  .request = &csi__v1__probe_request__descriptor,
	  .reply = reply_probe },
	{ .path = "/csi.v1.Node/NodeGetCapabilities",
	  .name = "NodeGetCapabilities",
	  .request = &csi__v1__node_get_capabilities_request__descriptor,
	  .reply = reply_node_get_capabilities },
	{ .path = "/csi.v1.Node/NodeGetInfo",
	  .name = "NodeGetInfo",
	  .request = &csi__v1__node_get_info_request__descriptor,
	  .reply = reply_node_get_info },
	{ .path = "/csi.v1.Node/NodeStageVolume",
	  .name = "NodeStageVolume",
	  .request = &csi__v1__node_stage_volume_request__descriptor,
	  .validate = csi_validate_stage,
	  .op = offsetof(struct csi_node_ops, stage),
	  .call = call_stage,
	  .reply = reply_stage,
	  SECRETS(Csi__V1__NodeStageVolumeRequest) },
	{ .path = "/csi.v1.Node/NodeUnstageVolume",
	  .name = "NodeUnstageVolume",
	  .request = &csi__v1__node_unstage_volume_request__descriptor,
	  .validate = csi_validate_unstage,
	  .op = offsetof(struct csi_node_ops, unstage),
	  .call = call_unstage,
	  .reply = reply_unstage },
	{ .path = "/csi.v1.Node/NodePublishVolume",
	  .name = "NodePublishVolume",
	  .request = &csi__v1__node_publish_volume_request__descriptor,
	  .validate = csi_validate_publish,
	  .op = offsetof(struct csi_node_ops, publish),
	  .call = call_publish,
	  .reply = reply_publish,
	  SECRETS(Csi__V1__NodePublishVolumeRequest) },
	{ .path = "/csi.v1.Node/NodeUnpublishVolume",
	  .name = "NodeUnpublishVolume",
	  .request = &csi__v1__node_unpublish_volume_request__descriptor,
	  .validate = csi_validate_unpublish,
	  .op = offsetof(struct csi_node_ops, unpublish),
	  .call = call_unpublish,
	  .reply = reply_unpublish },
	{ .path = "/csi.v1.Node/NodeGetVolumeStats",
	  .name = "NodeGetVolumeStats",
	  .request = &csi__v1__node_get_volume_stats_request__descriptor,
	  .validate = csi_validate_stats,
	  .op = offsetof(struct csi_node_ops, get_volume_stats),
	  .call = call_stats,
	  .reply = reply_stats },
	{ .path = "/csi.v1.Node/NodeExpandVolume",
	  .name = "NodeExpandVolume",
	  .request = &csi__v1__node_expand_volume_request__descriptor,
	  .validate = csi_validate_expand,
	  .op = offsetof(struct csi_node_ops, expand),
	  .call = call_expand,
	  .reply = reply_expand,
	  SECRETS(Csi__V1__NodeExpandVolumeRequest) },
};

static const struct csi_rpc *rpc_find(const char *path)
{
	for (size_t i = 0; i < N_RPCS; i++)
		if (streq(csi_rpcs[i].path, path))
			return &csi_rpcs[i];
	return NULL;
}

static struct csi_validate_config validate_config(const struct csi_server *s)
{
	return (struct csi_validate_config){ .kubelet_root = s->kubelet_root,
					     .has_stage = has_stage(s) };
}

static bool unimplemented(const struct csi_rpc *rpc, const struct csi_node_ops *ops,
			  struct csi_reply *reply)
{
	if (!rpc->validate || rpc_has_op(rpc, ops))
		return false;
	csi_reply_set(reply, CSI_UNIMPLEMENTED, "%s is not implemented by this driver", rpc->name);
	return true;
}

/* Wipes the secret values in j's decoded request. */
static void job_wipe_msg_secrets(struct job *j)
{
	struct pb_map_entry **e;
	size_t n = request_secrets(j->rpc, j->msg, &e);

	for (size_t i = 0; i < n; i++)
		if (e[i]->value)
			explicit_bzero(e[i]->value, strlen(e[i]->value));
}

/* Copies the secrets of j's decoded request into j->secrets, in memory left out of core
 * dumps, and wipes them in the request.  Returns 0 or -ENOMEM (they are wiped then too). */
static int job_take_secrets(struct job *j)
{
	struct pb_map_entry **e;
	size_t n = request_secrets(j->rpc, j->msg, &e), size = n * sizeof(struct csi_kv);
	struct csi_kv *kv;
	char *p;

	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++)
		size += strlen(e[i]->key ? e[i]->key : "") +
			strlen(e[i]->value ? e[i]->value : "") + 2;
	kv = secret_mem_alloc(size);
	if (kv) {
		p = (char *)(kv + n);
		for (size_t i = 0; i < n; i++) {
			kv[i].key = p;
			p = stpcpy(p, e[i]->key ? e[i]->key : "") + 1;
			kv[i].value = p;
			p = stpcpy(p, e[i]->value ? e[i]->value : "") + 1;
		}
		j->secret_mem = kv;
		j->secrets = (struct csi_map){ .items = kv, .n = n };
	}
	job_wipe_msg_secrets(j);
	return kv ? 0 : -ENOMEM;
}

/* Decodes data for rpc, checks it and fills j; false with reply set when refused. */
static bool job_prepare(const struct csi_server *s, struct job *j, const void *data, size_t len,
			struct csi_reply *reply)
{
	struct csi_validate_config vc = validate_config(s);
	struct csi_verdict v = { 0 };

	bool valid;

	j->msg = protobuf_c_message_unpack(j->rpc->request, NULL, len, data);
	gcore_call_wipe_request(j->call); /* decoded: its bytes may hold secrets */
	if (!j->msg) {
		csi_reply_set(reply, CSI_INVALID_ARGUMENT, "request: cannot decode");
		return false;
	}
	valid = !j->rpc->validate || j->rpc->validate(&vc, j->msg, &j->info, &v);
	/* The validation measured the secrets in msg: from here on only their copy exists. */
	if (job_take_secrets(j) < 0) {
		csi_reply_set(reply, CSI_RESOURCE_EXHAUSTED, "out of memory");
		return false;
	}
	if (!valid)
		csi_reply_set(reply, v.code, "%.*s", (int)sizeof(reply->message) - 1, v.message);
	return valid;
}

/* Whether the whole of path resolves with no symlink in it, in one openat2(2) (O_PATH: nothing
 * is opened for I/O, no automount, no device open): true when it resolves, or when a missing
 * component (ENOENT, ENOTDIR) ends it, since the components before it were then resolved
 * without following any symlink.  False on anything else (a symlink anywhere, also above the
 * kubelet root, which is allowed; an error; a kernel before 5.6): the walk below decides. */
static bool no_symlink_at_all(const char *path)
{
	int fd = path_open_no_symlinks(AT_FDCWD, path, 0, false);

	if (fd >= 0) {
		close(fd);
		return true;
	}
	return fd == -ENOENT || fd == -ENOTDIR;
}

/* No component of path below the kubelet root is a symlink.  Components that do not exist
 * end the walk (the backend creates them); other lstat errors (a dead FUSE or NFS mount at
 * the target answers ENOTCONN or ESTALE) are no symlink either.  The usual case, no symlink
 * anywhere in path, takes one syscall (no_symlink_at_all) instead of one statx per component
 * below the root; only the others are walked, which also names the symlink. */
static bool check_no_symlink(const struct csi_server *s, const char *field, const char *path,
			     struct csi_reply *reply)
{
	size_t rl = strlen(s->kubelet_root);
	_cleanup_free_ char *p = NULL;

	if (!path || !*path || no_symlink_at_all(path))
		return true;
	p = strdup(path);
	if (!p) {
		csi_reply_set(reply, CSI_RESOURCE_EXHAUSTED, "out of memory");
		return false;
	}
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
			csi_reply_set(reply, CSI_INVALID_ARGUMENT, "%s: %s is a symlink", field, p);
			return false;
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

bool csi_server_volume_take(struct csi_server *s, const char *volume_id)
{
	return inflight_take(s, volume_id, false);
}

void csi_server_volume_release(struct csi_server *s, const char *volume_id)
{
	inflight_release(s, volume_id, false);
}

/* --- jobs ---------------------------------------------------------------------------------- */

/* Wipes the secrets of j's request (its copy too) and frees it. */
static void job_release_msg(struct job *j)
{
	if (!j->msg)
		return;
	job_wipe_msg_secrets(j);
	protobuf_c_message_free_unpacked(j->msg, NULL);
	j->msg = NULL;
	secret_mem_free(j->secret_mem);
	j->secret_mem = NULL;
	j->secrets = (struct csi_map){ 0 };
}

static struct job *job_free(struct job *j)
{
	if (!j || atomic_fetch_sub(&j->refs, 1) > 1)
		return NULL;
	job_release_msg(j);
	free(j);
	return NULL;
}

static bool is_draining(struct csi_server *s)
{
	bool d;

	pthread_mutex_lock(&s->lock);
	d = s->draining;
	pthread_mutex_unlock(&s->lock);
	return d;
}

/* The part of a job that passed the checks: the symlink walk, then the op.  Returns true
 * when the op deferred its answer: j is then the backend's (it may be gone already). */
static bool job_call(const struct csi_server *s, struct job *j, struct csi_reply *reply)
{
	int r;

	if (!check_no_symlink(s, j->info.path_field[0], j->info.path[0], reply) ||
	    !check_no_symlink(s, j->info.path_field[1], j->info.path[1], reply))
		return false;
	log_debug("csi", "CSI call started", "method", j->rpc->name, "volume", j->info.volume_id);
	reply->call_ref = j;
	r = j->rpc->call(s, j, reply);
	if (r == CSI_DEFERRED)
		return true;
	reply->call_ref = NULL;
	reply_settle(r, reply);
	return false;
}

/* Frees j's slot and sends reply as its answer; then j holds no call. */
static void job_answer(struct csi_server *s, struct job *j, struct csi_reply *reply)
{
	/* Free the slot before answering: kubelet may call again as soon as it has the answer. */
	inflight_release(s, j->info.volume_id, j->info.stats_slot);
	answer(s, j->rpc, j->call, &j->secrets, j->info.volume_id, reply);
	j->call = NULL;
}

/* On a pool thread: everything between the in-flight slot and the answer.  Returns true when
 * the op deferred the answer (j is no longer the caller's). */
static bool job_run(struct csi_server *s, struct job *j, bool draining)
{
	struct csi_reply *reply = &j->reply;

	memset(reply, 0, sizeof(*reply));
	if (draining)
		csi_reply_set(reply, CSI_UNAVAILABLE, "the driver is shutting down");
	else if (csi_deadline_remaining_ms(&j->deadline) == 0)
		csi_reply_set(reply, CSI_DEADLINE_EXCEEDED,
			      "deadline passed while the request waited to be served");
	else if (job_call(s, j, reply))
		return true;
	job_answer(s, j, reply);
	return false;
}

struct csi_deferred *csi_reply_defer(struct csi_reply *reply)
{
	struct job *j = reply->call_ref;

	if (!j)
		return NULL;
	pthread_mutex_lock(&j->s->lock);
	j->next_deferred = j->s->deferred;
	if (j->next_deferred)
		j->next_deferred->pprev_deferred = &j->next_deferred;
	j->pprev_deferred = &j->s->deferred;
	j->s->deferred = j;
	pthread_mutex_unlock(&j->s->lock);
	return (struct csi_deferred *)j;
}

struct csi_reply *csi_deferred_reply(struct csi_deferred *d)
{
	return &((struct job *)d)->reply;
}

/* Takes j off s->deferred (under s->lock), in constant time.  False when it is no longer
 * there (claimed). */
static bool deferred_take_locked(struct job *j)
{
	if (!j->pprev_deferred)
		return false;
	*j->pprev_deferred = j->next_deferred;
	if (j->next_deferred)
		j->next_deferred->pprev_deferred = j->pprev_deferred;
	j->pprev_deferred = NULL;
	return true;
}

void csi_deferred_finish(struct csi_deferred *d, int r)
{
	struct job *j = (struct job *)d;
	struct csi_server *s = j->s;
	bool mine = false;

	/* A claimed job was answered at shutdown, and the server may be gone since. */
	if (!atomic_load(&j->claimed)) {
		pthread_mutex_lock(&s->lock);
		mine = !atomic_load(&j->claimed) && deferred_take_locked(j);
		pthread_mutex_unlock(&s->lock);
	}
	if (mine) {
		j->reply.call_ref = NULL;
		reply_settle(r, &j->reply);
		job_answer(s, j, &j->reply);
	}
	job_free(j);
}

/* The grace of a shutdown is over: the calls still deferred are answered UNAVAILABLE now.
 * Their ops finish them later, which then only frees them (the server may be freed before). */
static void deferred_claim_all(struct csi_server *s)
{
	struct job *list, *j, *next;

	pthread_mutex_lock(&s->lock);
	list = s->deferred;
	s->deferred = NULL;
	for (j = list; j; j = j->next_deferred) {
		j->pprev_deferred = NULL;
		atomic_store(&j->claimed, true);
		atomic_fetch_add(&j->refs, 1);
	}
	pthread_mutex_unlock(&s->lock);
	for (j = list; j; j = next) {
		struct csi_reply reply = { 0 }; /* j->reply is the op's until it finishes */

		next = j->next_deferred;
		csi_reply_set(&reply, CSI_UNAVAILABLE, "the driver is shutting down");
		job_answer(s, j, &reply);
		job_free(j);
	}
}

/* --- the handler every method shares ------------------------------------------------------ */

static void handle_call(struct gcore_call *call, void *userdata)
{
	struct method_ctx *ctx = userdata;
	struct csi_server *s = ctx->s;
	const struct csi_rpc *rpc = ctx->rpc;
	struct csi_reply reply;
	struct job *j;
	const void *data;
	size_t len;

	memset(&reply, 0, sizeof(reply));
	data = gcore_call_request(call, &len);
	j = calloc(1, sizeof(*j));
	if (!j) {
		csi_reply_set(&reply, CSI_RESOURCE_EXHAUSTED, "out of memory");
		answer(s, rpc, call, NULL, NULL, &reply);
		return;
	}
	j->s = s;
	j->rpc = rpc;
	j->call = call;
	atomic_init(&j->refs, 1);
	atomic_init(&j->claimed, false);
	gcore_call_deadline(call, &j->deadline);
	if (!data)
		csi_reply_set(&reply, CSI_INVALID_ARGUMENT, "request: no message");
	else if (unimplemented(rpc, s->ops, &reply) || !job_prepare(s, j, data, len, &reply))
		; /* refused */
	else if (!rpc->validate)
		; /* answered inline from the server's settings */
	else if (atomic_load(&s->stopping) && gcore_stopping(s->g))
		/* Arrived just before the shutdown began; nobody waits on a new op now. */
		csi_reply_set(&reply, CSI_UNAVAILABLE, "the driver is shutting down");
	else if (!inflight_take(s, j->info.volume_id, j->info.stats_slot))
		csi_reply_set(&reply, CSI_ABORTED,
			      "an operation on volume %s is already in progress",
			      j->info.volume_id);
	else {
		if (!job_run(s, j, is_draining(s)))
			job_free(j);
		return;
	}
	answer(s, rpc, call, &j->secrets,
	       j->info.volume_id && *j->info.volume_id ? j->info.volume_id : NULL, &reply);
	job_free(j);
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
	if (!topology_prefix_valid(cfg->driver_name)) {
		err_set(err, -EINVAL,
			"driver name \"%s\": the topology key NodeGetInfo reports, \"" CSI_TOPOLOGY_KEY_PREFIX
			"%s" CSI_TOPOLOGY_KEY_SUFFIX
			"\", would be no valid Kubernetes label key and "
			"kubelet's registration would fail: use lowercase letters, digits, '-' and "
			"single '.'",
			cfg->driver_name, cfg->driver_name);
		return NULL;
	}
	root = cfg->kubelet_root && *cfg->kubelet_root ? cfg->kubelet_root
						       : CSI_DEFAULT_KUBELET_ROOT;
	if (!csi_path_normalized(root)) {
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
	s->ops = ops ? ops : &no_ops;
	s->userdata = userdata;
	s->gid = (gid_t)-1;
	s->max_volumes_per_node = cfg->max_volumes_per_node;
	s->n_workers = cfg->workers > 0 ? cfg->workers : CSI_DEFAULT_WORKERS;
	s->grace_ms = cfg->grace_ms >= 0 ? cfg->grace_ms : CSI_DEFAULT_GRACE_MS;
	s->registration = cfg->registration;
	s->controller = cfg->controller;
	atomic_init(&s->ready, false);
	atomic_init(&s->stopping, false);
	s->driver_name = strdup(cfg->driver_name);
	s->topology_key = strdup_printf(CSI_TOPOLOGY_KEY_PREFIX "%s" CSI_TOPOLOGY_KEY_SUFFIX,
					cfg->driver_name);
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
	if (!s->driver_name || !s->topology_key || !s->kubelet_root || !s->node_id) {
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
	struct gcore_config gc = { 0 };
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
	gc.pool_threads = s->n_workers;
	gc.max_receive_bytes = CSI_MAX_REQUEST_BYTES;
	/* gRPC reads what a client sends before its receive limit refuses the message, in
	 * buffers of up to the limit.  glibc raises its mmap threshold to the size of each large
	 * block freed, so such buffers come from the threads' arenas and stay there as free
	 * memory: 1,000 refused 1 MiB requests left 6-11 MiB more RSS (28 MiB before the limit;
	 * 6-11 MiB with the threshold fixed at its default 128 KiB).  A threshold fixed at 64 KiB
	 * hands every such buffer back to the kernel when it is freed: +1.2 MiB.
	 * malloc_reserve()'s blocks stay below it. */
	(void)mallopt(M_MMAP_THRESHOLD, 64 * 1024);
	s->g = gcore_new(&gc, err);
	if (!s->g)
		return err->code;
	for (int i = 0; i < N_RPCS; i++) {
		s->ctx[i] = (struct method_ctx){ .s = s, .rpc = &csi_rpcs[i] };
		/* The volume RPCs block (their ops wait for mounts); the rest are answered inline. */
		r = csi_rpcs[i].validate
			    ? gcore_add_blocking_method(s->g, csi_rpcs[i].path, handle_call,
							&s->ctx[i])
			    : gcore_add_method(s->g, csi_rpcs[i].path, handle_call, &s->ctx[i]);
		if (r < 0) {
			s->g = gcore_free(s->g);
			return err_set(err, r, "cannot register %s", csi_rpcs[i].path);
		}
	}
	if (s->controller) {
		r = csi_controller_add_methods(s->controller, s, s->g, err);
		if (r < 0) {
			s->g = gcore_free(s->g);
			return r;
		}
	}

	s->started = true;
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
		 s->node_id, "topology_key", s->topology_key, "registration",
		 s->reg ? registration_socket_path(s->reg) : "off", "abseil_deadlock_detection",
		 gcore_deadlock_detection_off() ? "off" : "on");
	return 0;

out_stop:
	csi_server_shutdown(s, 0);
	s->reg = registration_free(s->reg);
	s->g = gcore_free(s->g);
	return r;
}

const char *csi_server_node_id(const struct csi_server *s)
{
	return s->node_id;
}

const char *csi_server_topology_key(const struct csi_server *s)
{
	return s->topology_key;
}

void csi_server_set_ready(struct csi_server *s, bool ready)
{
	atomic_store(&s->ready, ready);
}

bool csi_server_stopping(const struct csi_server *s)
{
	return atomic_load(&((struct csi_server *)s)->stopping);
}

/* The grace has passed: queued jobs are answered UNAVAILABLE without their op. */
static void on_grace_expired(void *userdata)
{
	struct csi_server *s = userdata;

	pthread_mutex_lock(&s->lock);
	s->draining = true;
	pthread_mutex_unlock(&s->lock);
	deferred_claim_all(s);
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
	/* No call is owned any more: no op runs, and gRPC's pool threads have stopped. */
	s->leaked = false;
	return 0;
}

struct csi_server *csi_server_free(struct csi_server *s)
{
	if (!s)
		return NULL;
	/* An op still runs and will touch s: leak rather than crash.  After a shutdown that
	 * gave up (the caller was told, and logs it), without waiting again. */
	if (s->leaked || (s->started && csi_server_shutdown(s, 0) < 0)) {
		log_debug("csi", "a CSI op has not returned, not freeing the server", "socket",
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
	free(s->socket_path);
	free(s->driver_name);
	free(s->node_id);
	free(s->topology_key);
	free(s->kubelet_root);
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
	/* Without ops, only whether stage and unstage exist matters to the checks. */
	static const struct csi_node_ops with_stage = {
		.stage = check_stage_noop,
		.unstage = check_unstage_noop,
	};
	static const struct csi_node_ops no_ops;
	const char *root = cfg->kubelet_root && *cfg->kubelet_root ? cfg->kubelet_root
								   : CSI_DEFAULT_KUBELET_ROOT;
	const struct csi_rpc *rpc = rpc_find(method);
	struct csi_server s = { 0 };
	struct job j = { 0 };
	int r = 0;

	memset(ret_reply, 0, sizeof(*ret_reply));
	if (!rpc)
		return -ENOENT;
	/* The server's own view: the root without a trailing '/', "" for "/"; whether staging
	 * is served follows from the ops when given, as in the server. */
	s.kubelet_root = strdup(streq(root, "/") ? "" : root);
	if (!s.kubelet_root)
		return -ENOMEM;
	s.ops = cfg->ops ? cfg->ops : cfg->has_stage ? &with_stage : &no_ops;
	s.userdata = cfg->userdata;
	j.rpc = rpc;
	if (!job_prepare(&s, &j, data, len, ret_reply)) {
		r = -EINVAL;
	} else if (!rpc->validate) {
		/* answered by the queue thread from the server's settings alone */
	} else if (cfg->check_fs &&
		   (!check_no_symlink(&s, j.info.path_field[0], j.info.path[0], ret_reply) ||
		    !check_no_symlink(&s, j.info.path_field[1], j.info.path[1], ret_reply))) {
		r = -EINVAL;
	} else if (!cfg->ops) {
		/* reaches the backend */
	} else if (unimplemented(rpc, cfg->ops, ret_reply)) {
		r = -ENOSYS;
	} else {
		/* As a worker answers. */
		r = rpc->call(&s, &j, ret_reply);
		if (r >= 0 && ret_reply->code != CSI_OK && !ret_reply->message[0])
			r = -EIO;
		reply_settle(r, ret_reply);
	}
	scrub_message(&j.secrets, ret_reply->message, sizeof(ret_reply->message));
	scrub_message(&j.secrets, ret_reply->condition_message,
		      sizeof(ret_reply->condition_message));
	job_release_msg(&j);
	free(s.kubelet_root);
	return r;
}
