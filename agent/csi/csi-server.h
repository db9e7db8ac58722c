/* csi-server.h - the CSI Identity and Node services of the agent, over grpc-core.
 *
 * The server decodes every request (protobuf-c), validates it, and answers the cheap RPCs
 * itself on the gRPC queue thread: GetPluginInfo, GetPluginCapabilities, Probe,
 * NodeGetCapabilities, NodeGetInfo.  The Node RPCs that touch the node (stage, unstage,
 * publish, unpublish, get_volume_stats, expand) go to a small pool of CSI worker threads,
 * which call the backend (struct csi_node_ops, implemented by the core) and send the answer,
 * or leave it to the backend, which answers later from its own thread (csi_reply_defer).
 *
 * Before a Node request reaches the backend (the pure checks are csi-validate.c's, in the
 * order the CSI spec lists the codes):
 *  - each required field is present, else INVALID_ARGUMENT naming the field
 *    ("volume_capability: required"), all of them before any other check;
 *  - every path (target, staging, volume path) is absolute, normalized (no "", "." or ".."
 *    component), lies below the kubelet root, and no existing component below the root is a
 *    symlink (lstat, on the worker: a hung NFS mount must not stall the queue thread), else
 *    INVALID_ARGUMENT; a volume_path of NodeGetVolumeStats or NodeExpandVolume that cannot
 *    hold a volume is NOT_FOUND (they only look a volume up there);
 *  - NodePublishVolume without staging_target_path while STAGE_UNSTAGE_VOLUME is advertised
 *    is FAILED_PRECONDITION;
 *  - no other operation is in flight for the same volume_id, else ABORTED (kubelet retries).
 *    Stage, unstage, publish, unpublish and expand share one slot per volume;
 *    NodeGetVolumeStats has a slot of its own, so a stats call hanging on a dead server
 *    neither blocks nor is blocked by the state-changing calls, and does not pile up;
 *  - the client's deadline has not passed while the request waited for a worker, else
 *    DEADLINE_EXCEEDED without calling the backend.
 *
 * Secrets (the `secrets` maps) reach the backend in their own field and nowhere else: they are
 * never logged, and an answer whose message contains a secret value has that message replaced.
 * The copies the server holds are wiped before they are freed.
 *
 * The server logs once per failed Node call (method, volume_id, code, message); nothing else
 * here logs above debug. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "csi-status.h"
#include "error.h"

/* The default endpoint is "unix://<kubelet-root>/plugins/<driver-name>/csi.sock". */
#define CSI_DEFAULT_KUBELET_ROOT "/var/lib/kubelet"
#define CSI_DEFAULT_WORKERS 4
#define CSI_DEFAULT_GRACE_MS 10000
/* NodeGetInfo.accessible_topology holds one segment: "topology.<driver name>/node", with the
 * node id as value.  A key of the driver's own: kubelet copies each segment onto the Node's
 * labels and refuses the registration for good when the Node has the key with another value
 * (nodeinfomanager.go), so a key kubelet owns (kubernetes.io/hostname, the hostname) would
 * fail on every node whose name is not its hostname. */
#define CSI_TOPOLOGY_KEY_PREFIX "topology."
#define CSI_TOPOLOGY_KEY_SUFFIX "/node"

/* One entry of a protobuf string map.  Both strings are non-NULL. */
struct csi_kv {
	const char *key;
	const char *value;
};

struct csi_map {
	const struct csi_kv *items;
	size_t n;
};

enum csi_access_type {
	CSI_ACCESS_MOUNT = 1, /* a filesystem mounted at the target */
	CSI_ACCESS_BLOCK = 2, /* the block device itself at the target */
};

/* VolumeCapability.AccessMode.Mode, same numbers. */
enum csi_access_mode {
	CSI_MODE_UNKNOWN = 0,
	CSI_MODE_SINGLE_NODE_WRITER = 1,
	CSI_MODE_SINGLE_NODE_READER_ONLY = 2,
	CSI_MODE_MULTI_NODE_READER_ONLY = 3,
	CSI_MODE_MULTI_NODE_SINGLE_WRITER = 4,
	CSI_MODE_MULTI_NODE_MULTI_WRITER = 5,
	CSI_MODE_SINGLE_NODE_SINGLE_WRITER = 6,
	CSI_MODE_SINGLE_NODE_MULTI_WRITER = 7,
};

