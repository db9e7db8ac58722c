/* csi-bench.c - a CSI Node client that times NodePublishVolume and NodeUnpublishVolume, on
 * the gRPC core C API and the project's protobuf-c code.  It takes any CSI endpoint and
 * volume_context, so the same client can time another CSI driver side by side.
 *
 *   csi-bench --endpoint unix:///path --targets-root DIR --count M [--concurrency C]
 *             [--volume-context k=v]... [--staging-path DIR] [--volume-id-prefix S]
 *             [--fs-type T] [--label NAME] [--deadline-ms MS] [--keep] [--agent-pid PID]
 *   csi-bench ... --shared K1,K2,... [--reps M]
 *   csi-bench ... --paced IDLE_MS
 *   csi-bench --endpoint unix:///path --wait-ready MS
 *   csi-bench --self-test --targets-root DIR/pods --volume-context path=/abs/dir ...
 *
 * One thread keeps C calls in flight on one completion queue (C = 1: sequential).  Volume i
 * has id "<prefix><i>" and target "<targets-root>/<label>-<i>/mount"; the client makes the
 * parent dir, as kubelet does, and removes it afterwards.  With --staging-path, each volume
 * is first staged at "<staging-path>/<label>-<i>", and unstaged after (timed and reported
 * too; the targets are on publish and unpublish).  Each call
 * is timed from the start of its batch to its completion; the phase from its first call to
 * its last completion.  After the publish phase every target must be a mount root, after the
 * unpublish phase none: a driver that answers OK without mounting is caught.
 *
 * Sequentially, it also times a publish the agent refuses at once (no volume_id) and, after
 * the publish phase, each publish again (a repeat, answered with no operation): what a
 * publish is made of.
 *
 * Before the publish phase the client times its own no-op call on the same channel,
 * NodeGetCapabilities, as many times and as many in flight: the client's floor, which a
 * publish's p50 is set against (the agent's share, docs/performance.md).
 *
 * --shared K1,K2,...: one volume (id "<prefix>0", staged at "<staging-path>/<label>-0" when
 * a staging path is given), published at more and more targets (1, 2, ...); when it has K
 * of them, the client times M no-op calls (--reps, default 200), then publishes and
 * unpublishes one more target M times, so the volume stays at K while its calls are timed.  Sequential;
 * the access mode is MULTI_NODE_MULTI_WRITER (many pods sharing one volume).  The labels
 * gain ".<K>".  Afterwards every target is unpublished and the volume unstaged.
 *
 * --paced IDLE_MS: calls as kubelet paces them (its volume manager wakes every 100 ms; pods
 * come seconds apart, so each call finds the agent idle).  One volume (id "<prefix>0", staged
 * once when a staging path is given) published at --count fresh targets, one after another:
 * before each publish the client sleeps IDLE_MS and times its no-op call, sleeps IDLE_MS again
 * and times the publish; then each unpublish the same way.  Then the kernel's floor, what any
 * publish costs: after IDLE_MS of idle the client's own mkdir + bind mount(2) of
 * volume_context.path at fresh targets of the same layout, and umount + rmdir for the
 * unpublish.  Figures: noop, publish, unpublish, floor_publish, floor_unpublish (p50, p99),
 * the floor's own context switches per call (the kernel's sleeps in those system calls), and
 * with --agent-pid the agent's context switches per noop, publish and unpublish (sampled
 * right around each call, not over the idle gaps).
 *
 * --keep stops after the publish phase and leaves the volumes staged and published (a later
 * run, with another --label and --volume-id-prefix, then works next to them: the agent's
 * cost with many volumes already there).
 *
 * --wait-ready polls Identity.Probe (about every 2 ms) until it answers ready, prints
 * "ready_at_ns <CLOCK_MONOTONIC ns>" and exits 0; exits 1 when MS pass first.  --self-test
 * serves the CSI transport in this process with a test backend that bind-mounts
 * volume_context.path: it checks the client, and its figures are not volagent's.
 *
 * --agent-pid PID (the driver's process, on this machine) adds what each phase cost it: CPU
 * per call (utime + stime of /proc/PID/stat, every thread) and context switches per call
 * (voluntary + involuntary, summed over /proc/PID/task/<tid>/status of the threads alive at
 * each end of the phase), and this client's own CPU per call (getrusage).
 *
 * Output: "figure <label>.<rpc>.<p50|p99|rate> <value> <unit>" lines, as volagent-bench. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench-util.h"
#include "csi-server.h"
#include "csi.pb-c.h"

#define MAX_CONCURRENCY 256
#define MAX_CONTEXT 32

static struct {
	const char *endpoint;
	const char *targets_root;
	const char *staging_path;
	const char *prefix;
	const char *fs_type;
	const char *label;
	int count, concurrency, deadline_ms;
	int agent_pid; /* 0: not sampled */
	bool keep;     /* --keep: stop after the publish phase, leaving the volumes published */
	const char *shared; /* --shared K1,K2,...: one volume at K targets */
	int paced_ms;	    /* --paced IDLE_MS: one volume, each call after that much idle */
	int reps;
	Csi__V1__NodePublishVolumeRequest__VolumeContextEntry ctx[MAX_CONTEXT];
	Csi__V1__NodePublishVolumeRequest__VolumeContextEntry *ctx_ptr[MAX_CONTEXT];
	size_t n_ctx;
} opt = {
	.prefix = "bench-vol-",
	.fs_type = "",
	.label = "csi",
	.count = 1000,
	.concurrency = 1,
	.deadline_ms = 30000,
	.reps = 200,
};

