/* cmd-status.c - `volagent status [--json] [--socket PATH | --state-dir DIR] [--config FILE]`:
 * asks the running agent over its admin socket for a snapshot and prints it, as a summary for
 * people or as JSON.  The socket is found as `volagent run` places it, from the same config
 * file and flag names: --socket, else admin-socket, else <state-dir>/admin.sock.  Exit 0, 1
 * when no agent answers (or the socket refuses this user), 2 on bad usage. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "commands.h"
#include "config.h"
#include "macro.h"

#define DEFAULT_SOCKET "/var/lib/volagent/state/admin.sock"

/* The admin socket `volagent run` with this config file and state dir (each NULL: the
 * default) serves.  Returns 0 and the path (caller frees), or -EINVAL with err set. */
static int admin_socket_path(const char *config, const char *state_dir, char **ret,
			     struct error_info *err)
{
	const char *argv[6] = { "status" };
	struct agent_config cfg;
	int argc = 1, r;

	if (config) {
		argv[argc++] = "--config";
		argv[argc++] = config;
	}
	if (state_dir) {
		argv[argc++] = "--state-dir";
		argv[argc++] = state_dir;
	}
	r = config_parse(argc, (char **)argv, &cfg, err);
	if (r == 0 && streq(cfg.admin_socket, "off"))
		r = err_set(err, -EINVAL,
			    "the agent serves no admin socket (admin-socket is "
			    "\"off\" in %s)",
			    cfg.config_path);
	if (r == 0) {
		*ret = cfg.admin_socket[0] ? strdup(cfg.admin_socket)
					   : strdup_printf("%s/admin.sock", cfg.state_dir);
		if (!*ret)
			r = -ENOMEM;
	}
	config_done(&cfg);
	return r;
}