/* A decoded VolumeCapability.  Strings are "" when unset, never NULL. */
struct csi_volume_capability {
	bool present; /* false only where the field is optional (expand) */
	enum csi_access_type access_type;
	const char *fs_type;		/* mount only; "" = the backend's default */
	const char *const *mount_flags; /* mount only */
	size_t n_mount_flags;
	const char *volume_mount_group;	  /* mount only */
	enum csi_access_mode access_mode; /* never CSI_MODE_UNKNOWN when present */
};

/* Every request struct below, and every string and array it points to, is valid only for the
 * duration of the op call: the backend copies what it keeps.  Path fields are validated as
 * described at the top; an optional path that was not sent is "".  deadline is the client's
 * deadline on CLOCK_MONOTONIC, or {0, 0} when it set none (see csi_deadline_remaining_ms). */

struct csi_stage_request {
	const char *volume_id;
	const char *staging_target_path;
	struct csi_volume_capability capability;
	struct csi_map publish_context;
	struct csi_map volume_context;
	struct csi_map secrets; /* SECRET: never log, never put in a message or a file */
	struct timespec deadline;
};

struct csi_unstage_request {
	const char *volume_id;
	const char *staging_target_path;
	struct timespec deadline;
};

struct csi_publish_request {
	const char *volume_id;
	const char *staging_target_path; /* "" when the backend has no stage op */
	const char *target_path;
	struct csi_volume_capability capability;
	bool readonly;
	struct csi_map publish_context;
	struct csi_map volume_context;
	struct csi_map secrets; /* SECRET: never log, never put in a message or a file */
	struct timespec deadline;
};

struct csi_unpublish_request {
	const char *volume_id;
	const char *target_path;
	struct timespec deadline;
};

struct csi_stats_request {
	const char *volume_id;
	const char *volume_path;
	const char *staging_target_path; /* optional */
	struct timespec deadline;
};

struct csi_expand_request {
	const char *volume_id;
	const char *volume_path;
	const char *staging_target_path; /* optional */
	long long required_bytes;	 /* 0 = unspecified; >= 0 */
	long long limit_bytes;		 /* 0 = unspecified; >= required_bytes when both set */
	struct csi_volume_capability capability; /* optional: .present */
	struct csi_map secrets; /* SECRET: never log, never put in a message or a file */
	struct timespec deadline;
};

struct csi_usage {
	bool valid; /* reported only when set */
	long long available, total, used;
};

/* What a backend answers.  The server zeroes it before each op. */
struct csi_reply {
	enum csi_code code; /* CSI_OK unless the op sets another code */
	char message[512];  /* for a non-OK code; sent to kubelet: no secrets */
	/* get_volume_stats */
	struct csi_usage bytes, inodes;
	bool has_condition; /* fill when VOLUME_CONDITION applies */
	bool abnormal;
	char condition_message[256];
	/* expand */
	long long capacity_bytes;
	/* The server's: the call this reply belongs to, for csi_reply_defer (NULL: no server). */
	void *call_ref;
};

/* An op may answer later instead of blocking (stage, unstage, publish, unpublish):
 *   struct csi_deferred *d = csi_reply_defer(reply);
 * takes the call over (NULL: it cannot be deferred here, answer before returning); the op
 * then returns CSI_DEFERRED and the call is answered by csi_deferred_finish(d, r) from any
 * thread, exactly once, with csi_deferred_reply(d) filled as an op fills its reply and r as
 * an op returns.  The request struct the op got is gone once the op returned: copy what the
 * answer needs.  The volume's in-flight slot is held until the finish.  A call still deferred
 * when a shutdown's grace runs out is answered UNAVAILABLE then; its finish (still due, also
 * after csi_server_free) only releases it. */
#define CSI_DEFERRED 1
struct csi_deferred;
struct csi_deferred *csi_reply_defer(struct csi_reply *reply);
struct csi_reply *csi_deferred_reply(struct csi_deferred *d);
void csi_deferred_finish(struct csi_deferred *d, int r);

/* Sets reply's code and its message from fmt (truncated to fit).  For backends and the
 * server alike. */
