/* csi-controller.c - the CSI Controller service for node-local directory volumes.  See
 * csi-controller.h; the policy (ids, base paths, sizes, capacity) is the local plugin's
 * (plugins/local-provision.h).
 *
 * One table row per served RPC: its path, request descriptor, where its request keeps secrets
 * and the function that runs it.  A run function checks the request (every missing required
 * field first, then malformed ones, each naming the field), calls the policy and sends the OK
 * answer itself; on failure it returns a negative errno with the reply's code and message set,
 * and handle() answers and logs once. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csi.pb-c.h"

#include "csi-controller.h"
#include "csi-server.h"
#include "local-provision.h"
#include "log.h"
#include "macro.h"

#define N_METHODS 6
#define INFO_WAIT_MS 10000

struct csi_controller;

struct ctrl_method {
	const char *path;
	const char *name;
	const ProtobufCMessageDescriptor *request;
	/* Offsets of n_secrets and secrets in the request; 0 when it has none. */
	size_t n_secrets, secrets;
	int (*run)(struct csi_controller *c, const ProtobufCMessage *msg, struct gcore_call *call,
		   struct csi_reply *reply, const char **ret_volume);
};

struct method_ctx {
	struct csi_controller *c;
	const struct ctrl_method *m;
};

struct csi_controller {
	struct reconciler *reconciler;
	struct csi_server *s;
	pthread_mutex_t lock; /* one call at a time */
	struct method_ctx ctx[N_METHODS];
};

struct pb_map_entry {
	ProtobufCMessage base;
	char *key;
	char *value;
};

/* --- checks shared by the calls -------------------------------------------------------- */

static bool single_node(Csi__V1__VolumeCapability__AccessMode__Mode m)
{
	return m == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER ||
	       m == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY ||
	       m == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER ||
	       m == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER;
}

/* One volume capability, field[i]: -EINVAL when a required part is missing, -EOPNOTSUPP when
 * a local directory cannot have it; reply says which (INVALID_ARGUMENT). */
static int check_capability(const Csi__V1__VolumeCapability *cap, const char *field, size_t i,
			    struct csi_reply *reply)
{
	if (!cap->access_mode ||
	    cap->access_mode->mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__UNKNOWN) {
		csi_reply_set(reply, CSI_INVALID_ARGUMENT, "%s[%zu].access_mode: required", field,
			      i);
		return -EINVAL;
	}
	if (cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE__NOT_SET) {
		csi_reply_set(reply, CSI_INVALID_ARGUMENT,
			      "%s[%zu]: access_type required (mount or block)", field, i);
		return -EINVAL;
	}
	if (cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK) {
		csi_reply_set(reply, CSI_INVALID_ARGUMENT,
			      "%s[%zu].block: a local directory volume is no block device", field,
			      i);
		return -EOPNOTSUPP;
	}
	if (cap->mount && cap->mount->fs_type && *cap->mount->fs_type) {
		csi_reply_set(reply, CSI_INVALID_ARGUMENT,
			      "%s[%zu].mount.fs_type: \"%s\", but a local directory volume has no "
			      "filesystem of its own",
			      field, i, cap->mount->fs_type);
		return -EOPNOTSUPP;
	}
	if (!single_node(cap->access_mode->mode)) {
		csi_reply_set(reply, CSI_INVALID_ARGUMENT,
			      "%s[%zu].access_mode: a local directory is on one node only (a "
			      "SINGLE_NODE_* mode)",
			      field, i);
		return -EOPNOTSUPP;
	}
	return 0;
}

/* Every capability of a list (required: at least one). */
static int check_capabilities(Csi__V1__VolumeCapability **caps, size_t n, const char *field,
			      struct csi_reply *reply)
{
	if (n == 0) {
		csi_reply_set(reply, CSI_INVALID_ARGUMENT, "%s: required", field);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		int r = check_capability(caps[i], field, i, reply);

		if (r < 0)
			return r;
	}
	return 0;
}

/* Whether topology t is this node: its segment under the driver's key is this node's id, and
 * it has no key of another driver (a segment this node cannot match). */
static bool topology_is_here(const struct csi_controller *c, const Csi__V1__Topology *t)
{
	bool ours = false;

	for (size_t i = 0; i < t->n_segments; i++) {
		if (!streq(t->segments[i]->key, csi_server_topology_key(c->s)) ||
		    !streq(t->segments[i]->value, csi_server_node_id(c->s)))
			return false;
		ours = true;
	}
	return ours;
}

