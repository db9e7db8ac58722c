/* cmd-rbd-helper.c - `volagent rbd-helper OP`: the one process that talks to the Ceph cluster
 * through librados/librbd (loaded with dlopen, rbd-ceph.h).  The daemon runs it per call with
 * a deadline (rbd-cluster.c) so that it neither maps the Ceph libraries nor shares their
 * fate; people may run it to see what the agent would see.
 *
 * OP is check, watchers or blocklist.  The request is one JSON object on stdin (the key goes
 * there, never on the command line): monitors, user, keyring | keyfile | key, timeout_ms,
 * and per op pool + image (watchers) or addr + expire_s (blocklist).  The answer is one JSON
 * line on stdout: {"ok":true, ...} or {"ok":false,"error":{"errno":N,"code":"EXXX",
 * "message":"..."}}.  Exit 0 ok, 1 the operation failed, 2 bad usage or request, 3 the Ceph
 * libraries cannot be loaded.  docs/rbd.md describes the protocol.
 *
 * The tests' forced failures (a hang or a crash after the request was read) exist only in
 * their build, $(BUILD)/volagent-test (rbd-helper-fault.h). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "commands.h"
#include "macro.h"
#include "rbd-ceph.h"
#include "rbd-helper-fault.h"

#define REQUEST_MAX (64 * 1024)
#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define EXIT_NOLIB 3

static void usage(FILE *f)
{
	fprintf(f, "Usage: volagent rbd-helper check|watchers|blocklist < REQUEST.json\n\n"
		   "Runs one librados/librbd operation for the rbd plugin and answers in JSON on\n"
		   "stdout.  The request (stdin) holds monitors, user, keyring|keyfile|key,\n"
		   "timeout_ms, and pool+image (watchers) or addr+expire_s (blocklist).\n"
		   "Exit 0 ok, 1 failed, 2 bad usage or request, 3 no Ceph libraries.\n");
}

static int answer_error(int code, const char *msg, int exit_code)
{
	const char *name = strerrorname_np(-code);
	json_t *a = json_pack("{s:b, s:{s:i, s:s, s:s}}", "ok", 0, "error", "errno", -code, "code",
			      name ? name : "EIO", "message", msg);
	char *s = a ? json_dumps(a, JSON_COMPACT) : NULL;

	printf("%s\n", s ? s : "{\"ok\":false}");
	free(s);
	json_decref(a);
	return exit_code;
}

static int answer_ok(json_t *a)
{
	char *s;

	if (!a)
		return answer_error(-ENOMEM, "out of memory", EXIT_FAILED);
	json_object_set_new(a, "ok", json_true());
	s = json_dumps(a, JSON_COMPACT);
	printf("%s\n", s ? s : "{\"ok\":true}");
	free(s);
	json_decref(a);
	return 0;
}

/* A string field of the request: NULL when absent; *bad set when present but not a string. */
static const char *req_str(json_t *req, const char *key, const char **bad)
{
	json_t *v = json_object_get(req, key);

	if (v && !json_is_string(v) && !*bad)
		*bad = key;
	return json_string_value(v);
}

