/* rbd-cluster.c - see rbd-cluster.h. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <rados/librados.h>
#include <rbd/librbd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "macro.h"
#include "rbd-cluster.h"

struct rbd_cluster {
	rados_t rados;
};

struct rbd_cluster *rbd_cluster_free(struct rbd_cluster *c)
{
	if (!c)
		return NULL;
	rados_shutdown(c->rados);
	free(c);
	return NULL;
}

/* Whether a TCP connection to one monitor ("host:port", "v1:host:port", "[::1]:port";
 * port 6789 when none) opens within timeout_ms. */
static bool mon_answers(const char *mon, int timeout_ms)
{
	char host[256], port[16] = "6789";
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
	const char *colon;
	bool ok = false;

	if (startswith(mon, "v1:") || startswith(mon, "v2:"))
		mon += 3;
	snprintf(host, sizeof(host), "%s", mon);
	colon = strrchr(host, ':');
	if (colon && (host[0] != '[' || colon > strchr(host, ']'))) {
		snprintf(port, sizeof(port), "%.*s", (int)strcspn(colon + 1, "/"), colon + 1);
		host[colon - host] = '\0';
	}
	if (host[0] == '[') {
		memmove(host, host + 1, strlen(host));
		host[strcspn(host, "]")] = '\0';
	}
	if (getaddrinfo(host, port, &hints, &ai) != 0)
		return false;
	for (struct addrinfo *a = ai; a && !ok; a = a->ai_next) {
		int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), e = 0;
		socklen_t len = sizeof(e);
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };

		if (fd < 0)
			continue;
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
			ok = true;
		else if (errno == EINPROGRESS && poll(&pfd, 1, timeout_ms) == 1 &&
			 getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) == 0 && e == 0)
			ok = true;
		close(fd);
	}
	freeaddrinfo(ai);
	return ok;
}

static bool any_mon_answers(const char *monitors)
{
	_cleanup_free_ char *copy = strdup(monitors);
	char *m, *save = NULL;

	for (m = copy ? strtok_r(copy, ",", &save) : NULL; m; m = strtok_r(NULL, ",", &save))
		if (mon_answers(m, 1000))
			return true;
	return false;
}

int rbd_cluster_connect(const struct rbd_credentials *cred, uint64_t timeout_ms,
			struct rbd_cluster **ret, struct error_info *err)
{
	_cleanup_free_ char *name = strdup_printf("client.%s", cred->user);
	char secs[32];
	struct rbd_cluster *c;
	int r;