/* The StorageClass parameters (a protobuf map) into params.  -EINVAL with reply set. */
static int take_params(void **entries, size_t n, struct local_prov_params *params,
		       struct csi_reply *reply)
{
	local_prov_params_init(params);
	for (size_t i = 0; i < n; i++) {
		const struct pb_map_entry *e = entries[i];
		struct error_info err = { 0 };

		if (local_prov_param_set(params, e->key, e->value, &err) < 0) {
			csi_reply_set(reply, CSI_INVALID_ARGUMENT, "parameters: %s", err_msg(&err));
			return -EINVAL;
		}
	}
	return 0;
}

/* A failure of the local plugin's policy as the CSI answer. */
static int policy_failed(int r, const struct error_info *err, struct csi_reply *reply)
{
	enum csi_code code;

	switch (-r) {
	case EINVAL:
	case ENOENT:
	case ENOTDIR:
	case ELOOP:
		code = CSI_INVALID_ARGUMENT;
		break;
	case EEXIST:
		code = CSI_ALREADY_EXISTS;
		break;
	case ENOSPC:
		code = CSI_RESOURCE_EXHAUSTED;
		break;
	case ERANGE:
		code = CSI_OUT_OF_RANGE;
		break;
	case EOPNOTSUPP:
	case EPERM:
	case EBUSY:
		code = CSI_FAILED_PRECONDITION;
		break;
	default:
		code = csi_code_from_errno(r);
	}
	csi_reply_set(reply, code, "%s", err_msg(err));
	return r;
}

/* --- the calls --------------------------------------------------------------------------- */

static int create_volume(struct csi_controller *c, const ProtobufCMessage *msg,
			 struct gcore_call *call, struct csi_reply *reply, const char **ret_volume)
{
	const Csi__V1__CreateVolumeRequest *q = (const void *)msg;
	const Csi__V1__TopologyRequirement *req = q->accessibility_requirements;
	Csi__V1__CreateVolumeResponse resp = CSI__V1__CREATE_VOLUME_RESPONSE__INIT;
	Csi__V1__Volume vol = CSI__V1__VOLUME__INIT;
	Csi__V1__Volume__VolumeContextEntry ctx[3] = { CSI__V1__VOLUME__VOLUME_CONTEXT_ENTRY__INIT,
						       CSI__V1__VOLUME__VOLUME_CONTEXT_ENTRY__INIT,
						       CSI__V1__VOLUME__VOLUME_CONTEXT_ENTRY__INIT };
	Csi__V1__Volume__VolumeContextEntry *ctx_list[3] = { &ctx[0], &ctx[1], &ctx[2] };
	Csi__V1__Topology topo = CSI__V1__TOPOLOGY__INIT;
	Csi__V1__Topology__SegmentsEntry seg = CSI__V1__TOPOLOGY__SEGMENTS_ENTRY__INIT;
	Csi__V1__Topology__SegmentsEntry *segs[1] = { &seg };
	Csi__V1__Topology *topos[1] = { &topo };
	struct local_prov_params params;
	struct local_prov_volume v;
	struct error_info err = { 0 };
	char size[32];
	bool here = false;
	int r;

	*ret_volume = q->name;
	if (!*q->name) {
		csi_reply_set(reply, CSI_INVALID_ARGUMENT, "name: required");
		return -EINVAL;
	}
	r = check_capabilities(q->volume_capabilities, q->n_volume_capabilities,
			       "volume_capabilities", reply);
	if (r < 0)
		return r;
	if (q->volume_content_source) {
		csi_reply_set(reply, CSI_INVALID_ARGUMENT,
			      "volume_content_source: a local directory volume starts empty (no "
			      "snapshots, no clones)");
		return -EINVAL;
	}
	r = take_params((void **)q->parameters, q->n_parameters, &params, reply);
	if (r < 0)
		return r;
	for (size_t i = 0; req && i < req->n_requisite; i++)
		here = here || topology_is_here(c, req->requisite[i]);
	if (req && req->n_requisite && !here) {
		csi_reply_set(reply, CSI_RESOURCE_EXHAUSTED,
			      "accessibility_requirements: no requisite topology is this node "
			      "(%s=%s); its volumes are made on it only",
			      csi_server_topology_key(c->s), csi_server_node_id(c->s));
		return -ENOSPC;
	}
	pthread_mutex_lock(&c->lock);
	r = local_prov_create(q->name, &params,
			      q->capacity_range ? q->capacity_range->required_bytes : 0,
			      q->capacity_range ? q->capacity_range->limit_bytes : 0, &v, &err);
	pthread_mutex_unlock(&c->lock);
	if (r < 0)
		return policy_failed(r, &err, reply);