int cmd_rbd_helper(int argc, char **argv)
{
	struct error_info err = { 0 };
	_cleanup_free_ char *buf = NULL;
	const char *op, *bad = NULL;
	json_t *req, *answer = NULL;
	json_error_t jerr;
	_cleanup_rbd_ceph_ struct rbd_ceph *c = NULL;
	struct rbd_credentials cred;
	json_int_t timeout_ms;
	size_t len = 0;
	ssize_t n;
	int r;

	/* It holds the Ceph key: no core dump of it, and no ptrace by another user. */
	(void)prctl(PR_SET_DUMPABLE, 0);
	if (argc != 2 || streq(argv[1], "--help") || streq(argv[1], "-h")) {
		usage(argc == 2 ? stdout : stderr);
		return argc == 2 ? 0 : EXIT_USAGE;
	}
	op = argv[1];
	if (!streq(op, "check") && !streq(op, "watchers") && !streq(op, "blocklist"))
		return answer_error(-EINVAL, "unknown operation (check, watchers, blocklist)",
				    EXIT_USAGE);
	buf = malloc(REQUEST_MAX + 1);
	if (!buf)
		return answer_error(-ENOMEM, "out of memory", EXIT_FAILED);
	while (len < REQUEST_MAX && (n = read(STDIN_FILENO, buf + len, REQUEST_MAX - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return answer_error(-errno, "cannot read the request from stdin",
					    EXIT_USAGE);
		len += n;
	}
	req = json_loadb(buf, len, 0, &jerr);
	explicit_bzero(buf, len); /* it holds the key */
	if (!json_is_object(req)) {
		char msg[300];
		snprintf(msg, sizeof(msg), "request: not a JSON object on stdin (%s)",
			 req ? "another JSON type" : jerr.text);
		json_decref(req);
		return answer_error(-EINVAL, msg, EXIT_USAGE);
	}
	cred = (struct rbd_credentials){
		.monitors = req_str(req, "monitors", &bad),
		.user = req_str(req, "user", &bad),
		.keyring = req_str(req, "keyring", &bad),
		.keyfile = req_str(req, "keyfile", &bad),
		.key = req_str(req, "key", &bad),
	};
	timeout_ms = json_integer_value(json_object_get(req, "timeout_ms"));
	{
		const char *pool = req_str(req, "pool", &bad), *image = req_str(req, "image", &bad);
		const char *addr = req_str(req, "addr", &bad);
		json_t *expire = json_object_get(req, "expire_s");
		char msg[200] = "";

		if (bad)
			snprintf(msg, sizeof(msg), "request: %s: must be a string", bad);
		else if (!cred.monitors || !cred.user)
			snprintf(msg, sizeof(msg), "request: %s: required",
				 cred.monitors ? "user" : "monitors");
		else if (timeout_ms <= 0)
			snprintf(msg, sizeof(msg),
				 "request: timeout_ms: required (a positive integer)");
		else if (streq(op, "watchers") && (!pool || !image))
			snprintf(msg, sizeof(msg), "request: %s: required for watchers",
				 pool ? "image" : "pool");
		else if (streq(op, "blocklist") && !addr)
			snprintf(msg, sizeof(msg), "request: addr: required for blocklist");
		else if (streq(op, "blocklist") &&
			 (!json_is_integer(expire) || json_integer_value(expire) <= 0 ||
			  json_integer_value(expire) > UINT32_MAX))
			snprintf(msg, sizeof(msg),
				 "request: expire_s: required (seconds, a positive integer)");
		if (msg[0]) {
			json_decref(req);
			return answer_error(-EINVAL, msg, EXIT_USAGE);
		}
		if (rbd_helper_fault_apply) /* a test build only */
			rbd_helper_fault_apply(op);
		r = rbd_ceph_connect(&cred, (uint64_t)timeout_ms, &c, &err);
		if (r == 0 && streq(op, "check")) {
			answer = json_object();
		} else if (r == 0 && streq(op, "watchers")) {
			_cleanup_free_ struct rbd_watcher *w = NULL;
			size_t nw = 0;

			r = rbd_ceph_watchers(c, pool, image, &w, &nw, &err);
			if (r == 0) {
				json_t *ws = json_array();
				for (size_t i = 0; ws && i < nw; i++)
					json_array_append_new(ws, json_pack("{s:s, s:I}", "addr",
									    w[i].addr, "id",
									    (json_int_t)w[i].id));
				answer = json_pack("{s:o*}", "watchers", ws);
			}
		} else if (r == 0) {
			r = rbd_ceph_blocklist(c, addr, (uint32_t)json_integer_value(expire), &err);
			if (r == 0)
				answer = json_object();
		}
	}
	/* cred points into req, which holds the key: wipe it. */
	if (cred.key)
		explicit_bzero((char *)cred.key, strlen(cred.key));
	json_decref(req);
	if (r < 0)
		return answer_error(r, err_msg(&err), r == -EOPNOTSUPP ? EXIT_NOLIB : EXIT_FAILED);
	return answer_ok(answer);
}