static grpc_channel *channel;
static grpc_completion_queue *cq;
static const char *channel_target;

/* A channel whose reconnect backoff is short: gRPC's default (1 s, growing) would hide when a
 * restarted server becomes reachable. */
static grpc_channel *channel_new(void)
{
	grpc_channel_credentials *creds = grpc_insecure_credentials_create();
	grpc_arg args[] = {
		{ .type = GRPC_ARG_INTEGER,
		  .key = GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
		  .value.integer = 1 },
		{ .type = GRPC_ARG_INTEGER,
		  .key = GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
		  .value.integer = 1 },
		{ .type = GRPC_ARG_INTEGER,
		  .key = GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
		  .value.integer = 10 },
	};
	grpc_channel_args ca = { .num_args = sizeof(args) / sizeof(args[0]), .args = args };
	grpc_channel *ch = grpc_channel_create(channel_target, creds, &ca);

	grpc_channel_credentials_release(creds);
	return ch;
}

/* --- one call ----------------------------------------------------------------------- */

enum rpc {
	RPC_PROBE,
	RPC_STAGE,
	RPC_PUBLISH,
	RPC_UNPUBLISH,
	RPC_UNSTAGE,
	RPC_NOOP,
	RPC_PUBLISH_REFUSED /* a publish without volume_id: INVALID_ARGUMENT at once */
};

static const char *const rpc_method[] = {
	[RPC_PROBE] = "/csi.v1.Identity/Probe",
	[RPC_STAGE] = "/csi.v1.Node/NodeStageVolume",
	[RPC_PUBLISH] = "/csi.v1.Node/NodePublishVolume",
	[RPC_UNPUBLISH] = "/csi.v1.Node/NodeUnpublishVolume",
	[RPC_UNSTAGE] = "/csi.v1.Node/NodeUnstageVolume",
	[RPC_NOOP] = "/csi.v1.Node/NodeGetCapabilities",
	[RPC_PUBLISH_REFUSED] = "/csi.v1.Node/NodePublishVolume",
};

/* Each method registered on the channel once (grpc_channel_register_call): a call then does
 * not hand gRPC its path to look up again. */
static grpc_channel *registered_on;
static void *registered[RPC_PUBLISH_REFUSED + 1];

static void *method_handle(enum rpc rpc)
{
	if (registered_on != channel) {
		for (size_t i = 0; i < sizeof(registered) / sizeof(registered[0]); i++)
			registered[i] =
				grpc_channel_register_call(channel, rpc_method[i], NULL, NULL);
		registered_on = channel;
	}
	return registered[rpc];
}

struct slot {
	grpc_call *call;
	grpc_byte_buffer *request, *response;
	grpc_metadata_array md_initial, md_trailing;
	grpc_status_code status;
	grpc_slice details;
	int index;
	uint64_t start_ns;
};

static void path_for(const char *root, int i, char *buf, size_t size)
{
	snprintf(buf, size, "%s/%s-%d", root, opt.label, i);
}

static void target_for(int i, char *buf, size_t size)
{
	char parent[PATH_MAX];

	path_for(opt.targets_root, i, parent, sizeof(parent));
	snprintf(buf, size, "%s/mount", parent);
}

static bool one_volume(void)
{
	return opt.shared || opt.paced_ms > 0;
}

