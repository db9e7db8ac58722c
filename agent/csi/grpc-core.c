/* grpc-core.c - a unary gRPC server on a unix socket over the gRPC core C API.  See
 * grpc-core.h for the contract; this file is the only one that includes <grpc/...>.
 *
 * Every tag on a completion queue is either &g->shutdown_tag or a struct gcore_call, whose
 * state says which event it is: CALL_REQUESTED (a new call arrived, or the request failed at
 * shutdown) or CALL_REPLYING (the final batch completed); a pool call's final batch tags
 * its done functor instead (g->done_cq, below).  A call is freed only after its final batch
 * completed.
 *
 * Two queues: g->cq, run by the queue thread, for the methods answered inline (and the
 * unregistered ones, and the shutdown tag); g->pool_cq, run by cfg.pool_threads threads that
 * all wait in grpc_completion_queue_next on it, for the blocking methods.  A pool thread runs
 * the handler, which blocks and answers (or hands the call to a thread that answers later).
 * The pool's calls are bound to g->done_cq, a callback queue: the final batch's completion
 * frees the call where it completes, with no pool thread woken to reap it.  So a blocking
 * call costs no hand-off between threads of ours: the thread gRPC wakes for the request is
 * the one that runs it.
 *
 * Counters under g->lock (owned calls, outstanding requests, the shutdown tag) decide when
 * destroying the server and the queues is safe. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>
#include <protobuf-c/protobuf-c.h>

#include "dlopen-note.h"
#include "grpc-core.h"
#include "log.h"
#include "macro.h"
#include "metrics.h"

/* gRPC core is loaded with dlopen() by the two entry points, gcore_new() (the CSI service)
 * and gcore_unary_call() (`volagent probe`, registration tests): a daemon that serves no CSI
 * never maps libgrpc and what it pulls in (libgpr, absl, OpenSSL, c-ares, re2, libstdc++),
 * ~7 MiB of its idle RSS (docs/performance.md).  Every grpc_ and gpr_ function used below
 * goes through this table, filled once by dlsym; the macros keep the code's spelling.  The
 * soname comes from the build (GCORE_GRPC_SONAME, mk/csi.mk) and is listed in the binary's
 * .note.dlopen for the image's package list (scripts/build-image). */
#ifndef GCORE_GRPC_SONAME
#error "GCORE_GRPC_SONAME (libgrpc's soname) must come from the build (mk/csi.mk)"
#endif
DLOPEN_NOTE(gcore_dlopen_note,
	    "[{\"feature\":\"csi\",\"description\":\"the CSI Identity and Node services (gRPC)\","
	    "\"priority\":\"recommended\",\"soname\":[\"" GCORE_GRPC_SONAME "\"]}]");

#define GCORE_SYMS(X)                                \
	X(gpr_convert_clock_type)                    \
	X(gpr_free)                                  \
	X(gpr_inf_future)                            \
	X(gpr_now)                                   \
	X(gpr_set_log_function)                      \
	X(gpr_time_add)                              \
	X(gpr_time_from_millis)                      \
	X(gpr_time_sub)                              \
	X(grpc_byte_buffer_destroy)                  \
	X(grpc_byte_buffer_reader_destroy)           \
	X(grpc_byte_buffer_reader_init)              \
	X(grpc_byte_buffer_reader_readall)           \
	X(grpc_call_cancel)                          \
	X(grpc_call_details_destroy)                 \
	X(grpc_call_details_init)                    \
	X(grpc_call_error_to_string)                 \
	X(grpc_call_start_batch)                     \
	X(grpc_call_unref)                           \
	X(grpc_channel_create)                       \
	X(grpc_channel_create_call)                  \
	X(grpc_channel_credentials_release)          \
	X(grpc_channel_destroy)                      \
	X(grpc_completion_queue_create_for_callback) \
	X(grpc_completion_queue_create_for_next)     \
	X(grpc_completion_queue_create_for_pluck)    \
	X(grpc_completion_queue_destroy)             \
	X(grpc_completion_queue_next)                \
	X(grpc_completion_queue_pluck)               \
	X(grpc_completion_queue_shutdown)            \
	X(grpc_empty_slice)                          \
	X(grpc_init)                                 \
	X(grpc_insecure_credentials_create)          \
	X(grpc_insecure_server_credentials_create)   \
	X(grpc_metadata_array_destroy)               \
	X(grpc_metadata_array_init)                  \
	X(grpc_raw_byte_buffer_create)               \
	X(grpc_server_add_http2_port)                \
	X(grpc_server_cancel_all_calls)              \
	X(grpc_server_create)                        \
	X(grpc_server_credentials_release)           \
	X(grpc_server_destroy)                       \
	X(grpc_server_register_completion_queue)     \
	X(grpc_server_register_method)               \
	X(grpc_server_request_call)                  \
	X(grpc_server_request_registered_call)       \
	X(grpc_server_shutdown_and_notify)           \
	X(grpc_server_start)                         \
	X(grpc_shutdown)                             \
	X(grpc_slice_from_copied_buffer)             \
	X(grpc_slice_from_copied_string)             \
	X(grpc_slice_from_static_string)             \
	X(grpc_slice_to_c_string)                    \
	X(grpc_slice_unref)

#define X(name) static typeof(name) *sym_##name;
GCORE_SYMS(X)
#undef X

static pthread_once_t dl_once = PTHREAD_ONCE_INIT;
static struct error_info dl_result;

/* absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle), by the names abseil's inline
 * namespace gives it in the builds gRPC is packaged with. */
static const char *const absl_set_deadlock_mode[] = {
	"_ZN4absl7debian329SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE",
	"_ZN4absl12lts_2022062329SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE",
};