void csi_reply_set(struct csi_reply *reply, enum csi_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The backend of the Node service.  Implemented by the core; every op:
 *  - is called on a CSI worker thread, never on the gRPC queue thread, with no server lock
 *    held, and may block (the worker pool is small: it should still return by the request's
 *    deadline, answering ABORTED or DEADLINE_EXCEEDED if the outcome is not known by then, so
 *    that kubelet retries), or defer the answer (csi_reply_defer) and return at once;
 *  - never sees two ops for the same volume at once (get_volume_stats excepted, see above);
 *  - must be idempotent as CSI requires: stage/publish of what is already staged/published
 *    compatibly, unstage/unpublish of what is not, expand to a size already reached -> OK;
 *  - returns 0 on success.  On failure it returns a negative errno and may set reply->code
 *    and reply->message; a code it sets wins over the errno mapping (csi_code_from_errno).
 *    Expected codes: NOT_FOUND, ALREADY_EXISTS (incompatible capability or readonly at the
 *    same path), FAILED_PRECONDITION (capability not supported, volume single-writer and
 *    published elsewhere, cannot expand online), OUT_OF_RANGE (expand), ABORTED and
 *    DEADLINE_EXCEEDED (outcome not known in time), INTERNAL;
 *  - must never copy a secret into reply->message (the server withholds such a message).
 * An op that is NULL makes that RPC answer UNIMPLEMENTED, and drops its capability:
 * STAGE_UNSTAGE_VOLUME needs stage and unstage, GET_VOLUME_STATS (and VOLUME_CONDITION) needs
 * get_volume_stats, EXPAND_VOLUME needs expand. */
struct csi_node_ops {
	int (*stage)(void *userdata, const struct csi_stage_request *req, struct csi_reply *reply);
	int (*unstage)(void *userdata, const struct csi_unstage_request *req,
		       struct csi_reply *reply);
	int (*publish)(void *userdata, const struct csi_publish_request *req,
		       struct csi_reply *reply);
	int (*unpublish)(void *userdata, const struct csi_unpublish_request *req,
			 struct csi_reply *reply);
	/* Fills reply->bytes/inodes (and the condition); NOT_FOUND for a missing path. */
	int (*get_volume_stats)(void *userdata, const struct csi_stats_request *req,
				struct csi_reply *reply);
	/* Fills reply->capacity_bytes (0: unknown). */
	int (*expand)(void *userdata, const struct csi_expand_request *req,
		      struct csi_reply *reply);
	/* publish tells SINGLE_NODE_SINGLE_WRITER (one target per node) from
	 * SINGLE_NODE_MULTI_WRITER (several): the SINGLE_NODE_MULTI_WRITER capability. */
	bool single_node_multi_writer;
};

struct csi_controller;

struct csi_server_config {
	const char *endpoint;	  /* "unix:///abs/path", "unix:/abs/path" or "/abs/path" */
	const char *driver_name;  /* CSI driver name: [A-Za-z0-9][A-Za-z0-9._-]{0,61}[A-Za-z0-9] */
	const char *node_id;	  /* NULL or "": the hostname */
	const char *kubelet_root; /* NULL: CSI_DEFAULT_KUBELET_ROOT; absolute, normalized */
	bool registration;	  /* serve <kubelet_root>/plugins_registry/<driver>-reg.sock */
	const char *socket_group; /* NULL: socket mode 0600; else 0660 and this group (name/gid) */
	long long max_volumes_per_node; /* 0: not reported */
	int workers;			/* <= 0: CSI_DEFAULT_WORKERS */
	int grace_ms; /* shutdown grace for in-flight calls; < 0: CSI_DEFAULT_GRACE_MS */
	/* The Controller service (csi-controller.h), borrowed; NULL: not served, and Identity
	 * does not advertise CONTROLLER_SERVICE. */
	struct csi_controller *controller;
};

struct csi_server;

/* Validates cfg (copied) and builds the server; nothing is bound yet.  ops is borrowed and
 * must outlive the server; userdata is passed to every op.
 * Returns the server, or NULL with err set (-EINVAL naming the bad setting, -ENOMEM). */
struct csi_server *csi_server_new(const struct csi_server_config *cfg,
				  const struct csi_node_ops *ops, void *userdata,
				  struct error_info *err);

/* Creates the socket directory if missing, takes the single-instance lock
 * ("<socket>.lock"), binds the socket (mode 0600, or 0660 with the group), starts the workers
 * and serving, then the registration socket when configured.
 * Returns 0, or a negative errno with err set: -EBUSY when another instance holds the lock
 * (its socket is not touched), -EEXIST when a non-socket file is in the way. */
int csi_server_start(struct csi_server *s, struct error_info *err);

/* Probe answers ready=false until this is called with true (the startup reconstruction is
 * complete).  Any thread. */
void csi_server_set_ready(struct csi_server *s, bool ready);

/* The node id NodeGetInfo reports, and the key of its topology segment
 * ("topology.<driver>/node").  Valid as long as s. */
const char *csi_server_node_id(const struct csi_server *s);
const char *csi_server_topology_key(const struct csi_server *s);

/* Claims volume_id's in-flight slot, the one stage, unstage, publish, unpublish and expand
 * share, for a call of another service on the same volume (the Controller's DeleteVolume and
 * ControllerExpandVolume).  False when an operation holds it (answer ABORTED).  Release with
 * csi_server_volume_release. */
bool csi_server_volume_take(struct csi_server *s, const char *volume_id);
void csi_server_volume_release(struct csi_server *s, const char *volume_id);

/* Whether csi_server_shutdown() has begun: a backend op that waits on something may give up
 * early (answering UNAVAILABLE) once this is true.  Any thread. */
bool csi_server_stopping(const struct csi_server *s);

/* Graceful stop: new calls get UNAVAILABLE at once; calls in flight get grace_ms (< 0: the
 * configured grace) to finish; then requests still waiting for a worker are answered
 * UNAVAILABLE without reaching the backend, the rest are cancelled, and the workers stop.
 * Nothing aborts.  Call from one thread, not from an op.  Idempotent.
 * Returns 0, or -ETIMEDOUT when a backend op was still running 2 s after the grace: the
 * server is then left running, and csi_server_free() leaks it rather than crash. */
int csi_server_shutdown(struct csi_server *s, int grace_ms);

/* Shuts down (when still running) and frees.  Accepts NULL; returns NULL. */
struct csi_server *csi_server_free(struct csi_server *s);

/* What csi_request_check() checks a request against: the settings of a server. */
struct csi_check_config {
	const char *kubelet_root; /* NULL or "": CSI_DEFAULT_KUBELET_ROOT; absolute, normalized */
	bool has_stage;		  /* the backend has stage and unstage (STAGE_UNSTAGE_VOLUME) */
	/* Also walk the paths for symlinks below the kubelet root (lstat, as the worker does
	 * before the op).  false: no file system access at all (fuzzing). */
	bool check_fs;
	/* When set and the request passes, its op is called with the view of the request a
	 * backend gets, as a worker would call it (a missing op answers UNIMPLEMENTED). */
	const struct csi_node_ops *ops;
	void *userdata;
};

/* Runs the serialized request data (len bytes) of method (the gRPC path,
 * "/csi.v1.Node/NodePublishVolume") through exactly what the server does before a backend sees
 * it: the protobuf decoding, the field and path checks, and with cfg->check_fs the symlink
 * walk; then cfg->ops's op when set.  No server, socket or thread is involved: for fuzzing
 * and tests.  ret_reply is zeroed, then gets the code and message the server would answer a
 * refused request with (or what the op answered).
 * Returns: 0 when the request reaches the backend (or the op's return when ops is set),
 * -EINVAL when it is refused (ret_reply says why), -ENOENT for a method the server does not
 * serve, -ENOSYS when the op is missing. */
int csi_request_check(const struct csi_check_config *cfg, const char *method, const void *data,
		      size_t len, struct csi_reply *ret_reply);

/* Parses an endpoint into a socket path: "unix:///abs/path", "unix:/abs/path" or "/abs/path".
 * Returns 0 and a newly allocated path in *ret_path, or -EINVAL / -ENAMETOOLONG with err set. */
int csi_endpoint_parse(const char *endpoint, char **ret_path, struct error_info *err);

/* $CSI_ENDPOINT when set and not empty, else def.  The result is not copied. */
const char *csi_endpoint_from_env_or(const char *def);

/* "unix://<kubelet_root>/plugins/<driver_name>/csi.sock", newly allocated (NULL: -ENOMEM). */
char *csi_default_endpoint(const char *kubelet_root, const char *driver_name);

/* Milliseconds until deadline (CLOCK_MONOTONIC), 0 when passed, -1 when there is none. */
long long csi_deadline_remaining_ms(const struct timespec *deadline);

/* The value for key in map, or NULL. */
const char *csi_map_get(const struct csi_map *map, const char *key);