	vol.volume_id = v.id;
	vol.capacity_bytes = (int64_t)v.size;
	ctx[0].key = "type";
	ctx[0].value = "local";
	ctx[1].key = "basePath";
	ctx[1].value = v.base_path;
	vol.n_volume_context = 2;
	if (v.enforce && v.size) {
		/* The node sets the project quota from it at every set-up. */
		snprintf(size, sizeof(size), "%" PRIu64, v.size);
		ctx[2].key = "size";
		ctx[2].value = size;
		vol.n_volume_context = 3;
	}
	vol.volume_context = ctx_list;
	seg.key = (char *)csi_server_topology_key(c->s);
	seg.value = (char *)csi_server_node_id(c->s);
	topo.n_segments = 1;
	topo.segments = segs;
	vol.n_accessible_topology = 1;
	vol.accessible_topology = topos;
	resp.volume = &vol;
	gcore_call_reply_message(call, &resp.base);
	return 0;
}

/* FAILED_PRECONDITION when the reconciler has volume_id staged or published on this node. */
static int check_unused(struct csi_controller *c, const char *volume_id, struct csi_reply *reply)
{
	struct volume_request *req;
	struct volume_request_result res = { 0 };
	int r;

	if (!c->reconciler)
		return 0;
	req = volume_request_new(VOLUME_REQUEST_INFO);
	if (!req || !(req->volume_id = strdup(volume_id))) {
		volume_request_free(req);
		return -ENOMEM;
	}
	r = reconciler_request(c->reconciler, req, INFO_WAIT_MS, &res);
	if (r == -ETIMEDOUT) {
		csi_reply_set(reply, CSI_ABORTED, "the agent is busy; call again");
		return r;
	}
	if (r < 0)
		return r;
	if (res.known) {
		csi_reply_set(reply, CSI_FAILED_PRECONDITION,
			      "volume %s is staged or published on this node; unpublish and "
			      "unstage it first",
			      volume_id);
		return -EBUSY;
	}
	return 0;
}

static int delete_volume(struct csi_controller *c, const ProtobufCMessage *msg,
			 struct gcore_call *call, struct csi_reply *reply, const char **ret_volume)
{
	const Csi__V1__DeleteVolumeRequest *q = (const void *)msg;
	Csi__V1__DeleteVolumeResponse resp = CSI__V1__DELETE_VOLUME_RESPONSE__INIT;
	struct error_info err = { 0 };
	int r;

	*ret_volume = q->volume_id;
	if (!*q->volume_id) {
		csi_reply_set(reply, CSI_INVALID_ARGUMENT, "volume_id: required");
		return -EINVAL;
	}
	/* A volume that does not exist is deleted (the spec: OK), an id of another driver too. */
	if (!local_prov_id_parse(q->volume_id, NULL)) {
		gcore_call_reply_message(call, &resp.base);
		return 0;
	}
	if (!csi_server_volume_take(c->s, q->volume_id)) {
		csi_reply_set(reply, CSI_ABORTED,
			      "an operation on volume %s is already in progress", q->volume_id);
		return -EAGAIN;
	}
	r = check_unused(c, q->volume_id, reply);
	if (r == 0) {
		pthread_mutex_lock(&c->lock);
		r = local_prov_delete(q->volume_id, &err);
		pthread_mutex_unlock(&c->lock);
		if (r < 0)
			policy_failed(r, &err, reply);
	}
	csi_server_volume_release(c->s, q->volume_id);
	if (r == 0)
		gcore_call_reply_message(call, &resp.base);
	return r;
}

