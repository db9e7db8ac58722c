/* grpc-core.h - a unary gRPC server on a unix socket, the only module that touches the gRPC
 * core C API (libgrpc).
 *
 * The core API carries no compatibility promise (it is meant for language bindings), so it
 * stays behind this one header: an upgrade of libgrpc touches grpc-core.c only.  Messages
 * cross this boundary as serialized bytes; encoding and decoding (protobuf-c) is the caller's.
 *
 * Shape: one gcore = one grpc_server + one completion queue + one thread that runs the queue,
 * and optionally a pool of threads that run a second queue for the blocking methods.
 * The caller registers methods by path ("/csi.v1.Node/NodeGetInfo"), each with a handler.  The
 * queue thread calls the handler for each incoming call with the request already read; from
 * then on the call belongs to the caller, who answers it exactly once with gcore_call_reply()
 * or gcore_call_fail(), from the queue thread (cheap calls, answered inline) or from any other
 * thread (blocking work).  Only the current owner may touch a call.  A method that is not
 * registered is answered UNIMPLEMENTED here.
 *
 * The socket: before binding, gcore takes an exclusive flock on a lock file, because gRPC
 * unlinks whatever socket file is in its way when it binds, and a second instance would
 * silently steal a live one's socket.  The socket is created under umask 0177 and then given
 * its final mode (and group), so it is never reachable with looser permissions.
 *
 * Signals: gRPC starts internal threads at gcore_new() (grpc_init) that inherit the calling
 * thread's signal mask.  The process must block SIGTERM/SIGINT (and take them with sigwait or
 * signalfd on a thread of its own) before the first gcore_new().  The queue thread gcore
 * starts blocks every signal.
 *
 * gRPC's own log lines are routed into log.h (gcore_new sets gpr_set_log_function): gRPC
 * errors at error level, the rest at debug level under the "grpc" subsystem.  GRPC_VERBOSITY
 * and GRPC_TRACE still select what gRPC emits; traces can contain message bytes, so they are
 * for debugging on a test node only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "error.h"

/* gRPC status codes, numerically equal to grpc_status_code. */
enum gcore_status {
	GCORE_OK = 0,
	GCORE_CANCELLED = 1,
	GCORE_UNKNOWN = 2,
	GCORE_INVALID_ARGUMENT = 3,
	GCORE_DEADLINE_EXCEEDED = 4,
	GCORE_NOT_FOUND = 5,
	GCORE_ALREADY_EXISTS = 6,
	GCORE_PERMISSION_DENIED = 7,
	GCORE_RESOURCE_EXHAUSTED = 8,
	GCORE_FAILED_PRECONDITION = 9,
	GCORE_ABORTED = 10,
	GCORE_OUT_OF_RANGE = 11,
	GCORE_UNIMPLEMENTED = 12,
	GCORE_INTERNAL = 13,
	GCORE_UNAVAILABLE = 14,
	GCORE_DATA_LOSS = 15,
	GCORE_UNAUTHENTICATED = 16,
};

/* "ABORTED" for GCORE_ABORTED; "UNKNOWN" for a value out of range. */
const char *gcore_status_name(int code);

struct gcore;
struct gcore_call;

/* Called on the queue thread with a new call that the callee now owns.  It must not block;
 * it answers inline or hands the call to another thread, which answers it.  The handler of a
 * blocking method runs on a pool thread and may block. */
typedef void (*gcore_handler_fn)(struct gcore_call *call, void *userdata);

struct gcore_config {
	const char *socket_path; /* absolute path of the unix socket */
	const char *lock_path;	 /* lock file taken before binding; NULL: "<socket_path>.lock" */
	mode_t mode;		 /* final mode of the socket, e.g. 0600 */
	gid_t gid;		 /* group of the socket, or (gid_t)-1 to leave it */
	int calls_per_method;	 /* requested calls kept outstanding per method; <= 0: 8 */
	/* Threads that serve the blocking methods (gcore_add_blocking_method); 0: none, those
	 * methods are served by the queue thread like the others. */
	int pool_threads;
	/* Largest request message received, in bytes (GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH): a
	 * longer one is answered RESOURCE_EXHAUSTED by gRPC itself and never reaches a handler.
	 * <= 0: gRPC's default (4 MiB). */
	int max_receive_bytes;
};

/* Creates a server for cfg (copied), initialising gRPC.  Nothing is bound yet.
 * Returns the server, or NULL with err set. */
struct gcore *gcore_new(const struct gcore_config *cfg, struct error_info *err);

/* Registers a method by its full path; before gcore_start() only.  path must stay valid for
 * the lifetime of g.  Returns 0, -EINVAL after start, -ENOMEM. */