/* Packs the request of rpc for volume i into a byte buffer. */
static grpc_byte_buffer *build_request(enum rpc rpc, int i)
{
	Csi__V1__VolumeCapability__MountVolume mount =
		CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
	Csi__V1__VolumeCapability__AccessMode mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
	Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
	Csi__V1__ProbeRequest probe = CSI__V1__PROBE_REQUEST__INIT;
	Csi__V1__NodeGetCapabilitiesRequest noop = CSI__V1__NODE_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__NodeStageVolumeRequest stage = CSI__V1__NODE_STAGE_VOLUME_REQUEST__INIT;
	Csi__V1__NodePublishVolumeRequest pub = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__NodeUnpublishVolumeRequest unpub = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__NodeUnstageVolumeRequest unstage = CSI__V1__NODE_UNSTAGE_VOLUME_REQUEST__INIT;
	char volume_id[256], target[PATH_MAX], staging[PATH_MAX] = "";
	ProtobufCMessage *msg;
	uint8_t buf[16384];
	size_t len;
	grpc_slice slice;
	grpc_byte_buffer *bb;

	/* --shared, --paced: every target is of volume 0. */
	snprintf(volume_id, sizeof(volume_id), "%s%d", opt.prefix, one_volume() ? 0 : i);
	if (opt.targets_root)
		target_for(i, target, sizeof(target));
	if (opt.staging_path)
		path_for(opt.staging_path, one_volume() ? 0 : i, staging, sizeof(staging));
	mount.fs_type = (char *)opt.fs_type;
	mode.mode = one_volume()
			    ? CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER
			    : CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
	cap.access_mode = &mode;
	cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	cap.mount = &mount;

	switch (rpc) {
	case RPC_PROBE:
		msg = &probe.base;
		break;
	case RPC_NOOP:
		msg = &noop.base;
		break;
	case RPC_STAGE:
		stage.volume_id = volume_id;
		stage.staging_target_path = staging;
		stage.volume_capability = &cap;
		/* The map entry types of the two requests have the same layout. */
		stage.n_volume_context = opt.n_ctx;
		stage.volume_context =
			(Csi__V1__NodeStageVolumeRequest__VolumeContextEntry **)opt.ctx_ptr;
		msg = &stage.base;
		break;
	case RPC_PUBLISH:
	case RPC_PUBLISH_REFUSED:
		pub.volume_id = rpc == RPC_PUBLISH ? volume_id : (char *)"";
		pub.staging_target_path = staging;
		pub.target_path = target;
		pub.volume_capability = &cap;
		pub.n_volume_context = opt.n_ctx;
		pub.volume_context = opt.ctx_ptr;
		msg = &pub.base;
		break;
	case RPC_UNPUBLISH:
		unpub.volume_id = volume_id;
		unpub.target_path = target;
		msg = &unpub.base;
		break;
	case RPC_UNSTAGE:
		unstage.volume_id = volume_id;
		unstage.staging_target_path = staging;
		msg = &unstage.base;
		break;
	default:
		die("unknown rpc");
	}
	len = protobuf_c_message_get_packed_size(msg);
	if (len > sizeof(buf))
		die("request too large (%zu bytes)", len);
	protobuf_c_message_pack(msg, buf);
	slice = grpc_slice_from_copied_buffer((const char *)buf, len);
	bb = grpc_raw_byte_buffer_create(&slice, 1);
	grpc_slice_unref(slice);
	return bb;
}

static void slot_start(struct slot *s, enum rpc rpc, int i, int deadline_ms)
{
	grpc_op ops[6];
	grpc_call_error e;
	gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
					     gpr_time_from_millis(deadline_ms, GPR_TIMESPAN));

	memset(ops, 0, sizeof(ops));
	s->index = i;
	s->request = build_request(rpc, i);
	s->response = NULL;
	grpc_metadata_array_init(&s->md_initial);
	grpc_metadata_array_init(&s->md_trailing);
	s->details = grpc_empty_slice();
	s->call = grpc_channel_create_registered_call(channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
						      method_handle(rpc), deadline, NULL);
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = s->request;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &s->md_initial;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &s->response;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &s->md_trailing;
	ops[5].data.recv_status_on_client.status = &s->status;
	ops[5].data.recv_status_on_client.status_details = &s->details;
	s->start_ns = bench_now_ns();
	e = grpc_call_start_batch(s->call, ops, 6, s, NULL);
	if (e != GRPC_CALL_OK)
		die("grpc_call_start_batch: %d", (int)e);
}

/* Frees what the finished call holds; returns its status (and the message in buf). */
static grpc_status_code slot_finish(struct slot *s, char *msg, size_t size)
{
	grpc_status_code st = s->status;
	char *d = grpc_slice_to_c_string(s->details);

	snprintf(msg, size, "%s", d ? d : "");
	gpr_free(d);
	grpc_slice_unref(s->details);
	grpc_metadata_array_destroy(&s->md_initial);
	grpc_metadata_array_destroy(&s->md_trailing);
	grpc_byte_buffer_destroy(s->request);
	grpc_call_unref(s->call);
	s->call = NULL;
	return st;
}

/* --- phases --------------------------------------------------------------------------- */

static double percentile(const double *sorted, int n, double p)
{
	int k = (int)(p / 100.0 * n + 0.999999) - 1;

	if (k < 0)
		k = 0;
	if (k >= n)
		k = n - 1;
	return sorted[k];
}

/* What the driver (--agent-pid) and this client have used so far. */
struct cost {
	double agent_cpu_s; /* utime + stime */
	unsigned long long agent_cs;
	double self_cpu_s;
};