	if (!name)
		return -ENOMEM;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	r = rados_create2(&c->rados, "ceph", name, 0);
	if (r < 0) {
		free(c);
		return err_set(err, r, "cannot create a cluster handle: %s", strerror(-r));
	}
	snprintf(secs, sizeof(secs), "%llu", (unsigned long long)((timeout_ms + 999) / 1000));
	struct {
		const char *key, *value;
	} conf[] = {
		{ "mon_host", cred->monitors },
		{ "client_mount_timeout", secs },
		{ "rados_mon_op_timeout", secs },
		{ "rados_osd_op_timeout", secs },
		/* Our stderr is the agent's log: the library must not write there. */
		{ "log_to_stderr", "false" },
		{ "err_to_stderr", "false" },
		{ "log_file", "" },
		{ "keyring", cred->keyring },
		{ "keyfile", cred->keyfile },
		{ "key", cred->key },
	};
	for (size_t i = 0; i < ARRAY_SIZE(conf); i++) {
		if (!conf[i].value)
			continue;
		r = rados_conf_set(c->rados, conf[i].key, conf[i].value);
		if (r < 0) {
			/* Never echo the value: it may be the key. */
			rbd_cluster_free(c);
			return err_set(err, r, "cannot set %s: %s", conf[i].key, strerror(-r));
		}
	}
	r = rados_connect(c->rados);
	if (r < 0) {
		rbd_cluster_free(c);
		switch (-r) {
		case ETIMEDOUT:
		case EINTR:
			/* A monitor that refuses the key makes the client hunt until the timeout:
			 * tell that from a cluster that does not answer at all. */
			if (any_mon_answers(cred->monitors))
				return err_set(
					err, -EACCES,
					"authentication as client.%s failed: monitors %s answer "
					"but did not accept the key within %.1fs (wrong key, or "
					"the user does not exist)",
					cred->user, cred->monitors, (double)timeout_ms / 1000.0);
			return err_set(
				err, -ETIMEDOUT,
				"cluster unreachable: monitors %s did not answer within %.1fs",
				cred->monitors, (double)timeout_ms / 1000.0);
		case EACCES:
		case EPERM:
			return err_set(err, -EACCES,
				       "authentication as client.%s refused by monitors %s (wrong "
				       "key, or the user does not exist)",
				       cred->user, cred->monitors);
		case ENOENT:
			return err_set(err, -ENOENT,
				       "no key for client.%s (keyring %s, key file %s: missing or "
				       "without this user)",
				       cred->user, cred->keyring ? cred->keyring : "none",
				       cred->keyfile ? cred->keyfile : "none");
		default:
			return err_set(err, r, "cannot connect to monitors %s as client.%s: %s",
				       cred->monitors, cred->user, strerror(-r));
		}
	}
	*ret = c;
	return 0;
}

int rbd_cluster_watchers(struct rbd_cluster *c, const char *pool, const char *image,
			 struct rbd_watcher **ret, size_t *ret_n, struct error_info *err)
{
	rbd_image_watcher_t *w = NULL;
	struct rbd_watcher *out = NULL;
	rados_ioctx_t io;
	rbd_image_t img;
	size_t max = 8;
	int r;

	r = rados_ioctx_create(c->rados, pool, &io);
	if (r == -ENOENT)
		return err_set(err, r, "pool \"%s\" does not exist", pool);
	if (r < 0)
		return err_set(err, r, "cannot open pool \"%s\": %s", pool, strerror(-r));
	r = rbd_open_read_only(io, image, &img, NULL);
	if (r < 0) {
		rados_ioctx_destroy(io);
		if (r == -ENOENT)
			return err_set(err, r, "image \"%s\" does not exist in pool \"%s\"", image,
				       pool);
		if (r == -EPERM || r == -EACCES)
			return err_set(err, r,
				       "not allowed to open image %s/%s (the user's osd caps?): %s",
				       pool, image, strerror(-r));
		return err_set(err, r, "cannot open image %s/%s: %s", pool, image, strerror(-r));
	}
	for (;;) {
		w = calloc(max, sizeof(*w));
		if (!w) {
			r = -ENOMEM;
			break;
		}
		r = rbd_watchers_list(img, w, &max);
		if (r != -ERANGE)
			break;
		free(w);
		w = NULL;
	}
	if (r == 0) {
		out = calloc(max ? max : 1, sizeof(*out));
		if (!out)
			r = -ENOMEM;
		for (size_t i = 0; out && i < max; i++) {
			snprintf(out[i].addr, sizeof(out[i].addr), "%s", w[i].addr);
			out[i].id = w[i].id;
		}
		rbd_watchers_list_cleanup(w, max);
	} else if (r != -ENOMEM) {
		err_set(err, r, "cannot list the watchers of %s/%s: %s", pool, image, strerror(-r));
	}
	free(w);
	rbd_close(img);
	rados_ioctx_destroy(io);
	if (r < 0)
		return r;
	*ret = out;
	*ret_n = max;
	return 0;
}

int rbd_cluster_blocklist(struct rbd_cluster *c, const char *addr, uint32_t expire_s)
{
	_cleanup_free_ char *a = strdup(addr);

	if (!a)
		return -ENOMEM;
	return rados_blocklist_add(c->rados, a, expire_s);
}