int gcore_add_method(struct gcore *g, const char *path, gcore_handler_fn handler, void *userdata);
/* The same for a method whose handler may block (it runs the call and answers it before it
 * returns): its calls are served by the pool threads, each waiting on a completion queue of
 * their own, so the thread gRPC wakes for a request runs it, with no hand-off, and a blocked
 * handler never delays the methods of gcore_add_method(). */
int gcore_add_blocking_method(struct gcore *g, const char *path, gcore_handler_fn handler,
			      void *userdata);

/* Takes the lock, binds the socket, sets its mode and group, starts the queue thread and
 * starts serving.  Returns 0, or a negative errno with err set: -EBUSY when another process
 * holds the lock (its socket is left alone), -EEXIST when something that is not a socket is
 * in the way, -EADDRINUSE/-EIO when gRPC refused the address. */
int gcore_start(struct gcore *g, struct error_info *err);

/* Stops the server in the order that never aborts the process:
 *   grpc_server_shutdown_and_notify (new calls now get UNAVAILABLE, in-flight ones continue)
 *   -> wait up to grace_ms for the shutdown tag and for every owned call to be answered
 *   -> on_grace_expired(userdata) if given, then grpc_server_cancel_all_calls
 *   -> wait up to hard_ms more for the tag and the owned calls
 *   -> grpc_server_destroy -> queue shutdown, drained to its end -> queue destroyed.
 * on_grace_expired lets the owner answer calls it still holds quickly (they all still need
 * an answer, even though their clients now see CANCELLED).  Idempotent.
 * Returns 0, or -ETIMEDOUT when calls were still owned after hard_ms: then the server and
 * queue are left running (destroying them would abort) and gcore_free() leaks them. */
int gcore_shutdown(struct gcore *g, int grace_ms, int hard_ms, void (*on_grace_expired)(void *),
		   void *userdata);

/* Whether the gRPC loaded (by gcore_new) runs with abseil's mutex deadlock detection off;
 * false before it is loaded, or when its abseil has none of the names grpc-core.c knows for
 * absl::SetMutexDeadlockDetectionMode. */
bool gcore_deadlock_detection_off(void);

/* Whether gcore_shutdown() has begun. */
bool gcore_stopping(const struct gcore *g);

/* Shuts down (grace 0) when still running, releases gRPC and the lock.  Accepts NULL;
 * returns NULL. */
struct gcore *gcore_free(struct gcore *g);

/* The method path of a call, e.g. "/csi.v1.Node/NodeGetInfo". */
const char *gcore_call_method(const struct gcore_call *call);

/* The serialized request, valid until the call is answered.  *ret_len is 0 for an empty
 * message.  Returns NULL when the client sent no message at all (not even an empty one). */
const void *gcore_call_request(const struct gcore_call *call, size_t *ret_len);

/* Wipes the serialized request (it may hold secrets) once it is decoded; gcore_call_request
 * then gives zeros.  Accepts NULL. */
void gcore_call_wipe_request(struct gcore_call *call);

/* The client's deadline as a CLOCK_MONOTONIC time.  Returns false (and leaves ret alone)
 * when the client set none. */
bool gcore_call_deadline(const struct gcore_call *call, struct timespec *ret_monotonic);

/* Answers OK with a serialized response (len may be 0).  The call is gone afterwards, even
 * on failure.  Any thread, as long as it owns the call.  Returns 0 or -EIO. */
int gcore_call_reply(struct gcore_call *call, const void *data, size_t len);

struct ProtobufCMessage;
/* Answers OK with msg, packed; RESOURCE_EXHAUSTED when there is no memory to pack it.  The
 * call is gone afterwards.  Returns 0, -ENOMEM or -EIO. */
int gcore_call_reply_message(struct gcore_call *call, const struct ProtobufCMessage *msg);

/* Answers with a non-OK status and a message (NULL: none).  The message goes to the client:
 * it must not hold secrets.  The call is gone afterwards.  Returns 0 or -EIO. */
int gcore_call_fail(struct gcore_call *call, int code, const char *message);

/* --- client --- */

/* One unary call to method ("/csi.v1.Identity/Probe") on the unix socket path, for the
 * agent's own commands (`volagent probe`).  Sends request (len bytes, protobuf-encoded) and
 * waits up to timeout_ms.  Returns 0 and the gRPC status in *ret_code (its message in
 * ret_message, when not NULL); on GCORE_OK, *ret_response (malloc'd, caller frees) and
 * *ret_len hold the answer.  -errno when the call could not be made at all. */
int gcore_unary_call(const char *socket_path, const char *method, const void *request, size_t len,
		     int timeout_ms, int *ret_code, char *ret_message, size_t message_size,
		     void **ret_response, size_t *ret_len);