static void cost_sample(struct cost *c)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	struct rusage ru;
	struct dirent *de;
	FILE *f;
	DIR *d;

	memset(c, 0, sizeof(*c));
	getrusage(RUSAGE_SELF, &ru);
	c->self_cpu_s = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
			(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
	if (!opt.agent_pid)
		return;
	snprintf(path, sizeof(path), "/proc/%d/stat", opt.agent_pid);
	f = fopen(path, "re");
	if (!f || !fgets(buf, sizeof(buf), f) || !(p = strrchr(buf, ')')) ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		die("cannot read %s", path);
	fclose(f);
	c->agent_cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
	snprintf(path, sizeof(path), "/proc/%d/task", opt.agent_pid);
	d = opendir(path);
	if (!d)
		die("cannot read %s", path);
	while ((de = readdir(d))) {
		char line[256], file[300];
		unsigned long long n;

		if (de->d_name[0] == '.')
			continue;
		snprintf(file, sizeof(file), "%s/%s/status", path, de->d_name);
		f = fopen(file, "re");
		if (!f)
			continue; /* the thread is gone */
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "voluntary_ctxt_switches: %llu", &n) == 1 ||
			    sscanf(line, "nonvoluntary_ctxt_switches: %llu", &n) == 1)
				c->agent_cs += n;
		fclose(f);
	}
	closedir(d);
}

static struct cost phase_cost[2]; /* at the start and the end of the last phase */

static void report_cost(const char *rpc, const struct cost *a, const struct cost *b, int n)
{
	printf("figure %s.%s.client_cpu %.1f us/call\n", opt.label, rpc,
	       (b->self_cpu_s - a->self_cpu_s) * 1e6 / n);
	if (!opt.agent_pid)
		return;
	printf("figure %s.%s.agent_cpu %.1f us/call\n", opt.label, rpc,
	       (b->agent_cpu_s - a->agent_cpu_s) * 1e6 / n);
	printf("figure %s.%s.agent_cs %.2f per call\n", opt.label, rpc,
	       (double)(b->agent_cs - a->agent_cs) / n);
}

/* Runs rpc for volumes [0, count) with concurrency calls in flight.  Fills lat_ms (per
 * call) and returns the wall time of the phase in ms; dies on the first failed call. */
static double run_phase(enum rpc rpc, int count, int concurrency, double *lat_ms)
{
	struct slot slots[MAX_CONCURRENCY];
	int next = 0, done = 0;
	uint64_t t0 = bench_now_ns();

	cost_sample(&phase_cost[0]);
	memset(slots, 0, sizeof(slots));
	for (int k = 0; k < concurrency && next < count; k++)
		slot_start(&slots[k], rpc, next++, opt.deadline_ms);
	while (done < count) {
		grpc_event ev =
			grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
		struct slot *s = ev.tag;
		char msg[512];
		grpc_status_code st;

		if (ev.type != GRPC_OP_COMPLETE)
			die("completion queue: event type %d", (int)ev.type);
		if (lat_ms)
			lat_ms[s->index] = (double)(bench_now_ns() - s->start_ns) / 1e6;
		if (s->response)
			grpc_byte_buffer_destroy(s->response);
		st = slot_finish(s, msg, sizeof(msg));
		if (!ev.success || st != (rpc == RPC_PUBLISH_REFUSED ? GRPC_STATUS_INVALID_ARGUMENT
								     : GRPC_STATUS_OK))
			die("%s of volume %s%d: status %d: %s", rpc_method[rpc], opt.prefix,
			    s->index, (int)st, msg);
		done++;
		if (next < count)
			slot_start(s, rpc, next++, opt.deadline_ms);
	}
	cost_sample(&phase_cost[1]);
	return (double)(bench_now_ns() - t0) / 1e6;
}

static void report(const char *rpc, double *lat, int n, double wall_ms)
{
	qsort(lat, (size_t)n, sizeof(*lat), bench_cmp_double);
	printf("figure %s.%s.p50 %.3f ms\n", opt.label, rpc, percentile(lat, n, 50));
	printf("figure %s.%s.p99 %.3f ms\n", opt.label, rpc, percentile(lat, n, 99));
	if (wall_ms > 0) { /* 0: the calls were not one phase (--shared) */
		printf("figure %s.%s.rate %.0f calls/s\n", opt.label, rpc, n / (wall_ms / 1000));
		report_cost(rpc, &phase_cost[0], &phase_cost[1], n);
	}
	printf("%s %s: %d calls, %d in flight; min %.3f ms, max %.3f ms\n", opt.label, rpc, n,
	       opt.concurrency, lat[0], lat[n - 1]);
	fflush(stdout);
}

/* Every target mounted (want) or none. */
static void check_targets(bool want)
{
	char t[PATH_MAX];

	for (int i = 0; i < opt.count; i++) {
		target_for(i, t, sizeof(t));
		if (bench_is_mount_root(t) != want)
			die("after the %s phase, %s is %s", want ? "publish" : "unpublish", t,
			    want ? "not a mount point" : "still a mount point");
	}
}