static char *fetch(const char *path, int *ret_errno)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char *buf = NULL;
	size_t len = 0, cap = 0;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		*ret_errno = errno;
		return NULL;
	}
	for (;;) {
		ssize_t n;
		if (len + 4096 > cap) {
			char *nb = realloc(buf, cap = cap ? cap * 2 : 65536);
			if (!nb) {
				free(buf);
				*ret_errno = ENOMEM;
				return NULL;
			}
			buf = nb;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	if (buf)
		buf[len] = '\0';
	return buf;
}

bool status_args_take(struct status_args *a, int c, const char *arg)
{
	switch (c) {
	case 'j':
		a->as_json = true;
		return true;
	case 's':
		a->socket = arg;
		return true;
	case 'd':
		a->state_dir = arg;
		return true;
	case 'c':
		a->config = arg;
		return true;
	default:
		return false;
	}
}

json_t *status_fetch(const char *cmd, const struct status_args *a, char **ret_text, int *ret_code)
{
	_cleanup_free_ char *text = NULL, *found = NULL;
	struct error_info err = { 0 };
	const char *path = a->socket;
	json_error_t jerr;
	json_t *root;
	int e = 0;

	*ret_code = 2;
	if (a->socket && a->state_dir) {
		fprintf(stderr, "volagent %s: --socket and --state-dir: give one of them\n", cmd);
		return NULL;
	}
	if (!path) {
		if (admin_socket_path(a->config, a->state_dir, &found, &err) < 0) {
			fprintf(stderr, "volagent %s: %s\n", cmd, err_msg(&err));
			return NULL;
		}
		path = found;
	}
	*ret_code = 1;
	text = fetch(path, &e);
	if (!text) {
		if (e == EACCES || e == EPERM)
			fprintf(stderr,
				"volagent %s: %s: permission denied (root, or a member of "
				"the agent's --admin-socket-group)\n",
				cmd, path);
		else if (e == ENOENT || e == ECONNREFUSED)
			fprintf(stderr, "volagent %s: no agent answers on %s\n", cmd, path);
		else
			fprintf(stderr, "volagent %s: %s: %s\n", cmd, path, strerror(e));
		return NULL;
	}
	root = json_loads(text, 0, &jerr);
	if (!root || json_object_get(root, "error")) {
		fprintf(stderr, "volagent %s: %s\n", cmd,
			root ? json_string_value(json_object_get(root, "error")) : jerr.text);
		json_decref(root);
		return NULL;
	}
	*ret_code = 0;
	if (ret_text)
		*ret_text = TAKE_PTR(text);
	return root;
}

static const char *str(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : "-";
}

static void print_human(json_t *root)
{
	json_t *counts = json_object_get(root, "counts"),
	       *journal = json_object_get(root, "journal");
	json_t *vol, *pod, *dev, *specs;
	size_t i, k;

	printf("volagent %s, pid %lld, up %llds, %s\n", str(root, "version"),
	       (long long)json_integer_value(json_object_get(root, "pid")),
	       (long long)json_integer_value(json_object_get(root, "uptime_seconds")),
	       json_is_true(json_object_get(root, "ready")) ? "ready" : "reconstructing");
	printf("pod volumes: %lld desired, %lld mounted, %lld failing; %lld devices; %lld "
	       "operations in flight\n",
	       (long long)json_integer_value(json_object_get(counts, "desired_pod_volumes")),
	       (long long)json_integer_value(json_object_get(counts, "mounted")),
	       (long long)json_integer_value(json_object_get(counts, "failing")),
	       (long long)json_integer_value(json_object_get(counts, "devices")),
	       (long long)json_integer_value(json_object_get(counts, "in_flight")));
	printf("journal: %s, %s%s%s\n", str(journal, "path"),
	       json_is_true(json_object_get(journal, "healthy")) ? "healthy" : "NOT healthy",
	       json_is_string(json_object_get(journal, "error")) ? ": " : "",
	       json_is_string(json_object_get(journal, "error")) ? str(journal, "error") : "");
	if (json_integer_value(json_object_get(journal, "failed_saves")) > 0)
		printf("journal: %lld saves failed in a row, next try in %lld ms\n",
		       (long long)json_integer_value(json_object_get(journal, "failed_saves")),
		       (long long)json_integer_value(json_object_get(journal, "retry_in_ms")));
	if (json_is_string(json_object_get(journal, "startup")))
		printf("journal at startup: %s\n", str(journal, "startup"));
	printf("\n%-32s %-6s %-24s %-28s %s\n", "VOLUME", "PLUGIN", "POD", "STATE", "TARGET");
	json_array_foreach(json_object_get(root, "volumes"), i, vol)
	{
		if (!json_array_size(json_object_get(vol, "pods")))
			printf("%-32s %-6s %-24s %-28s %s\n", str(vol, "name"), str(vol, "plugin"),
			       "-",
			       json_is_true(json_object_get(vol, "staged")) ? "staged" : "no pods",
			       "-");
		json_array_foreach(json_object_get(vol, "pods"), k, pod)
		{
			json_t *bo = json_object_get(pod, "backoff");
			json_t *fl = json_object_get(pod, "in_flight");
			json_t *who = json_object_get(pod, "pod");
			printf("%-32s %-6s %-24s %-28s %s\n", str(vol, "name"), str(vol, "plugin"),
			       str(pod, "pod_uid"), str(pod, "state"), str(pod, "target"));
			json_t *size = json_object_get(pod, "size");
			if (json_is_object(size) && json_object_get(size, "error"))
				printf("    size: %s\n", str(size, "error"));
			else if (json_is_object(size))
				printf("    size: limit %lld bytes, used %lld bytes and %lld inodes "
				       "(project %lld)\n",
				       (long long)json_integer_value(
					       json_object_get(size, "limit_bytes")),
				       (long long)json_integer_value(
					       json_object_get(size, "used_bytes")),
				       (long long)json_integer_value(
					       json_object_get(size, "used_inodes")),
				       (long long)json_integer_value(
					       json_object_get(size, "project_id")));
			if (json_is_object(who))
				printf("    pod: %s/%s uid %s service account %s\n",
				       str(who, "namespace"), str(who, "name"), str(who, "uid"),
				       str(who, "service_account"));
			if (json_is_object(fl))
				printf("    in flight: %s since %s\n", str(fl, "operation"),
				       str(fl, "started_at"));
			if (json_is_object(bo))
				printf("    failing (%lld times, retry in %lld ms): %s at %s\n",
				       (long long)json_integer_value(
					       json_object_get(bo, "failures")),
				       (long long)json_integer_value(
					       json_object_get(bo, "retry_in_ms")),
				       str(bo, "last_error"), str(bo, "last_error_at"));
		}
		/* The agent's one rendering of the spec, sensitive options masked. */
		if (json_is_string(json_object_get(vol, "summary")))
			printf("    source: %s\n", str(vol, "summary"));
	}
	if (json_array_size(json_object_get(root, "devices")))
		printf("\n%-32s %-6s %-16s %-9s %s\n", "DEVICE VOLUME", "PLUGIN", "DEVICE", "STATE",
		       "MOUNTED AT");
	json_array_foreach(json_object_get(root, "devices"), i, dev)
	{
		json_t *bo = json_object_get(dev, "backoff");
		printf("%-32s %-6s %-16s %-9s %s\n", str(dev, "volume"), str(dev, "plugin"),
		       str(dev, "device"),
		       json_is_true(json_object_get(dev, "broken"))    ? "broken"
		       : json_is_true(json_object_get(dev, "mounted")) ? "mounted"
								       : "pending",
		       str(dev, "mount_path"));
		if (json_is_object(bo))
			printf("    failing (%lld times): %s at %s\n",
			       (long long)json_integer_value(json_object_get(bo, "failures")),
			       str(bo, "last_error"), str(bo, "last_error_at"));
	}
	json_array_foreach(json_object_get(root, "mounts_being_removed"), i, vol)
		printf("being removed: %s\n", str(vol, "target"));
	json_array_foreach(json_object_get(root, "on_node"), i,
			   vol) if (json_is_true(json_object_get(vol, "stale")))
		printf("lost stage: %s staged at %s with no pod for %llds (kubelet may have "
		       "lost track of it; left as it is)\n",
		       str(vol, "volume"), str(vol, "staged_at"),
		       (long long)json_integer_value(
			       json_object_get(vol, "unpublished_since_seconds")));
	json_array_foreach(json_object_get(root, "storage_servers"), i,
			   vol) if (streq(str(vol, "state"), "down"))
		printf("storage server down: %s since %s (%s); %lld operations refused\n",
		       str(vol, "server"), str(vol, "down_since"), str(vol, "reason"),
		       (long long)json_integer_value(json_object_get(vol, "refused")));
	specs = json_object_get(root, "spec_files");
	if (json_is_string(json_object_get(specs, "dir_unsafe")))
		printf("\npods dir %s is NOT safe, its files are refused: %s\n", str(specs, "dir"),
		       str(specs, "dir_unsafe"));
	json_array_foreach(json_object_get(specs, "refused"), i, vol)
		printf("refused spec file %s/%s: %s\n", str(specs, "dir"), str(vol, "file"),
		       str(vol, "reason"));
}

int cmd_status(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "socket", required_argument, NULL, 's' },
		{ "state-dir", required_argument, NULL, 'd' },
		{ "config", required_argument, NULL, 'c' },
		{ "holders", required_argument, NULL, 'H' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct status_args a = { 0 };
	const char *holders = NULL;
	_cleanup_free_ char *text = NULL;
	json_t *root;
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'H':
			holders = optarg;
			break;
		case 'h':
			printf("Usage: volagent status [--json] [--holders VOLUME|PATH] "
			       "[--socket PATH | --state-dir DIR] [--config FILE]\n\n"
			       "Shows the running agent's volumes, devices and journal.\n"
			       "--holders: who holds the volume's mounts (or the mount at PATH): "
			       "processes\n"
			       "with their cwd, root, open files or mappings on it, and stacked or "
			       "other mounts.\n"
			       "The socket is --socket, else the config file's admin-socket, else\n"
			       "<state-dir>/admin.sock (as `volagent run` places it; the state dir\n"
			       "from --state-dir or the config file, default %s).\n",
			       DEFAULT_SOCKET);
			return 0;
		default:
			if (status_args_take(&a, c, optarg))
				break;
			fprintf(stderr, "Try 'volagent status --help'.\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "volagent status: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	root = status_fetch("status", &a, &text, &rc);
	if (!root)
		return rc;
	if (holders) {
		rc = status_print_holders(root, holders, a.as_json);
		json_decref(root);
		return rc;
	}
	if (a.as_json)
		fputs(text, stdout);
	else
		print_human(root);
	json_decref(root);
	return 0;
}