/* Debian's abseil is built without NDEBUG, so every absl::Mutex lock taken inside gRPC runs
 * abseil's deadlock detection: the lock's node in a process-wide lock-order graph, looked up
 * and updated under one global spin lock, and the thread's list of held locks.  It is a
 * debugging aid (its default in such a build is to abort the process on a cycle it finds),
 * and a release build has it off: turned off here too (kIgnore = 0).  When the library has
 * none of these names, nothing happens and gcore_deadlock_detection_off() says so (the CSI
 * server logs it; test-grpc-load fails on it, so a gRPC/abseil pairing that names it anew is
 * seen at once rather than as slower calls). */
static bool absl_detection_off;

static void absl_deadlock_detection_off(void *h)
{
	for (size_t i = 0; i < ARRAY_SIZE(absl_set_deadlock_mode); i++) {
		void (*set_mode)(int) = (void (*)(int))dlsym(h, absl_set_deadlock_mode[i]);

		if (set_mode) {
			set_mode(0);
			absl_detection_off = true;
			return;
		}
	}
}

bool gcore_deadlock_detection_off(void)
{
	return absl_detection_off;
}

static void gcore_dl_load(void)
{
	/* Never closed: gRPC keeps threads and state of its own until the process exits. */
	void *h = dlopen(GCORE_GRPC_SONAME, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		err_set(&dl_result, -EOPNOTSUPP, "cannot load %s (install libgrpc): %s",
			GCORE_GRPC_SONAME, dlerror());
		return;
	}
#define X(name)                                                                                    \
	if (!(sym_##name = (typeof(sym_##name))dlsym(h, #name))) {                                 \
		err_set(&dl_result, -EOPNOTSUPP, "%s has no symbol %s", GCORE_GRPC_SONAME, #name); \
		return;                                                                            \
	}
	GCORE_SYMS(X)
#undef X
	absl_deadlock_detection_off(h);
}

/* Loads gRPC core once.  Returns 0, or -EOPNOTSUPP with err naming the library or symbol. */
static int gcore_dlopen(struct error_info *err)
{
	pthread_once(&dl_once, gcore_dl_load);
	if (dl_result.code < 0 && err)
		*err = dl_result;
	return dl_result.code;
}

#define gpr_convert_clock_type (*sym_gpr_convert_clock_type)
#define gpr_free (*sym_gpr_free)
#define gpr_inf_future (*sym_gpr_inf_future)
#define gpr_now (*sym_gpr_now)
#define gpr_set_log_function (*sym_gpr_set_log_function)
#define gpr_time_add (*sym_gpr_time_add)
#define gpr_time_from_millis (*sym_gpr_time_from_millis)
#define gpr_time_sub (*sym_gpr_time_sub)
#define grpc_byte_buffer_destroy (*sym_grpc_byte_buffer_destroy)
#define grpc_byte_buffer_reader_destroy (*sym_grpc_byte_buffer_reader_destroy)
#define grpc_byte_buffer_reader_init (*sym_grpc_byte_buffer_reader_init)
#define grpc_byte_buffer_reader_readall (*sym_grpc_byte_buffer_reader_readall)
#define grpc_call_cancel (*sym_grpc_call_cancel)
#define grpc_call_details_destroy (*sym_grpc_call_details_destroy)
#define grpc_call_details_init (*sym_grpc_call_details_init)
#define grpc_call_error_to_string (*sym_grpc_call_error_to_string)
#define grpc_call_start_batch (*sym_grpc_call_start_batch)
#define grpc_call_unref (*sym_grpc_call_unref)
#define grpc_channel_create (*sym_grpc_channel_create)
#define grpc_channel_create_call (*sym_grpc_channel_create_call)
#define grpc_channel_credentials_release (*sym_grpc_channel_credentials_release)
#define grpc_channel_destroy (*sym_grpc_channel_destroy)
#define grpc_completion_queue_create_for_next (*sym_grpc_completion_queue_create_for_next)
#define grpc_completion_queue_create_for_pluck (*sym_grpc_completion_queue_create_for_pluck)
#define grpc_completion_queue_destroy (*sym_grpc_completion_queue_destroy)
#define grpc_completion_queue_next (*sym_grpc_completion_queue_next)
#define grpc_completion_queue_pluck (*sym_grpc_completion_queue_pluck)
#define grpc_completion_queue_shutdown (*sym_grpc_completion_queue_shutdown)
#define grpc_empty_slice (*sym_grpc_empty_slice)
#define grpc_init (*sym_grpc_init)
#define grpc_insecure_credentials_create (*sym_grpc_insecure_credentials_create)
#define grpc_insecure_server_credentials_create (*sym_grpc_insecure_server_credentials_create)
#define grpc_metadata_array_destroy (*sym_grpc_metadata_array_destroy)
#define grpc_metadata_array_init (*sym_grpc_metadata_array_init)
#define grpc_raw_byte_buffer_create (*sym_grpc_raw_byte_buffer_create)
#define grpc_server_add_http2_port (*sym_grpc_server_add_http2_port)
#define grpc_server_cancel_all_calls (*sym_grpc_server_cancel_all_calls)
#define grpc_server_create (*sym_grpc_server_create)
#define grpc_server_credentials_release (*sym_grpc_server_credentials_release)
#define grpc_server_destroy (*sym_grpc_server_destroy)
#define grpc_completion_queue_create_for_callback (*sym_grpc_completion_queue_create_for_callback)
#define grpc_server_register_completion_queue (*sym_grpc_server_register_completion_queue)
#define grpc_server_register_method (*sym_grpc_server_register_method)
#define grpc_server_request_call (*sym_grpc_server_request_call)
#define grpc_server_request_registered_call (*sym_grpc_server_request_registered_call)
#define grpc_server_shutdown_and_notify (*sym_grpc_server_shutdown_and_notify)
#define grpc_server_start (*sym_grpc_server_start)
#define grpc_shutdown (*sym_grpc_shutdown)
#define grpc_slice_from_copied_buffer (*sym_grpc_slice_from_copied_buffer)
#define grpc_slice_from_copied_string (*sym_grpc_slice_from_copied_string)
#define grpc_slice_from_static_string (*sym_grpc_slice_from_static_string)
#define grpc_slice_to_c_string (*sym_grpc_slice_to_c_string)
#define grpc_slice_unref (*sym_grpc_slice_unref)

#define UNREGISTERED_REQUESTS 2

struct gcore_method {
	const char *path;
	bool blocking; /* served by the pool threads, on pool_cq */
	gcore_handler_fn handler;
	void *userdata;
	void *registered; /* grpc_server_register_method() handle */
};

enum call_state {
	CALL_REQUESTED,
	CALL_OWNED,
	CALL_REPLYING
};

struct gcore_call {
	struct gcore *g;
	struct gcore_method *m; /* NULL for a method that was not registered */
	enum call_state state;
	grpc_call *call;
	gpr_timespec raw_deadline;
	grpc_metadata_array md;
	grpc_call_details details; /* unregistered calls only */
	grpc_byte_buffer *payload;
	grpc_slice request;
	bool have_request;
	bool have_deadline;
	struct timespec deadline; /* CLOCK_MONOTONIC */
	char *unknown_method;	  /* gpr_malloc'd path of an unregistered call */
	grpc_byte_buffer *response;
	int cancelled;
	/* A blocking method's call is bound to g->done_cq: its final batch runs this, where
	 * the batch completes, instead of waking a pool thread to reap it. */
	grpc_completion_queue_functor done;
};

struct gcore {
	struct gcore_config cfg;
	char *socket_path;
	char *lock_path;
	int lock_fd;
	grpc_server *server;
	grpc_completion_queue *cq;
	grpc_completion_queue *pool_cq; /* NULL without blocking methods or pool threads */
	grpc_completion_queue *done_cq; /* callback queue the pool's calls are bound to */
	grpc_completion_queue_functor done_cq_shutdown;
	bool done_cq_down; /* its shutdown completed (under lock) */
	pthread_t thread;
	pthread_t *pool;
	int n_pool; /* pool threads running */
	struct gcore_method *methods;
	size_t n_methods;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned owned;	    /* calls received and not yet through their final batch */
	unsigned requested; /* requests outstanding in gRPC */
	bool started;	    /* server started and queue thread running */
	bool stopping;	    /* grpc_server_shutdown_and_notify called */
	bool shutdown_tag_seen;
	bool finished;	  /* server and queue destroyed */
	bool leaked;	  /* gave up waiting for owned calls; never destroy */
	int shutdown_tag; /* only its address is used */
};

static const char *const status_names[] = {
	"OK",
	"CANCELLED",
	"UNKNOWN",
	"INVALID_ARGUMENT",
	"DEADLINE_EXCEEDED",
	"NOT_FOUND",
	"ALREADY_EXISTS",
	"PERMISSION_DENIED",
	"RESOURCE_EXHAUSTED",
	"FAILED_PRECONDITION",
	"ABORTED",
	"OUT_OF_RANGE",
	"UNIMPLEMENTED",
	"INTERNAL",
	"UNAVAILABLE",
	"DATA_LOSS",
	"UNAUTHENTICATED",
};

const char *gcore_status_name(int code)
{
	if (code < 0 || (size_t)code >= ARRAY_SIZE(status_names))
		return "UNKNOWN";
	return status_names[code];
}

/* gRPC's log lines, into log.h: errors stay errors, everything else is debug. */
static void gcore_log(gpr_log_func_args *a)
{
	if (a->severity == GPR_LOG_SEVERITY_ERROR)
		log_event(LOG_LVL_ERROR, "grpc", a->message, "file", a->file, "line",
			  LOG_INT(a->line), (char *)NULL);
	else if (log_debug_enabled("grpc"))
		log_event(LOG_LVL_DEBUG, "grpc", a->message, "file", a->file, "line",
			  LOG_INT(a->line), (char *)NULL);
}

static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void gcore_log_init(void)
{
	gpr_set_log_function(gcore_log);
}

/* close(fd) when open; returns -1 for `fd = close_fd(fd);`. */
static int close_fd(int fd)
{
	if (fd >= 0)
		close(fd);
	return -1;
}

static void timespec_add_ms(struct timespec *ts, long long ms)
{
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

struct gcore *gcore_new(const struct gcore_config *cfg, struct error_info *err)
{
	struct gcore *g;
	pthread_condattr_t ca;

	if (gcore_dlopen(err) < 0)
		return NULL;

	if (!cfg || !cfg->socket_path || cfg->socket_path[0] != '/') {
		err_set(err, -EINVAL, "socket path must be absolute");
		return NULL;
	}
	g = calloc(1, sizeof(*g));
	if (!g) {
		err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	g->cfg = *cfg;
	g->lock_fd = -1;
	if (g->cfg.calls_per_method <= 0)
		g->cfg.calls_per_method = 8;
	g->socket_path = strdup(cfg->socket_path);
	g->lock_path = cfg->lock_path ? strdup(cfg->lock_path)
				      : strdup_printf("%s.lock", cfg->socket_path);
	if (!g->socket_path || !g->lock_path) {
		free(g->socket_path);
		free(g->lock_path);
		free(g);
		err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	g->cfg.socket_path = g->socket_path;
	g->cfg.lock_path = g->lock_path;
	pthread_mutex_init(&g->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g->cond, &ca);
	pthread_condattr_destroy(&ca);

	pthread_once(&log_once, gcore_log_init);
	grpc_init();
	g->cq = grpc_completion_queue_create_for_next(NULL);
	{
		/* No bandwidth-delay probing: on a unix socket with messages of a few hundred
		 * bytes it estimates nothing, and each probe is a PING the client must wake up to
		 * answer in the middle of a call.  With a receive limit, reads off the socket in
		 * chunks of at most the limit (gRPC grows them up to 4 MiB for a large message
		 * otherwise, and must still read what a refused request sent). */
		grpc_arg arg[] = {
			{ .type = GRPC_ARG_INTEGER,
			  .key = (char *)GRPC_ARG_HTTP2_BDP_PROBE,
			  .value.integer = 0 },
			{ .type = GRPC_ARG_INTEGER,
			  .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
			  .value.integer = g->cfg.max_receive_bytes },
			{ .type = GRPC_ARG_INTEGER,
			  .key = (char *)GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE,
			  .value.integer = g->cfg.max_receive_bytes },
		};
		grpc_channel_args args = {
			.num_args = g->cfg.max_receive_bytes > 0 ? ARRAY_SIZE(arg) : 1, .args = arg
		};

		g->server = grpc_server_create(&args, NULL); /* args are copied */
	}
	grpc_server_register_completion_queue(g->server, g->cq, NULL);
	return g;
}

static void done_cq_shut(grpc_completion_queue_functor *f, int ok);

static int add_method(struct gcore *g, const char *path, gcore_handler_fn handler, void *userdata,
		      bool blocking)
{
	struct gcore_method *m;
	void *reg;

	if (!g || !path || !handler || g->started || g->finished)
		return -EINVAL;
	if (blocking && g->cfg.pool_threads > 0 && !g->pool_cq) {
		g->pool_cq = grpc_completion_queue_create_for_next(NULL);
		grpc_server_register_completion_queue(g->server, g->pool_cq, NULL);
		g->done_cq_shutdown.functor_run = done_cq_shut;
		g->done_cq = grpc_completion_queue_create_for_callback(&g->done_cq_shutdown, NULL);
	}
	m = realloc(g->methods, (g->n_methods + 1) * sizeof(*m));
	if (!m)
		return -ENOMEM;
	g->methods = m;
	reg = grpc_server_register_method(g->server, path, NULL,
					  GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
	if (!reg)
		return -EINVAL; /* registered twice */
	g->methods[g->n_methods++] = (struct gcore_method){ .path = path,
							    .blocking = blocking && g->pool_cq,
							    .handler = handler,
							    .userdata = userdata,
							    .registered = reg };
	return 0;
}

int gcore_add_method(struct gcore *g, const char *path, gcore_handler_fn handler, void *userdata)
{
	return add_method(g, path, handler, userdata, false);
}

int gcore_add_blocking_method(struct gcore *g, const char *path, gcore_handler_fn handler,
			      void *userdata)
{
	return add_method(g, path, handler, userdata, true);
}

static void call_free(struct gcore_call *c)
{
	if (!c)
		return;
	if (c->have_request) {
		/* The request may hold secrets: leave none in freed memory we own. */
		explicit_bzero(GRPC_SLICE_START_PTR(c->request), GRPC_SLICE_LENGTH(c->request));
		grpc_slice_unref(c->request);
	}
	if (c->payload)
		grpc_byte_buffer_destroy(c->payload);
	if (c->response)
		grpc_byte_buffer_destroy(c->response);
	if (c->call)
		grpc_call_unref(c->call);
	grpc_metadata_array_destroy(&c->md);
	if (!c->m)
		grpc_call_details_destroy(&c->details);
	gpr_free(c->unknown_method);
	free(c);
}

static void call_finished(struct gcore *g, struct gcore_call *c);

/* The final batch of a call bound to done_cq completed: run by gRPC where it completed
 * (inlineable: at the end of the gRPC call that completed it, e.g. the answer's
 * grpc_call_start_batch on the thread that answered). */
static void call_done(grpc_completion_queue_functor *f, int ok)
{
	struct gcore_call *c = (struct gcore_call *)((char *)f - offsetof(struct gcore_call, done));

	call_finished(c->g, c);
}

static void done_cq_shut(grpc_completion_queue_functor *f, int ok)
{
	struct gcore *g = (struct gcore *)((char *)f - offsetof(struct gcore, done_cq_shutdown));

	pthread_mutex_lock(&g->lock);
	g->done_cq_down = true;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

/* Shuts done_cq down (nothing is bound to it any more) and destroys it once gRPC said its
 * shutdown is complete (its functor is ours: g must outlive the call). */
static void done_cq_close(struct gcore *g)
{
	struct timespec until;
	bool down;

	if (!g->done_cq)
		return;
	grpc_completion_queue_shutdown(g->done_cq);
	clock_gettime(CLOCK_MONOTONIC, &until);
	timespec_add_ms(&until, 5000);
	pthread_mutex_lock(&g->lock);
	while (!g->done_cq_down && pthread_cond_timedwait(&g->cond, &g->lock, &until) == 0)
		;
	down = g->done_cq_down;
	pthread_mutex_unlock(&g->lock);
	if (!down) {
		g->leaked = true; /* gRPC still holds our functor: g must stay */
		return;
	}
	grpc_completion_queue_destroy(g->done_cq);
	g->done_cq = NULL;
}

/* Keeps one more call of method m (NULL: any unregistered method) requested from gRPC. */
static void request_call(struct gcore *g, struct gcore_method *m)
{
	struct gcore_call *c = calloc(1, sizeof(*c));
	grpc_call_error e;

	if (!c) {
		log_event(LOG_LVL_ERROR, "grpc", "out of memory requesting a call", (char *)NULL);
		return;
	}
	c->g = g;
	c->m = m;
	c->state = CALL_REQUESTED;
	c->done.functor_run = call_done;
	c->done.inlineable = 1;
	grpc_metadata_array_init(&c->md);
	if (!m)
		grpc_call_details_init(&c->details);

	pthread_mutex_lock(&g->lock);
	if (g->stopping) {
		pthread_mutex_unlock(&g->lock);
		call_free(c);
		return;
	}
	g->requested++;
	pthread_mutex_unlock(&g->lock);

	if (m) {
		grpc_completion_queue *cq = m->blocking ? g->pool_cq : g->cq;
		grpc_completion_queue *bound = m->blocking && g->done_cq ? g->done_cq : cq;

		e = grpc_server_request_registered_call(g->server, m->registered, &c->call,
							&c->raw_deadline, &c->md, &c->payload,
							bound, cq, c);
	} else {
		e = grpc_server_request_call(g->server, &c->call, &c->details, &c->md, g->cq, g->cq,
					     c);
	}
	if (e != GRPC_CALL_OK) {
		log_event(LOG_LVL_ERROR, "grpc", "requesting a call failed", "error",
			  grpc_call_error_to_string(e), (char *)NULL);
		pthread_mutex_lock(&g->lock);
		g->requested--;
		pthread_cond_broadcast(&g->cond);
		pthread_mutex_unlock(&g->lock);
		call_free(c);
	}
}

/* Converts the call's gRPC deadline into CLOCK_MONOTONIC, through the time left. */
static void call_set_deadline(struct gcore_call *c, gpr_timespec raw)
{
	gpr_timespec d = gpr_convert_clock_type(raw, GPR_CLOCK_MONOTONIC);
	gpr_timespec left;
	long long ms;

	if (d.tv_sec == INT64_MAX || raw.tv_sec == INT64_MAX)
		return;
	left = gpr_time_sub(d, gpr_now(GPR_CLOCK_MONOTONIC));
	ms = (long long)left.tv_sec * 1000 + left.tv_nsec / 1000000;
	if (ms < 0)
		ms = 0;
	clock_gettime(CLOCK_MONOTONIC, &c->deadline);
	timespec_add_ms(&c->deadline, ms);
	c->have_deadline = true;
}

/* The request may hold secrets: its slices as gRPC handed them over are wiped once copied
 * (a raw buffer's slices: this message's bytes, which nothing reads again).  The copies
 * gRPC made before (its read buffers, a compressed message) are out of reach. */
static void payload_wipe(grpc_byte_buffer *b)
{
	grpc_slice_buffer *sb = &b->data.raw.slice_buffer;

	if (b->type != GRPC_BB_RAW || b->data.raw.compression != GRPC_COMPRESS_NONE)
		return;
	for (size_t i = 0; i < sb->count; i++)
		explicit_bzero(GRPC_SLICE_START_PTR(sb->slices[i]),
			       GRPC_SLICE_LENGTH(sb->slices[i]));
}

static void on_new_call(struct gcore *g, struct gcore_call *c, int success)
{
	pthread_mutex_lock(&g->lock);
	g->requested--;
	if (success)
		g->owned++;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
	if (!success) {
		/* Failed at shutdown: there is no call to answer. */
		call_free(c);
		return;
	}
	request_call(g, c->m); /* keep the number outstanding */
	c->state = CALL_OWNED;

	if (!c->m) {
		c->unknown_method = grpc_slice_to_c_string(c->details.method);
		call_set_deadline(c, c->details.deadline);
		gcore_call_fail(c, GCORE_UNIMPLEMENTED, "unknown method");
		return;
	}
	call_set_deadline(c, c->raw_deadline);
	if (c->payload) {
		grpc_byte_buffer_reader reader;

		if (grpc_byte_buffer_reader_init(&reader, c->payload)) {
			c->request = grpc_byte_buffer_reader_readall(&reader);
			c->have_request = true;
			grpc_byte_buffer_reader_destroy(&reader);
		}
		payload_wipe(c->payload);
		grpc_byte_buffer_destroy(c->payload);
		c->payload = NULL;
	}
	c->m->handler(c, c->m->userdata);
}

/* The final batch of an answered call completed: release it. */
static void call_finished(struct gcore *g, struct gcore_call *c)
{
	call_free(c);
	pthread_mutex_lock(&g->lock);
	g->owned--;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

/* Runs queue cq until it is shut down: the queue thread (g->cq) and each pool thread. */
static void run_queue(struct gcore *g, grpc_completion_queue *cq)
{
	for (;;) {
		grpc_event ev =
			grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
		struct gcore_call *c;

		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			break;
		if (ev.type != GRPC_OP_COMPLETE)
			continue;
		if (ev.tag == &g->shutdown_tag) {
			pthread_mutex_lock(&g->lock);
			g->shutdown_tag_seen = true;
			pthread_cond_broadcast(&g->cond);
			pthread_mutex_unlock(&g->lock);
			continue;
		}
		c = ev.tag;
		if (c->state == CALL_REQUESTED)
			on_new_call(g, c, ev.success);
		else if (c->state == CALL_REPLYING)
			call_finished(g, c);
	}
}

static void *queue_thread(void *arg)
{
	struct gcore *g = arg;

	run_queue(g, g->cq);
	return NULL;
}

static void *pool_thread(void *arg)
{
	struct gcore *g = arg;

	run_queue(g, g->pool_cq);
	return NULL;
}

/* Creates and locks the lock file.  -EBUSY when another process holds it. */
static int take_lock(struct gcore *g, struct error_info *err)
{
	int fd = open(g->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

	if (fd < 0)
		return err_set(err, -errno, "cannot open lock file %s: %s", g->lock_path,
			       strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int r = errno == EWOULDBLOCK ? -EBUSY : -errno;

		close(fd);
		if (r == -EBUSY)
			return err_set(err, r,
				       "another instance holds %s and serves %s; not touching it",
				       g->lock_path, g->socket_path);
		return err_set(err, r, "cannot lock %s: %s", g->lock_path, strerror(-r));
	}
	g->lock_fd = fd;
	return 0;
}

/* With the lock held: removes a stale socket, refuses anything else in the way. */
static int clear_stale_socket(struct gcore *g, struct error_info *err)
{
	struct stat st;

	if (lstat(g->socket_path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		return err_set(err, -errno, "cannot stat %s: %s", g->socket_path, strerror(errno));
	}
	if (!S_ISSOCK(st.st_mode))
		return err_set(err, -EEXIST, "%s exists and is not a socket", g->socket_path);
	if (unlink(g->socket_path) < 0)
		return err_set(err, -errno, "cannot remove stale socket %s: %s", g->socket_path,
			       strerror(errno));
	return 0;
}

static int start_thread(struct gcore *g, pthread_t *t, void *(*fn)(void *))
{
	sigset_t all, old;
	int r;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = -pthread_create(t, NULL, fn, g);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r;
}

/* Starts the pool threads of pool_cq.  Returns 0 or -errno (g->n_pool are running). */
static int start_pool(struct gcore *g)
{
	int r;

	if (!g->pool_cq)
		return 0;
	g->pool = calloc((size_t)g->cfg.pool_threads, sizeof(*g->pool));
	if (!g->pool)
		return -ENOMEM;
	for (; g->n_pool < g->cfg.pool_threads; g->n_pool++) {
		r = start_thread(g, &g->pool[g->n_pool], pool_thread);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Shuts a queue down and waits until it is drained to its end. */
static void drain_queue(grpc_completion_queue *cq)
{
	grpc_completion_queue_shutdown(cq);
	while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
}

/* Destroys the server (when there is one) and drains and destroys its queues, for a server
 * whose queues no thread of ours runs: never started, or its queue thread did not start. */
static void destroy_unrun(struct gcore *g)
{
	if (g->server) {
		grpc_server_destroy(g->server);
		g->server = NULL;
	}
	if (g->cq) {
		drain_queue(g->cq);
		grpc_completion_queue_destroy(g->cq);
		g->cq = NULL;
	}
	if (g->pool_cq) {
		drain_queue(g->pool_cq);
		grpc_completion_queue_destroy(g->pool_cq);
		g->pool_cq = NULL;
	}
	done_cq_close(g);
}

int gcore_start(struct gcore *g, struct error_info *err)
{
	_cleanup_free_ char *addr = NULL;
	grpc_server_credentials *creds;
	mode_t old_umask;
	int port, r;

	if (!g || g->started || g->finished)
		return err_set(err, -EINVAL, "server already started");
	r = take_lock(g, err);
	if (r < 0)
		return r;
	r = clear_stale_socket(g, err);
	if (r < 0)
		goto out_unlock;
	addr = strdup_printf("unix:%s", g->socket_path);
	if (!addr) {
		r = err_set(err, -ENOMEM, "out of memory");
		goto out_unlock;
	}
	creds = grpc_insecure_server_credentials_create();
	/* The socket never exists with a looser mode than the final one.  umask is
	 * process-wide: a file another thread creates in this instant is only made stricter. */
	old_umask = umask(0177);
	port = grpc_server_add_http2_port(g->server, addr, creds);
	umask(old_umask);
	grpc_server_credentials_release(creds);
	if (port == 0) {
		r = err_set(err, -EADDRINUSE, "gRPC could not listen on %s", addr);
		goto out_unlock;
	}

	grpc_server_start(g->server);
	r = start_thread(g, &g->thread, queue_thread);
	if (r < 0) {
		/* Nothing was requested, so nothing can be in flight: shut down inline. */
		grpc_server_shutdown_and_notify(g->server, g->cq, &g->shutdown_tag);
		grpc_server_cancel_all_calls(g->server);
		for (;;) {
			grpc_event ev =
				grpc_completion_queue_next(g->cq,
							   gpr_inf_future(GPR_CLOCK_MONOTONIC),
							   NULL);
			if (ev.type == GRPC_OP_COMPLETE && ev.tag == &g->shutdown_tag)
				break;
		}
		destroy_unrun(g);
		g->finished = true;
		err_set(err, r, "cannot start the gRPC queue thread: %s", strerror(-r));
		goto out_unlock;
	}
	g->started = true;
	r = start_pool(g);
	if (r < 0) {
		/* Nothing requested yet: the shutdown only has the queue thread to wait for. */
		gcore_shutdown(g, 0, 1000, NULL, NULL);
		g->lock_fd = close_fd(g->lock_fd);
		return err_set(err, r, "cannot start the gRPC pool threads: %s", strerror(-r));
	}
	for (size_t i = 0; i < g->n_methods; i++)
		for (int k = 0; k < g->cfg.calls_per_method; k++)
			request_call(g, &g->methods[i]);
	for (int k = 0; k < UNREGISTERED_REQUESTS; k++)
		request_call(g, NULL);

	if (g->cfg.gid != (gid_t)-1 && chown(g->socket_path, (uid_t)-1, g->cfg.gid) < 0) {
		r = err_set(err, -errno, "cannot set the group of %s: %s", g->socket_path,
			    strerror(errno));
		gcore_shutdown(g, 0, 1000, NULL, NULL);
		return r;
	}
	if (chmod(g->socket_path, g->cfg.mode) < 0) {
		r = err_set(err, -errno, "cannot set the mode of %s: %s", g->socket_path,
			    strerror(errno));
		gcore_shutdown(g, 0, 1000, NULL, NULL);
		return r;
	}
	return 0;

out_unlock:
	g->lock_fd = close_fd(g->lock_fd);
	return r;
}

/* Waits, with g->lock held, until the server is idle or timeout_ms passed. */
static bool wait_idle_locked(struct gcore *g, int timeout_ms)
{
	struct timespec until;

	clock_gettime(CLOCK_MONOTONIC, &until);
	timespec_add_ms(&until, timeout_ms > 0 ? timeout_ms : 0);
	for (;;) {
		if (g->shutdown_tag_seen && g->owned == 0 && g->requested == 0)
			return true;
		if (pthread_cond_timedwait(&g->cond, &g->lock, &until) == ETIMEDOUT)
			return g->shutdown_tag_seen && g->owned == 0 && g->requested == 0;
	}
}

int gcore_shutdown(struct gcore *g, int grace_ms, int hard_ms, void (*on_grace_expired)(void *),
		   void *userdata)
{
	bool idle, begin;

	if (!g)
		return 0;
	pthread_mutex_lock(&g->lock);
	if (!g->started || g->finished) {
		pthread_mutex_unlock(&g->lock);
		return 0;
	}
	begin = !g->stopping;
	g->stopping = true;
	pthread_mutex_unlock(&g->lock);

	/* New calls now get UNAVAILABLE; calls in flight go on. */
	if (begin)
		grpc_server_shutdown_and_notify(g->server, g->cq, &g->shutdown_tag);
	pthread_mutex_lock(&g->lock);
	idle = wait_idle_locked(g, grace_ms);
	pthread_mutex_unlock(&g->lock);
	if (!idle) {
		if (on_grace_expired)
			on_grace_expired(userdata);
		grpc_server_cancel_all_calls(g->server);
		pthread_mutex_lock(&g->lock);
		idle = wait_idle_locked(g, hard_ms);
		pthread_mutex_unlock(&g->lock);
		if (!idle) {
			/* A call is still owned: shutting the queue down now would abort when
			 * its owner answers.  Leave everything running. */
			g->leaked = true;
			return -ETIMEDOUT;
		}
	}
	g->leaked = false;
	grpc_server_destroy(g->server);
	g->server = NULL;
	grpc_completion_queue_shutdown(g->cq);
	pthread_join(g->thread, NULL); /* the thread drains the queue to GRPC_QUEUE_SHUTDOWN */
	grpc_completion_queue_destroy(g->cq);
	g->cq = NULL;
	if (g->pool_cq) {
		if (g->n_pool == 0) { /* no thread runs it: drain it here */
			drain_queue(g->pool_cq);
		} else {
			grpc_completion_queue_shutdown(g->pool_cq);
			for (int i = 0; i < g->n_pool; i++) /* each runs it to its end */
				pthread_join(g->pool[i], NULL);
		}
		g->n_pool = 0;
		grpc_completion_queue_destroy(g->pool_cq);
		g->pool_cq = NULL;
	}
	done_cq_close(g);
	g->finished = true;
	return 0;
}

bool gcore_stopping(const struct gcore *g)
{
	bool r;

	if (!g)
		return false;
	pthread_mutex_lock((pthread_mutex_t *)&g->lock);
	r = g->stopping || g->finished;
	pthread_mutex_unlock((pthread_mutex_t *)&g->lock);
	return r;
}

struct gcore *gcore_free(struct gcore *g)
{
	if (!g)
		return NULL;
	if (g->started && !g->finished)
		gcore_shutdown(g, 0, 2000, NULL, NULL);
	if (g->leaked) {
		/* Still owned calls: freeing anything would crash their owners later. */
		log_event(LOG_LVL_WARNING, "grpc", "calls still in flight at exit, leaking server",
			  "socket", g->socket_path, (char *)NULL);
		return NULL;
	}
	/* A server never started has no listener and nothing requested; one shut down has no
	 * server and no queue left but done_cq. */
	destroy_unrun(g);
	if (g->leaked)
		return NULL;
	grpc_shutdown();
	/* The lock goes last: the socket gRPC unlinked at shutdown is ours until here. */
	g->lock_fd = close_fd(g->lock_fd);
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
	free(g->methods);
	free(g->pool);
	free(g->socket_path);
	free(g->lock_path);
	free(g);
	return NULL;
}

const char *gcore_call_method(const struct gcore_call *call)
{
	if (call->m)
		return call->m->path;
	return call->unknown_method ? call->unknown_method : "?";
}

void gcore_call_wipe_request(struct gcore_call *call)
{
	if (call && call->have_request)
		explicit_bzero(GRPC_SLICE_START_PTR(call->request),
			       GRPC_SLICE_LENGTH(call->request));
}

const void *gcore_call_request(const struct gcore_call *call, size_t *ret_len)
{
	if (!call->have_request) {
		*ret_len = 0;
		return NULL;
	}
	*ret_len = GRPC_SLICE_LENGTH(call->request);
	/* A non-NULL pointer even for an empty message. */
	return *ret_len ? (const void *)GRPC_SLICE_START_PTR(call->request) : (const void *)"";
}

bool gcore_call_deadline(const struct gcore_call *call, struct timespec *ret_monotonic)
{
	if (!call->have_deadline)
		return false;
	*ret_monotonic = call->deadline;
	return true;
}

/* Sends the final batch: status, message (for OK), and waits for the close. */
/* Counts an answered CSI call ("/csi.v1.Node/NodePublishVolume" -> "Node/NodePublishVolume"). */
static void count_call(const char *method, int code)
{
	if (method && startswith(method, "/csi.v1."))
		metrics_csi_call(method + strlen("/csi.v1."), gcore_status_name(code));
}

static int call_answer(struct gcore_call *c, int code, const char *message, const void *data,
		       size_t len)
{
	struct gcore *g = c->g;

	count_call(gcore_call_method(c), code);
	grpc_op ops[4];
	grpc_slice details;
	grpc_call_error e;
	size_t n = 0;

	memset(ops, 0, sizeof(ops));
	ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[n++].data.send_initial_metadata.count = 0;
	if (code == GCORE_OK) {
		grpc_slice s = grpc_slice_from_copied_buffer(data, len);

		c->response = grpc_raw_byte_buffer_create(&s, 1);
		grpc_slice_unref(s);
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n++].data.send_message.send_message = c->response;
	}
	details = grpc_slice_from_copied_string(message ? message : "");
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.trailing_metadata_count = 0;
	ops[n].data.send_status_from_server.status = (grpc_status_code)code;
	ops[n++].data.send_status_from_server.status_details = message ? &details : NULL;
	ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;

	/* Set before the batch starts: its completion may arrive before start_batch returns. */
	c->state = CALL_REPLYING;
	e = grpc_call_start_batch(c->call, ops, n,
				  c->m && c->m->blocking && g->done_cq ? (void *)&c->done : c,
				  NULL);
	grpc_slice_unref(details);
	if (e != GRPC_CALL_OK) {
		log_event(LOG_LVL_ERROR, "grpc", "answering a call failed", "method",
			  gcore_call_method(c), "error", grpc_call_error_to_string(e),
			  (char *)NULL);
		grpc_call_cancel(c->call, NULL);
		call_finished(g, c);
		return -EIO;
	}
	return 0;
}

int gcore_call_reply(struct gcore_call *call, const void *data, size_t len)
{
	return call_answer(call, GCORE_OK, NULL, data ? data : "", data ? len : 0);
}

int gcore_call_fail(struct gcore_call *call, int code, const char *message)
{
	if (code == GCORE_OK)
		code = GCORE_UNKNOWN;
	return call_answer(call, code, message ? message : "", NULL, 0);
}

int gcore_call_reply_message(struct gcore_call *call, const struct ProtobufCMessage *msg)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	_cleanup_free_ uint8_t *buf = malloc(len ? len : 1);

	if (!buf) {
		gcore_call_fail(call, GCORE_RESOURCE_EXHAUSTED, "out of memory");
		return -ENOMEM;
	}
	protobuf_c_message_pack(msg, buf);
	return gcore_call_reply(call, buf, len);
}

static int unary_call(const char *socket_path, const char *method, const void *request, size_t len,
		      int timeout_ms, int *ret_code, char *ret_message, size_t message_size,
		      void **ret_response, size_t *ret_len);

int gcore_unary_call(const char *socket_path, const char *method, const void *request, size_t len,
		     int timeout_ms, int *ret_code, char *ret_message, size_t message_size,
		     void **ret_response, size_t *ret_len)
{
	int r = gcore_dlopen(NULL);

	if (r < 0)
		return r;
	return unary_call(socket_path, method, request, len, timeout_ms, ret_code, ret_message,
			  message_size, ret_response, ret_len);
}

static int unary_call(const char *socket_path, const char *method, const void *request, size_t len,
		      int timeout_ms, int *ret_code, char *ret_message, size_t message_size,
		      void **ret_response, size_t *ret_len)
{
	grpc_channel_credentials *creds;
	grpc_channel *channel;
	grpc_completion_queue *cq;
	grpc_call *call;
	grpc_metadata_array initial, trailing;
	grpc_byte_buffer *send = NULL, *recv = NULL;
	grpc_status_code status = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice(), payload;
	grpc_op ops[6];
	grpc_event ev;
	gpr_timespec deadline;
	char target[4200];
	int r = 0;

	*ret_response = NULL;
	*ret_len = 0;
	snprintf(target, sizeof(target), "unix:%s", socket_path);
	grpc_init();
	creds = grpc_insecure_credentials_create();
	channel = grpc_channel_create(target, creds, NULL);
	grpc_channel_credentials_release(creds);
	cq = grpc_completion_queue_create_for_pluck(NULL);
	deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
				gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
	call = grpc_channel_create_call(channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
					grpc_slice_from_static_string(method), NULL, deadline,
					NULL);
	grpc_metadata_array_init(&initial);
	grpc_metadata_array_init(&trailing);
	payload = grpc_slice_from_copied_buffer(request, len);
	send = grpc_raw_byte_buffer_create(&payload, 1);
	grpc_slice_unref(payload);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = send;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &recv;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &trailing;
	ops[5].data.recv_status_on_client.status = &status;
	ops[5].data.recv_status_on_client.status_details = &details;
	if (grpc_call_start_batch(call, ops, 6, (void *)1, NULL) != GRPC_CALL_OK) {
		r = -EIO;
	} else {
		ev = grpc_completion_queue_pluck(cq, (void *)1, gpr_inf_future(GPR_CLOCK_REALTIME),
						 NULL);
		if (ev.type != GRPC_OP_COMPLETE || !ev.success)
			r = -EIO;
	}
	if (r == 0) {
		*ret_code = (int)status;
		if (ret_message)
			snprintf(ret_message, message_size, "%.*s", (int)GRPC_SLICE_LENGTH(details),
				 (const char *)GRPC_SLICE_START_PTR(details));
		if (status == GRPC_STATUS_OK && recv) {
			grpc_byte_buffer_reader reader;
			grpc_slice all;
			if (grpc_byte_buffer_reader_init(&reader, recv)) {
				all = grpc_byte_buffer_reader_readall(&reader);
				*ret_len = GRPC_SLICE_LENGTH(all);
				*ret_response = malloc(*ret_len ? *ret_len : 1);
				if (*ret_response)
					memcpy(*ret_response, GRPC_SLICE_START_PTR(all), *ret_len);
				else
					r = -ENOMEM;
				grpc_slice_unref(all);
				grpc_byte_buffer_reader_destroy(&reader);
			}
		}
	}
	grpc_slice_unref(details);
	grpc_byte_buffer_destroy(send);
	if (recv)
		grpc_byte_buffer_destroy(recv);
	grpc_metadata_array_destroy(&initial);
	grpc_metadata_array_destroy(&trailing);
	grpc_call_unref(call);
	grpc_channel_destroy(channel);
	grpc_completion_queue_shutdown(cq);
	while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
		       .type != GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
	grpc_shutdown();
	return r;
}