static void make_parent(const char *root, int i)
{
	char p[PATH_MAX];

	path_for(root, i, p, sizeof(p));
	if (mkdir(p, 0750) < 0 && errno != EEXIST)
		die("mkdir %s: %s", p, strerror(errno));
}

static void remove_parent(int i)
{
	char p[PATH_MAX];

	target_for(i, p, sizeof(p));
	rmdir(p); /* the driver may have removed it; CSI allows either */
	path_for(opt.targets_root, i, p, sizeof(p));
	if (rmdir(p) < 0)
		die("rmdir %s: %s", p, strerror(errno));
}

static int bench(void)
{
	double *lat = calloc((size_t)opt.count, sizeof(double)), wall;
	char p[PATH_MAX];

	if (!lat)
		die("out of memory");
	/* kubelet makes the target's parent, and the staging dir. */
	for (int i = 0; i < opt.count; i++) {
		make_parent(opt.targets_root, i);
		if (opt.staging_path)
			make_parent(opt.staging_path, i);
	}
	if (opt.staging_path) {
		wall = run_phase(RPC_STAGE, opt.count, opt.concurrency, lat);
		report("stage", lat, opt.count, wall);
	}
	wall = run_phase(RPC_NOOP, opt.count, opt.concurrency, lat);
	report("noop", lat, opt.count, wall);
	if (opt.concurrency == 1) {
		/* What a publish is made of (docs/performance.md): refused on gRPC's thread before
		 * any hand-off, the same size on the wire. */
		run_phase(RPC_PUBLISH_REFUSED, opt.count, 1, lat);
		report("refused", lat, opt.count, 0);
	}
	wall = run_phase(RPC_PUBLISH, opt.count, opt.concurrency, lat);
	check_targets(true);
	report("publish", lat, opt.count, wall);
	if (opt.concurrency == 1) {
		/* Each publish again: answered by the reconciler's thread, no operation. */
		run_phase(RPC_PUBLISH, opt.count, 1, lat);
		report("repeat", lat, opt.count, 0);
	}
	if (opt.keep) {
		free(lat);
		return 0;
	}
	wall = run_phase(RPC_UNPUBLISH, opt.count, opt.concurrency, lat);
	check_targets(false);
	report("unpublish", lat, opt.count, wall);
	if (opt.staging_path) {
		wall = run_phase(RPC_UNSTAGE, opt.count, opt.concurrency, lat);
		report("unstage", lat, opt.count, wall);
	}
	for (int i = 0; i < opt.count; i++) {
		remove_parent(i);
		if (opt.staging_path) {
			path_for(opt.staging_path, i, p, sizeof(p));
			rmdir(p);
		}
	}
	free(lat);
	return 0;
}

/* One call, waited for; its latency in ms. */
static double one_call(enum rpc rpc, int i)
{
	struct slot s;
	grpc_event ev;
	grpc_status_code st;
	double ms;
	char msg[512];

	memset(&s, 0, sizeof(s));
	slot_start(&s, rpc, i, opt.deadline_ms);
	ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	ms = (double)(bench_now_ns() - s.start_ns) / 1e6;
	if (ev.type != GRPC_OP_COMPLETE || ev.tag != &s)
		die("completion queue: event type %d", (int)ev.type);
	if (s.response)
		grpc_byte_buffer_destroy(s.response);
	st = slot_finish(&s, msg, sizeof(msg));
	if (!ev.success || st != GRPC_STATUS_OK)
		die("%s at target %d: status %d: %s", rpc_method[rpc], i, (int)st, msg);
	return ms;
}

/* --shared: volume 0 at targets 1..k; the timed target is SHARED_PROBE. */
#define SHARED_PROBE 9999999
static int bench_shared(void)
{
	const char *label = opt.label;
	int published = 0, reps = opt.reps;
	char *list = strdup(opt.shared), *tok, *save = NULL, name[256];
	double *noop = calloc((size_t)reps, sizeof(double));
	double *pub = calloc((size_t)reps, sizeof(double));
	double *unpub = calloc((size_t)reps, sizeof(double));
	char t[PATH_MAX];

	if (!list || !noop || !pub || !unpub)
		die("out of memory");
	if (opt.staging_path) {
		make_parent(opt.staging_path, 0);
		one_call(RPC_STAGE, 0);
	}
	make_parent(opt.targets_root, SHARED_PROBE);
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int k = atoi(tok);

		while (published < k) {
			make_parent(opt.targets_root, ++published);
			one_call(RPC_PUBLISH, published);
		}
		for (int r = 0; r < reps; r++)
			noop[r] = one_call(RPC_NOOP, 0);
		for (int r = 0; r < reps; r++) {
			pub[r] = one_call(RPC_PUBLISH, SHARED_PROBE);
			unpub[r] = one_call(RPC_UNPUBLISH, SHARED_PROBE);
		}
		snprintf(name, sizeof(name), "%s.%d", label, k);
		opt.label = name;
		opt.concurrency = 1;
		report("noop", noop, reps, 0);
		report("publish", pub, reps, 0);
		report("unpublish", unpub, reps, 0);
		opt.label = label;
	}
	for (int i = 1; i <= published; i++) {
		target_for(i, t, sizeof(t));
		if (!bench_is_mount_root(t))
			die("%s is not a mount point", t);
		one_call(RPC_UNPUBLISH, i);
		if (bench_is_mount_root(t))
			die("%s is still a mount point", t);
		remove_parent(i);
	}
	remove_parent(SHARED_PROBE);
	if (opt.staging_path)
		one_call(RPC_UNSTAGE, 0);
	free(list);
	free(noop);
	free(pub);
	free(unpub);
	return 0;
}

