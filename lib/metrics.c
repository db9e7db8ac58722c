/* metrics.c - see metrics.h.  A few label combinations at most (plugins x operations, CSI
 * methods x codes), so series live in small arrays searched linearly under one lock. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "metrics.h"
#include "server-health.h"

static const double buckets[] = { 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 120 };
#define N_BUCKETS ARRAY_SIZE(buckets)

struct histogram {
	unsigned long long counts[N_BUCKETS]; /* per bucket, not cumulative */
	unsigned long long count;
	double sum;
};

struct op_series {
	char plugin[16];
	char operation[24];
	unsigned long long started, succeeded, failed;
	struct histogram duration;
};

struct csi_series {
	char method[40];
	char code[24];
	unsigned long long calls;
};

#define MAX_OP_SERIES 64
#define MAX_CSI_SERIES 128

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct op_series ops[MAX_OP_SERIES];
static size_t n_ops;
static struct csi_series csi[MAX_CSI_SERIES];
static size_t n_csi;
static unsigned long long inventory_changes, renames, passes, journal_failures;
static size_t g_journal_writable = 1; /* until a save fails */
static struct histogram pass_duration;
static size_t g_desired, g_mounted, g_devices, g_on_node, g_stale;
static unsigned g_backoff;
static double g_oldest;

static void observe(struct histogram *h, double v)
{
	for (size_t i = 0; i < N_BUCKETS; i++)
		if (v <= buckets[i]) {
			h->counts[i]++;
			break;
		}
	h->count++;
	h->sum += v;
}

static struct op_series *op_series(const char *plugin, const char *operation)
{
	for (size_t i = 0; i < n_ops; i++)
		if (streq(ops[i].plugin, plugin) && streq(ops[i].operation, operation))
			return &ops[i];
	if (n_ops == MAX_OP_SERIES)
		return NULL;
	snprintf(ops[n_ops].plugin, sizeof(ops[n_ops].plugin), "%s", plugin);
	snprintf(ops[n_ops].operation, sizeof(ops[n_ops].operation), "%s", operation);
	return &ops[n_ops++];
}

void metrics_op_started(const char *plugin, const char *operation)
{
	struct op_series *s;

	pthread_mutex_lock(&lock);
	s = op_series(plugin ? plugin : "unknown", operation);
	if (s)
		s->started++;
	pthread_mutex_unlock(&lock);
}

void metrics_op_finished(const char *plugin, const char *operation, bool ok, double seconds)
{
	struct op_series *s;

	pthread_mutex_lock(&lock);
	s = op_series(plugin ? plugin : "unknown", operation);
	if (s) {
		if (ok)
			s->succeeded++;
		else
			s->failed++;
		observe(&s->duration, seconds);
	}
	pthread_mutex_unlock(&lock);
}

void metrics_csi_call(const char *method, const char *code)
{
	size_t i;

	pthread_mutex_lock(&lock);
	for (i = 0; i < n_csi; i++)
		if (streq(csi[i].method, method) && streq(csi[i].code, code))
			break;
	if (i == n_csi && n_csi < MAX_CSI_SERIES) {
		snprintf(csi[i].method, sizeof(csi[i].method), "%s", method);
		snprintf(csi[i].code, sizeof(csi[i].code), "%s", code);
		n_csi++;
	}
	if (i < n_csi)
		csi[i].calls++;
	pthread_mutex_unlock(&lock);
}

void metrics_device_inventory_changed(void)
{
	pthread_mutex_lock(&lock);
	inventory_changes++;
	pthread_mutex_unlock(&lock);
}

void metrics_device_renamed(void)
{
	pthread_mutex_lock(&lock);
	renames++;
	pthread_mutex_unlock(&lock);
}

void metrics_reconcile_pass(double seconds)
{
	pthread_mutex_lock(&lock);
	passes++;
	observe(&pass_duration, seconds);
	pthread_mutex_unlock(&lock);
}

void metrics_journal_save(bool ok)
{
	pthread_mutex_lock(&lock);
	g_journal_writable = ok;
	if (!ok)
		journal_failures++;
	pthread_mutex_unlock(&lock);
}

void metrics_set_volume_gauges(size_t desired, size_t mounted, unsigned in_backoff, size_t devices,
			       double oldest_pending_age_seconds)
{
	pthread_mutex_lock(&lock);
	g_desired = desired;
	g_mounted = mounted;
	g_backoff = in_backoff;
	g_devices = devices;
	g_oldest = oldest_pending_age_seconds;
	pthread_mutex_unlock(&lock);
}

void metrics_set_node_gauges(size_t on_node, size_t stale_stages)
{
	pthread_mutex_lock(&lock);
	g_on_node = on_node;
	g_stale = stale_stages;
	pthread_mutex_unlock(&lock);
}

static void render_histogram(FILE *f, const char *name, const char *labels,
			     const struct histogram *h)
{
	unsigned long long cum = 0;

	for (size_t i = 0; i < N_BUCKETS; i++) {
		cum += h->counts[i];
		fprintf(f, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, labels[0] ? "," : "",
			buckets[i], cum);
	}
	fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, labels[0] ? "," : "",
		h->count);
	fprintf(f, "%s_sum%s%s%s %.6f\n", name, labels[0] ? "{" : "", labels, labels[0] ? "}" : "",
		h->sum);
	fprintf(f, "%s_count%s%s%s %llu\n", name, labels[0] ? "{" : "", labels,
		labels[0] ? "}" : "", h->count);
}