static int get_capacity(struct csi_controller *c, const ProtobufCMessage *msg,
			struct gcore_call *call, struct csi_reply *reply, const char **ret_volume)
{
	const Csi__V1__GetCapacityRequest *q = (const void *)msg;
	Csi__V1__GetCapacityResponse resp = CSI__V1__GET_CAPACITY_RESPONSE__INIT;
	Google__Protobuf__Int64Value max = GOOGLE__PROTOBUF__INT64_VALUE__INIT;
	struct local_prov_params params;
	struct error_info err = { 0 };
	uint64_t bytes = 0;
	bool none = false;
	int r;

	r = take_params((void **)q->parameters, q->n_parameters, &params, reply);
	if (r < 0)
		return r;
	/* Nothing for another node's segment, for a capability a local directory lacks, or
	 * for parameters without a basePath (CreateVolume makes no volume for them). */
	if ((q->accessible_topology && !topology_is_here(c, q->accessible_topology)) ||
	    !params.base_path[0])
		none = true;
	for (size_t i = 0; i < q->n_volume_capabilities; i++) {
		struct csi_reply ignored = { 0 };

		r = check_capability(q->volume_capabilities[i], "volume_capabilities", i, &ignored);
		if (r == -EOPNOTSUPP)
			none = true;
		else if (r < 0) {
			*reply = ignored;
			return r;
		}
	}
	if (!none) {
		pthread_mutex_lock(&c->lock);
		r = local_prov_capacity(params.base_path, &bytes, &err);
		pthread_mutex_unlock(&c->lock);
		if (r < 0)
			return policy_failed(r, &err, reply);
	}
	resp.available_capacity = (int64_t)bytes;
	/* A volume of all of it is the largest CreateVolume takes now. */
	max.value = (int64_t)bytes;
	resp.maximum_volume_size = &max;
	gcore_call_reply_message(call, &resp.base);
	return 0;
}

static int get_capabilities(struct csi_controller *c, const ProtobufCMessage *msg,
			    struct gcore_call *call, struct csi_reply *reply,
			    const char **ret_volume)
{
	static const Csi__V1__ControllerServiceCapability__RPC__Type types[] = {
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_VOLUME,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_CAPACITY,
		CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME,
	};
	Csi__V1__ControllerGetCapabilitiesResponse resp =
		CSI__V1__CONTROLLER_GET_CAPABILITIES_RESPONSE__INIT;
	Csi__V1__ControllerServiceCapability__RPC rpc[ARRAY_SIZE(types)];
	Csi__V1__ControllerServiceCapability caps[ARRAY_SIZE(types)];
	Csi__V1__ControllerServiceCapability *list[ARRAY_SIZE(types)];

	for (size_t i = 0; i < ARRAY_SIZE(types); i++) {
		csi__v1__controller_service_capability__rpc__init(&rpc[i]);
		csi__v1__controller_service_capability__init(&caps[i]);
		rpc[i].type = types[i];
		caps[i].type_case = CSI__V1__CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC;
		caps[i].rpc = &rpc[i];
		list[i] = &caps[i];
	}
	resp.n_capabilities = ARRAY_SIZE(types);
	resp.capabilities = list;
	gcore_call_reply_message(call, &resp.base);
	return 0;
}

/* The volume id, which must exist: 0 with *ret, or NOT_FOUND / the policy's failure. */
static int find_volume(struct csi_controller *c, const char *id, struct local_prov_volume *ret,
		       struct csi_reply *reply)
{
	struct error_info err = { 0 };
	int r;

	pthread_mutex_lock(&c->lock);
	r = local_prov_lookup(id, ret, &err);
	pthread_mutex_unlock(&c->lock);
	if (r < 0)
		return policy_failed(r, &err, reply);
	if (r == 0) {
		csi_reply_set(reply, CSI_NOT_FOUND, "volume_id: volume %s does not exist", id);
		return -ENOENT;
	}
	return 0;
}