/* --paced: the targets are 1..count (0 names the volume's staging dir); the floor's targets
 * follow them. */
static void idle_gap(void)
{
	struct timespec ts = { .tv_sec = opt.paced_ms / 1000,
			       .tv_nsec = (long)(opt.paced_ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* One call after the idle gap: its latency, and the agent's context switches over it. */
static double paced_call(enum rpc rpc, int i, double *cs)
{
	struct cost a, b;
	double ms;

	idle_gap();
	cost_sample(&a);
	ms = one_call(rpc, i);
	cost_sample(&b);
	*cs += (double)(b.agent_cs - a.agent_cs);
	return ms;
}

static const char *context_value(const char *key)
{
	for (size_t i = 0; i < opt.n_ctx; i++)
		if (!strcmp(opt.ctx[i].key, key))
			return opt.ctx[i].value;
	return NULL;
}

/* This thread's context switches so far: what the kernel makes a thread doing the floor's
 * system calls sleep for (umount(2) waits for an RCU grace period), which the agent's thread
 * doing the same pays too. */
static double own_switches(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru) < 0)
		die("getrusage: %s", strerror(errno));
	return (double)(ru.ru_nvcsw + ru.ru_nivcsw);
}

static double since_ms(uint64_t t0)
{
	return (double)(bench_now_ns() - t0) / 1e6;
}

static int bench_paced(void)
{
	int n = opt.count;
	double *noop = calloc((size_t)n, sizeof(double)), *pub = calloc((size_t)n, sizeof(double));
	double *unpub = calloc((size_t)n, sizeof(double)),
	       *fpub = calloc((size_t)n, sizeof(double));
	double *funpub = calloc((size_t)n, sizeof(double));
	double cs_noop = 0, cs_pub = 0, cs_unpub = 0, cs_fpub = 0, cs_funpub = 0, cs0;
	const char *src = context_value("path");
	char t[PATH_MAX];

	if (!noop || !pub || !unpub || !fpub || !funpub)
		die("out of memory");
	if (!src)
		die("--paced needs --volume-context path=DIR (the floor binds it)");
	opt.concurrency = 1;
	if (opt.staging_path) {
		make_parent(opt.staging_path, 0);
		one_call(RPC_STAGE, 0);
	}
	for (int i = 1; i <= n; i++) {
		make_parent(opt.targets_root, i); /* kubelet makes the target's parent */
		noop[i - 1] = paced_call(RPC_NOOP, 0, &cs_noop);
		pub[i - 1] = paced_call(RPC_PUBLISH, i, &cs_pub);
		target_for(i, t, sizeof(t));
		if (!bench_is_mount_root(t))
			die("%s is not a mount point after its publish", t);
	}
	for (int i = 1; i <= n; i++) {
		unpub[i - 1] = paced_call(RPC_UNPUBLISH, i, &cs_unpub);
		target_for(i, t, sizeof(t));
		if (bench_is_mount_root(t))
			die("%s is still a mount point after its unpublish", t);
		remove_parent(i);
	}
	if (opt.staging_path)
		one_call(RPC_UNSTAGE, 0);
	/* The kernel's floor: the same layout, the client's own mkdir + bind, umount + rmdir. */
	for (int i = n + 1; i <= 2 * n; i++) {
		uint64_t t0;

		make_parent(opt.targets_root, i);
		target_for(i, t, sizeof(t));
		idle_gap();
		cs0 = own_switches();
		t0 = bench_now_ns();
		if (mkdir(t, 0750) < 0 || mount(src, t, NULL, MS_BIND, NULL) < 0)
			die("floor: mkdir + bind at %s: %s", t, strerror(errno));
		fpub[i - n - 1] = since_ms(t0);
		cs_fpub += own_switches() - cs0;
	}
	for (int i = n + 1; i <= 2 * n; i++) {
		uint64_t t0;

		target_for(i, t, sizeof(t));
		idle_gap();
		cs0 = own_switches();
		t0 = bench_now_ns();
		if (umount2(t, UMOUNT_NOFOLLOW) < 0 || rmdir(t) < 0)
			die("floor: umount + rmdir at %s: %s", t, strerror(errno));
		funpub[i - n - 1] = since_ms(t0);
		cs_funpub += own_switches() - cs0;
		remove_parent(i);
	}
	report("noop", noop, n, 0);
	report("publish", pub, n, 0);
	report("unpublish", unpub, n, 0);
	report("floor_publish", fpub, n, 0);
	report("floor_unpublish", funpub, n, 0);
	if (opt.agent_pid) {
		printf("figure %s.noop.agent_cs %.2f per call\n", opt.label, cs_noop / n);
		printf("figure %s.publish.agent_cs %.2f per call\n", opt.label, cs_pub / n);
		printf("figure %s.unpublish.agent_cs %.2f per call\n", opt.label, cs_unpub / n);
	}
	printf("figure %s.floor_publish.cs %.2f per call\n", opt.label, cs_fpub / n);
	printf("figure %s.floor_unpublish.cs %.2f per call\n", opt.label, cs_funpub / n);
	free(noop);
	free(pub);
	free(unpub);
	free(fpub);
	free(funpub);
	return 0;
}

/* Polls Probe until it answers ready=true. */
static int wait_ready(int timeout_ms)
{
	uint64_t t0 = bench_now_ns();

	for (;;) {
		struct slot s = { 0 };
		char msg[512];
		grpc_event ev;
		grpc_status_code st;
		bool ready = false;
		int left = timeout_ms - (int)((bench_now_ns() - t0) / 1000000);

		if (left <= 0)
			return 1;
		/* Until the socket exists the channel fails at once; wait_for_ready is off. */
		slot_start(&s, RPC_PROBE, 0, left < 1000 ? left : 1000);
		ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
		if (ev.type != GRPC_OP_COMPLETE)
			die("completion queue: event type %d", (int)ev.type);
		if (s.response) {
			grpc_byte_buffer_reader reader;
			if (grpc_byte_buffer_reader_init(&reader, s.response)) {
				grpc_slice all = grpc_byte_buffer_reader_readall(&reader);
				Csi__V1__ProbeResponse *r =
					csi__v1__probe_response__unpack(NULL,
									GRPC_SLICE_LENGTH(all),
									GRPC_SLICE_START_PTR(all));
				/* ready unset means ready, as the CSI spec says. */
				ready = r && (!r->ready || r->ready->value);
				if (r)
					csi__v1__probe_response__free_unpacked(r, NULL);
				grpc_slice_unref(all);
				grpc_byte_buffer_reader_destroy(&reader);
			}
			grpc_byte_buffer_destroy(s.response);
		}
		st = slot_finish(&s, msg, sizeof(msg));
		if (st == GRPC_STATUS_OK && ready) {
			/* CLOCK_MONOTONIC is system-wide: the caller compares it with its own start. */
			printf("ready_at_ns %llu\n", (unsigned long long)bench_now_ns());
			fflush(stdout);
			return 0;
		}
		if (st == GRPC_STATUS_UNAVAILABLE) {
			/* Not listening yet: start afresh rather than wait out a reconnect backoff. */
			grpc_channel_destroy(channel);
			registered_on = NULL; /* its handles went with it */
			channel = channel_new();
		}
		usleep(2000);
	}
}

/* --- the self-test backend: bind-mounts volume_context.path -------------------------------- */

static int st_publish(void *userdata, const struct csi_publish_request *req,
		      struct csi_reply *reply)
{
	const char *src = csi_map_get(&req->volume_context, "path");

	if (!src)
		return -EINVAL;
	if (mkdir(req->target_path, 0750) < 0 && errno != EEXIST)
		return -errno;
	if (bench_is_mount_root(req->target_path))
		return 0;
	if (mount(src, req->target_path, NULL, MS_BIND, NULL) < 0)
		return -errno;
	return 0;
}

static int st_unpublish(void *userdata, const struct csi_unpublish_request *req,
			struct csi_reply *reply)
{
	if (umount2(req->target_path, UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT)
		return -errno;
	if (rmdir(req->target_path) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

static const struct csi_node_ops self_test_ops = {
	.publish = st_publish,
	.unpublish = st_unpublish,
};

static struct csi_server *self_test_start(char **ret_endpoint)
{
	static char sock[PATH_MAX], ep[PATH_MAX + 8], kubelet[PATH_MAX];
	struct error_info err = { 0 };
	struct csi_server *s;
	char *slash;

	/* The CSI server takes targets under <kubelet root>/pods only: a targets root named
	 * pods is that dir of its parent. */
	snprintf(kubelet, sizeof(kubelet), "%s", opt.targets_root);
	slash = strrchr(kubelet, '/');
	if (slash && slash != kubelet && !strcmp(slash, "/pods"))
		*slash = '\0';

	snprintf(sock, sizeof(sock), "%s/self-test.sock", opt.targets_root);
	snprintf(ep, sizeof(ep), "unix://%s", sock);
	s = csi_server_new(
		&(struct csi_server_config){
			.endpoint = ep,
			.driver_name = "self-test.csi-bench",
			.node_id = "bench",
			.kubelet_root = kubelet,
			.workers = 16,
			.grace_ms = 1000,
		},
		&self_test_ops, NULL, &err);
	if (!s || csi_server_start(s, &err) < 0)
		die("self-test server: %s", err_msg(&err));
	csi_server_set_ready(s, true);
	*ret_endpoint = ep;
	return s;
}

/* --- main ------------------------------------------------------------------------------ */

static void usage(void)
{
	fprintf(stderr,
		"usage: csi-bench --endpoint unix:///path --targets-root DIR [--count M]\n"
		"                 [--concurrency C] [--volume-context k=v]... [--staging-path DIR]\n"
		"                 [--volume-id-prefix S] [--fs-type T] [--label NAME]\n"
		"                 [--deadline-ms MS] [--keep] [--agent-pid PID]\n"
		"                 [--shared K1,K2,... [--reps M] | --paced IDLE_MS]\n"
		"       csi-bench --endpoint unix:///path --wait-ready MS\n"
		"       csi-bench --self-test --targets-root DIR/pods --volume-context path=/dir ...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct csi_server *server = NULL;
	int wait_ms = -1, rc;
	bool self_test = false;
	char *ep;

	bench_init("csi-bench", NULL);
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(o, "--self-test")) {
			self_test = true;
			continue;
		}
		if (!strcmp(o, "--keep")) {
			opt.keep = true;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (!strcmp(o, "--endpoint"))
			opt.endpoint = v;
		else if (!strcmp(o, "--targets-root"))
			opt.targets_root = v;
		else if (!strcmp(o, "--staging-path"))
			opt.staging_path = v;
		else if (!strcmp(o, "--volume-id-prefix"))
			opt.prefix = v;
		else if (!strcmp(o, "--fs-type"))
			opt.fs_type = v;
		else if (!strcmp(o, "--label"))
			opt.label = v;
		else if (!strcmp(o, "--count"))
			opt.count = atoi(v);
		else if (!strcmp(o, "--concurrency"))
			opt.concurrency = atoi(v);
		else if (!strcmp(o, "--agent-pid"))
			opt.agent_pid = atoi(v);
		else if (!strcmp(o, "--shared"))
			opt.shared = v;
		else if (!strcmp(o, "--reps"))
			opt.reps = atoi(v);
		else if (!strcmp(o, "--paced"))
			opt.paced_ms = atoi(v);
		else if (!strcmp(o, "--deadline-ms"))
			opt.deadline_ms = atoi(v);
		else if (!strcmp(o, "--wait-ready"))
			wait_ms = atoi(v);
		else if (!strcmp(o, "--volume-context")) {
			Csi__V1__NodePublishVolumeRequest__VolumeContextEntry init =
				CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__VOLUME_CONTEXT_ENTRY__INIT;
			char *kv = strdup(v), *eq = strchr(kv, '=');
			if (!eq || eq == kv || opt.n_ctx == MAX_CONTEXT)
				usage();
			*eq = '\0';
			opt.ctx[opt.n_ctx] = init;
			opt.ctx[opt.n_ctx].key = kv;
			opt.ctx[opt.n_ctx].value = eq + 1;
			opt.ctx_ptr[opt.n_ctx] = &opt.ctx[opt.n_ctx];
			opt.n_ctx++;
		} else
			usage();
	}
	if (opt.count < 1 || opt.concurrency < 1 || opt.concurrency > MAX_CONCURRENCY ||
	    opt.deadline_ms < 1 || opt.reps < 1)
		usage();
	if (wait_ms < 0 && !opt.targets_root)
		usage();
	if (!self_test && !opt.endpoint)
		usage();

	grpc_init();
	if (self_test)
		server = self_test_start(&ep);
	else
		ep = (char *)opt.endpoint;
	/* gRPC's target syntax for a unix socket is unix:/abs or unix:///abs. */
	channel_target = ep;
	channel = channel_new();
	cq = grpc_completion_queue_create_for_next(NULL);

	rc = wait_ms >= 0	? wait_ready(wait_ms)
	     : opt.shared	? bench_shared()
	     : opt.paced_ms > 0 ? bench_paced()
				: bench();

	grpc_channel_destroy(channel);
	grpc_completion_queue_shutdown(cq);
	while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
	csi_server_free(server);
	grpc_shutdown();
	return rc;
}
