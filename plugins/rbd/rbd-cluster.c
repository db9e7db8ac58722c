/* rbd-cluster.c - see rbd-cluster.h: the daemon's side of `volagent rbd-helper`.  Builds the
 * request, runs the helper with a deadline through lib/process.c, and turns its answer (or
 * its timeout, crash or silence) into -errno and a message. */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "process.h"
#include "rbd-cluster.h"
#include "rbd-health.h"
#include "rbd-helper-fault.h"

#define HELPER_OUTPUT_MAX (256 * 1024)

struct rbd_cluster {
	char *monitors, *user, *keyring, *keyfile, *key;
	uint64_t timeout_ms;
	bool track_health; /* each helper run through the cluster's gate (rbd-health.h) */
};

static const char *helper_path = "/proc/self/exe";

void rbd_cluster_set_helper(const char *path)
{
	helper_path = path ? path : "/proc/self/exe";
}

static void free_secret(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

struct rbd_cluster *rbd_cluster_free(struct rbd_cluster *c)
{
	if (!c)
		return NULL;
	free(c->monitors);
	free(c->user);
	free(c->keyring);
	free(c->keyfile);
	free_secret(c->key);
	free(c);
	return NULL;
}

static int dup_opt(const char *s, char **ret)
{
	*ret = NULL;
	if (s && !(*ret = strdup(s)))
		return -ENOMEM;
	return 0;
}

int rbd_cluster_connect(const struct rbd_credentials *cred, uint64_t timeout_ms,
			struct rbd_cluster **ret, struct error_info *err)
{
	struct rbd_cluster *c = calloc(1, sizeof(*c));

	if (!c || dup_opt(cred->monitors, &c->monitors) < 0 || dup_opt(cred->user, &c->user) < 0 ||
	    dup_opt(cred->keyring, &c->keyring) < 0 || dup_opt(cred->keyfile, &c->keyfile) < 0 ||
	    dup_opt(cred->key, &c->key) < 0) {
		rbd_cluster_free(c);
		return -ENOMEM;
	}
	c->timeout_ms = timeout_ms;
	*ret = c;
	return 0;
}

static int set_str(json_t *o, const char *key, const char *value)
{
	return value ? json_object_set_new(o, key, json_string(value)) : 0;
}

/* The answer is the last line of the output that starts with '{' (a library may have
 * printed something before it). */
static json_t *parse_answer(char *out)
{
	char *line = NULL;

	for (char *s = out; s && *s; s = strchr(s, '\n') ? strchr(s, '\n') + 1 : NULL)
		if (*s == '{')
			line = s;
	return line ? json_loadb(line, strcspn(line, "\n"), 0, NULL) : NULL;
}

/* Runs the helper's op with the connection's request plus extra's fields.  On success
 * *ret is its answer object (caller decrefs).  Returns 0 or -errno with err filled. */
static int helper_run(struct rbd_cluster *c, const char *op, json_t *extra, json_t **ret,
		      struct error_info *err)
{
	const char *argv[] = { helper_path, "rbd-helper", op, NULL };
	json_t *req = extra ? extra : json_object(), *answer = NULL, *e;
	_cleanup_free_ char *out = malloc(HELPER_OUTPUT_MAX);
	char *body = NULL;
	uint64_t deadline = c->timeout_ms + RBD_HELPER_SLACK_MS;
	/* The helpers' environment, plus the tests' forced-failure switch in a test build only
	 * (rbd-helper-fault.h: a hang or crash of librados cannot be made on demand). */
	_cleanup_free_ char *fault_var = rbd_helper_fault_env ? rbd_helper_fault_env() : NULL;
	char *envp[8];
	struct process_options opts = { .timeout_ms = deadline,
					.output_max = HELPER_OUTPUT_MAX - 1,
					.envp = envp };
	size_t n = 0;
	int r = -ENOMEM;

	for (size_t i = 0; process_helper_env[i] && n < ARRAY_SIZE(envp) - 2; i++)
		envp[n++] = process_helper_env[i];
	if (fault_var)
		envp[n++] = fault_var;
	envp[n] = NULL;

	if (!req || !out)
		goto out;
	if (set_str(req, "monitors", c->monitors) < 0 || set_str(req, "user", c->user) < 0 ||
	    set_str(req, "keyring", c->keyring) < 0 || set_str(req, "keyfile", c->keyfile) < 0 ||
	    set_str(req, "key", c->key) < 0 ||
	    json_object_set_new(req, "timeout_ms", json_integer((json_int_t)c->timeout_ms)) < 0)
		goto out;
	body = json_dumps(req, JSON_COMPACT);
	if (!body)
		goto out;
	opts.stdin_data = body;
	opts.stdin_len = strlen(body);
	r = process_run(argv, &opts, out, HELPER_OUTPUT_MAX);
	if (r == -ETIMEDOUT) {
		r = err_set(err, -ETIMEDOUT,
			    "rbd-helper %s ran past its deadline of %.1fs (the Ceph cluster or "
			    "library hung) and was killed",
			    op, (double)deadline / 1000.0);
		goto out;
	}
	if (r < 0) {
		r = err_set(err, r, "cannot run the rbd helper %s: %s", helper_path, strerror(-r));
		goto out;
	}
	if (r > 128) {
		r = err_set(err, -EIO, "rbd-helper %s crashed (signal %d, %s)", op, r - 128,
			    strsignal(r - 128));
		goto out;
	}
	answer = parse_answer(out);
	if (!answer || !json_is_object(answer)) {
		out[strcspn(out, "\n")] = '\0';
		r = err_set(err, -EIO, "rbd-helper %s exited with %d without an answer%s%s", op, r,
			    out[0] ? ": " : "", out);
		goto out;
	}
	e = json_object_get(answer, "error");
	if (r == 0 && json_is_true(json_object_get(answer, "ok"))) {
		*ret = TAKE_PTR(answer);
		goto out;
	}
	{
		json_int_t code = json_integer_value(json_object_get(e, "errno"));
		const char *msg = json_string_value(json_object_get(e, "message"));

		r = err_set(err, code > 0 && code < 4096 ? -(int)code : -EIO, "%s",
			    msg ? msg : "rbd-helper failed without a message");
	}
out:
	if (body) {
		explicit_bzero(body, strlen(body));
		free(body);
	}
	json_decref(answer);
	json_decref(req);
	return r;
}

void rbd_cluster_track_health(struct rbd_cluster *c)
{
	c->track_health = true;
}

/* helper_run through the cluster's gate when its health is tracked: refused at once while
 * the cluster is down, and a run that times out makes it down. */
static int helper_call(struct rbd_cluster *c, const char *op, json_t *extra, json_t **ret,
		       struct error_info *err)
{
	struct server_health_op gate = { 0 };
	struct error_info own = { 0 }, *e = err ? err : &own;
	int r;

	if (c->track_health && c->monitors) {
		r = rbd_health_begin(c->monitors, &gate, e);
		if (r < 0) {
			json_decref(extra);
			return r;
		}
	}
	r = helper_run(c, op, extra, ret, e);
	rbd_health_end(&gate, r, e);
	return r;
}

int rbd_cluster_check(struct rbd_cluster *c, struct error_info *err)
{
	json_t *answer = NULL;
	int r = helper_call(c, "check", NULL, &answer, err);

	json_decref(answer);
	return r;
}

int rbd_cluster_watchers(struct rbd_cluster *c, const char *pool, const char *image,
			 struct rbd_watcher **ret, size_t *ret_n, struct error_info *err)
{
	json_t *req = json_pack("{s:s, s:s}", "pool", pool, "image", image), *answer = NULL, *ws,
	       *w;
	struct rbd_watcher *out;
	size_t i;
	int r;

	if (!req)
		return -ENOMEM;
	r = helper_call(c, "watchers", req, &answer, err);
	if (r < 0)
		return r;
	ws = json_object_get(answer, "watchers");
	if (!json_is_array(ws)) {
		json_decref(answer);
		return err_set(err, -EIO, "rbd-helper watchers: the answer has no watcher list");
	}
	out = calloc(json_array_size(ws) ? json_array_size(ws) : 1, sizeof(*out));
	if (!out) {
		json_decref(answer);
		return -ENOMEM;
	}
	json_array_foreach(ws, i, w)
	{
		const char *addr = json_string_value(json_object_get(w, "addr"));

		snprintf(out[i].addr, sizeof(out[i].addr), "%s", addr ? addr : "");
		out[i].id = json_integer_value(json_object_get(w, "id"));
	}
	*ret = out;
	*ret_n = json_array_size(ws);
	json_decref(answer);
	return 0;
}

int rbd_cluster_blocklist(struct rbd_cluster *c, const char *addr, uint32_t expire_s)
{
	json_t *req = json_pack("{s:s, s:I}", "addr", addr, "expire_s", (json_int_t)expire_s),
	       *answer = NULL;
	int r;

	if (!req)
		return -ENOMEM;
	r = helper_call(c, "blocklist", req, &answer, NULL);
	json_decref(answer);
	return r;
}