static int validate_capabilities(struct csi_controller *c, const ProtobufCMessage *msg,
				 struct gcore_call *call, struct csi_reply *reply,
				 const char **ret_volume)
{
	const Csi__V1__ValidateVolumeCapabilitiesRequest *q = (const void *)msg;
	Csi__V1__ValidateVolumeCapabilitiesResponse resp =
		CSI__V1__VALIDATE_VOLUME_CAPABILITIES_RESPONSE__INIT;
	Csi__V1__ValidateVolumeCapabilitiesResponse__Confirmed confirmed =
		CSI__V1__VALIDATE_VOLUME_CAPABILITIES_RESPONSE__CONFIRMED__INIT;
	struct local_prov_volume v;
	struct csi_reply why = { 0 };
	int r;

	*ret_volume = q->volume_id;
	if (!*q->volume_id) {
		csi_reply_set(reply, CSI_INVALID_ARGUMENT, "volume_id: required");
		return -EINVAL;
	}
	if (q->n_volume_capabilities == 0) {
		csi_reply_set(reply, CSI_INVALID_ARGUMENT, "volume_capabilities: required");
		return -EINVAL;
	}
	r = find_volume(c, q->volume_id, &v, reply);
	if (r < 0)
		return r;
	r = check_capabilities(q->volume_capabilities, q->n_volume_capabilities,
			       "volume_capabilities", &why);
	if (r == -EINVAL) {
		*reply = why;
		return r;
	}
	if (r == 0) {
		/* What was asked is confirmed as it came.  The maps' entries are the request's
		 * entry types: the same two fields (key 1, value 2), so they pack the same. */
		confirmed.n_volume_capabilities = q->n_volume_capabilities;
		confirmed.volume_capabilities = q->volume_capabilities;
		confirmed.n_volume_context = q->n_volume_context;
		confirmed.volume_context = (void *)q->volume_context;
		confirmed.n_parameters = q->n_parameters;
		confirmed.parameters = (void *)q->parameters;
		resp.confirmed = &confirmed;
	} else {
		resp.message = why.message;
	}
	gcore_call_reply_message(call, &resp.base);
	return 0;
}

static int expand_volume(struct csi_controller *c, const ProtobufCMessage *msg,
			 struct gcore_call *call, struct csi_reply *reply, const char **ret_volume)
{
	const Csi__V1__ControllerExpandVolumeRequest *q = (const void *)msg;
	Csi__V1__ControllerExpandVolumeResponse resp =
		CSI__V1__CONTROLLER_EXPAND_VOLUME_RESPONSE__INIT;
	struct error_info err = { 0 };
	uint64_t size;
	int r;

	*ret_volume = q->volume_id;
	if (!*q->volume_id) {
		csi_reply_set(reply, CSI_INVALID_ARGUMENT, "volume_id: required");
		return -EINVAL;
	}
	if (!q->capacity_range) {
		csi_reply_set(reply, CSI_INVALID_ARGUMENT, "capacity_range: required");
		return -EINVAL;
	}
	if (q->volume_capability) {
		r = check_capability(q->volume_capability, "volume_capability", 0, reply);
		if (r < 0)
			return -EINVAL;
	}
	if (!local_prov_id_parse(q->volume_id, NULL)) {
		csi_reply_set(reply, CSI_NOT_FOUND, "volume_id: volume %s does not exist",
			      q->volume_id);
		return -ENOENT;
	}
	if (!csi_server_volume_take(c->s, q->volume_id)) {
		csi_reply_set(reply, CSI_ABORTED,
			      "an operation on volume %s is already in progress", q->volume_id);
		return -EAGAIN;
	}
	pthread_mutex_lock(&c->lock);
	r = local_prov_expand(q->volume_id, q->capacity_range->required_bytes,
			      q->capacity_range->limit_bytes, &size, &err);
	pthread_mutex_unlock(&c->lock);
	csi_server_volume_release(c->s, q->volume_id);
	if (r == -ENOENT) {
		csi_reply_set(reply, CSI_NOT_FOUND, "%s", err_msg(&err));
		return r;
	}
	if (r < 0)
		return policy_failed(r, &err, reply);
	resp.capacity_bytes = (int64_t)size;
	/* The quota is raised where the directory is: NodeExpandVolume. */
	resp.node_expansion_required = true;
	gcore_call_reply_message(call, &resp.base);
	return 0;
}

/* --- the table and the handler ------------------------------------------------------------ */

#define SECRETS(type) .n_secrets = offsetof(type, n_secrets), .secrets = offsetof(type, secrets)