static void header(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A metric of one unlabelled integer sample, with its header. */
static void sample(FILE *f, const char *name, const char *type, const char *help,
		   unsigned long long value)
{
	header(f, name, type, help);
	fprintf(f, "%s %llu\n", name, value);
}

/* A counter of every plugin operation: the field at offset of each struct op_series.  Under
 * lock. */
static void op_counter(FILE *f, const char *name, const char *help, size_t offset)
{
	header(f, name, "counter", help);
	for (size_t i = 0; i < n_ops; i++)
		fprintf(f, "%s{plugin=\"%s\",operation=\"%s\"} %llu\n", name, ops[i].plugin,
			ops[i].operation,
			*(const unsigned long long *)((const char *)&ops[i] + offset));
}

/* A Prometheus label value: backslash, quote and newline escaped. */
static void label_value(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fputc('\\', f);
		if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

/* Each storage server's state (server-health.h); its key is escaped as a label value. */
static void render_servers(FILE *f)
{
	static struct server_health_info info[SERVER_HEALTH_MAX];
	size_t n = server_health_list(info, SERVER_HEALTH_MAX);

	header(f, "volagent_storage_server_down", "gauge",
	       "1 while the storage server does not answer (new mounts to it fail at once).");
	for (size_t i = 0; i < n; i++) {
		fputs("volagent_storage_server_down{server=\"", f);
		label_value(f, info[i].key);
		fprintf(f, "\"} %d\n", info[i].down ? 1 : 0);
	}
	header(f, "volagent_storage_server_refused_total", "counter",
	       "Operations refused at once because their storage server was down.");
	for (size_t i = 0; i < n; i++) {
		fputs("volagent_storage_server_refused_total{server=\"", f);
		label_value(f, info[i].key);
		fprintf(f, "\"} %lu\n", info[i].refused);
	}
}

char *metrics_render(void)
{
	char *buf = NULL, labels[96];
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	pthread_mutex_lock(&lock);
	op_counter(f, "volagent_operations_started_total",
		   "Plugin operations started, by plugin and operation.",
		   offsetof(struct op_series, started));
	op_counter(f, "volagent_operations_succeeded_total", "Plugin operations that succeeded.",
		   offsetof(struct op_series, succeeded));
	op_counter(f, "volagent_operations_failed_total", "Plugin operations that failed.",
		   offsetof(struct op_series, failed));
	header(f, "volagent_operation_duration_seconds", "histogram",
	       "How long plugin operations took.");
	for (size_t i = 0; i < n_ops; i++) {
		if (snprintf(labels, sizeof(labels), "plugin=\"%s\",operation=\"%s\"",
			     ops[i].plugin, ops[i].operation) >= (int)sizeof(labels))
			continue; /* cannot happen: both fields are short */
		render_histogram(f, "volagent_operation_duration_seconds", labels,
				 &ops[i].duration);
	}
	header(f, "volagent_csi_calls_total", "counter", "CSI calls answered, by method and code.");
	for (size_t i = 0; i < n_csi; i++)
		fprintf(f, "volagent_csi_calls_total{method=\"%s\",code=\"%s\"} %llu\n",
			csi[i].method, csi[i].code, csi[i].calls);
	sample(f, "volagent_device_inventory_changes_total", "counter",
	       "Rescans of the block device inventory after udev events.", inventory_changes);
	sample(f, "volagent_device_renames_total", "counter",
	       "Devices whose stable id reappeared under another kernel name.", renames);
	sample(f, "volagent_reconcile_passes_total", "counter", "Reconcile passes run.", passes);
	sample(f, "volagent_journal_save_failures_total", "counter",
	       "Journal saves that failed (each retried with backoff).", journal_failures);
	sample(f, "volagent_journal_writable", "gauge",
	       "1 when the last journal save worked, 0 while saves fail.", g_journal_writable);
	header(f, "volagent_reconcile_pass_duration_seconds", "histogram",
	       "How long a reconcile pass took (deciding, not the operations).");
	render_histogram(f, "volagent_reconcile_pass_duration_seconds", "", &pass_duration);
	sample(f, "volagent_volumes_desired", "gauge", "Pod volumes the desired state holds.",
	       g_desired);
	sample(f, "volagent_volumes_mounted", "gauge", "Desired pod volumes mounted as desired.",
	       g_mounted);
	sample(f, "volagent_volumes_in_backoff", "gauge",
	       "Operations waiting to be retried after failing.", g_backoff);
	sample(f, "volagent_devices_attached", "gauge", "Devices staged on this node.", g_devices);
	sample(f, "volagent_volumes_on_node", "gauge",
	       "Volumes still published, staged or attached on this node (0: it may be drained).",
	       g_on_node);
	sample(f, "volagent_stale_stages", "gauge",
	       "Volumes staged or attached with no pod publishing them for longer than "
	       "--stale-stage-after.",
	       g_stale);
	render_servers(f);
	header(f, "volagent_oldest_pending_operation_age_seconds", "gauge",
	       "Age of the oldest operation in flight (0 when none).");
	fprintf(f, "volagent_oldest_pending_operation_age_seconds %.3f\n", g_oldest);
	pthread_mutex_unlock(&lock);
	fclose(f);
	return buf;
}

void metrics_reset(void)
{
	pthread_mutex_lock(&lock);
	n_ops = n_csi = 0;
	memset(ops, 0, sizeof(ops));
	memset(csi, 0, sizeof(csi));
	inventory_changes = renames = passes = journal_failures = 0;
	g_journal_writable = 1;
	memset(&pass_duration, 0, sizeof(pass_duration));
	g_desired = g_mounted = g_devices = g_on_node = g_stale = 0;
	g_backoff = 0;
	g_oldest = 0;
	pthread_mutex_unlock(&lock);
}