static const struct ctrl_method methods[N_METHODS] = {
	{ .path = "/csi.v1.Controller/CreateVolume",
	  .name = "CreateVolume",
	  .request = &csi__v1__create_volume_request__descriptor,
	  .run = create_volume,
	  SECRETS(Csi__V1__CreateVolumeRequest) },
	{ .path = "/csi.v1.Controller/DeleteVolume",
	  .name = "DeleteVolume",
	  .request = &csi__v1__delete_volume_request__descriptor,
	  .run = delete_volume,
	  SECRETS(Csi__V1__DeleteVolumeRequest) },
	{ .path = "/csi.v1.Controller/GetCapacity",
	  .name = "GetCapacity",
	  .request = &csi__v1__get_capacity_request__descriptor,
	  .run = get_capacity },
	{ .path = "/csi.v1.Controller/ControllerGetCapabilities",
	  .name = "ControllerGetCapabilities",
	  .request = &csi__v1__controller_get_capabilities_request__descriptor,
	  .run = get_capabilities },
	{ .path = "/csi.v1.Controller/ValidateVolumeCapabilities",
	  .name = "ValidateVolumeCapabilities",
	  .request = &csi__v1__validate_volume_capabilities_request__descriptor,
	  .run = validate_capabilities,
	  SECRETS(Csi__V1__ValidateVolumeCapabilitiesRequest) },
	{ .path = "/csi.v1.Controller/ControllerExpandVolume",
	  .name = "ControllerExpandVolume",
	  .request = &csi__v1__controller_expand_volume_request__descriptor,
	  .run = expand_volume,
	  SECRETS(Csi__V1__ControllerExpandVolumeRequest) },
};

/* Wipes the secret values of a decoded request (never read here) before it is freed. */
static void wipe_secrets(const struct ctrl_method *m, ProtobufCMessage *msg)
{
	struct pb_map_entry **e;
	size_t n;

	if (!m->secrets)
		return;
	n = *(size_t *)((char *)msg + m->n_secrets);
	e = *(struct pb_map_entry ***)((char *)msg + m->secrets);
	for (size_t i = 0; i < n; i++)
		if (e[i]->value)
			explicit_bzero(e[i]->value, strlen(e[i]->value));
}

static void handle(struct gcore_call *call, void *userdata)
{
	const struct method_ctx *ctx = userdata;
	const struct ctrl_method *m = ctx->m;
	struct csi_reply reply = { 0 };
	const char *volume = "";
	ProtobufCMessage *msg;
	const void *data;
	size_t len;
	int r;

	data = gcore_call_request(call, &len);
	msg = data ? protobuf_c_message_unpack(m->request, NULL, len, data) : NULL;
	gcore_call_wipe_request(call);
	if (!msg) {
		csi_reply_set(&reply, CSI_INVALID_ARGUMENT, "request: cannot decode");
		r = -EINVAL;
	} else {
		r = m->run(ctx->c, msg, call, &reply, &volume);
	}
	if (r < 0) {
		if (reply.code == CSI_OK)
			csi_reply_set(&reply, csi_code_from_errno(r), "%s", strerror(-r));
		log_event(reply.code == CSI_ABORTED ? LOG_LVL_INFO : LOG_LVL_WARNING, NULL,
			  "CSI call failed", "method", m->name, "volume", volume, "code",
			  gcore_status_name((int)reply.code), "error", reply.message, (char *)NULL);
		gcore_call_fail(call, (int)reply.code, reply.message);
	} else {
		log_debug("csi", "CSI call done", "method", m->name, "volume", volume);
	}
	if (msg) {
		wipe_secrets(m, msg);
		protobuf_c_message_free_unpacked(msg, NULL);
	}
}

struct csi_controller *csi_controller_new(const struct csi_controller_config *cfg)
{
	struct csi_controller *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->reconciler = cfg ? cfg->reconciler : NULL;
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

struct csi_controller *csi_controller_free(struct csi_controller *c)
{
	if (!c)
		return NULL;
	pthread_mutex_destroy(&c->lock);
	free(c);
	return NULL;
}

int csi_controller_add_methods(struct csi_controller *c, struct csi_server *s, struct gcore *g,
			       struct error_info *err)
{
	c->s = s;
	for (size_t i = 0; i < N_METHODS; i++) {
		int r;

		c->ctx[i] = (struct method_ctx){ .c = c, .m = &methods[i] };
		r = gcore_add_blocking_method(g, methods[i].path, handle, &c->ctx[i]);
		if (r < 0)
			return err_set(err, r, "cannot register %s", methods[i].path);
	}
	return 0;
}
