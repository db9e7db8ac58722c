/* rbd-health.c - see rbd-health.h. */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "macro.h"
#include "rbd-health.h"
#include "time-util.h"

#define MON_DEFAULT_PORT "6789"

/* The option rbd-hung-after (rbd.c's table): set before the agent starts. */
static uint64_t hung_after_ms = 10000;

void rbd_health_set_hung_after(uint64_t ms)
{
	hung_after_ms = ms;
}

/* Splits one monitor entry ("1.2.3.4:6789", "v2:1.2.3.4:3300", "[::1]:6789", "mon-a") into
 * host and port; an address vector "[v2:...,v1:...]" comes here as its parts. */
static int split_monitor(const char *entry, char *host, size_t host_len, char *port,
			 size_t port_len)
{
	const char *s = entry, *colon;
	size_t n;

	if (*s == '[' && (startswith(s + 1, "v1:") || startswith(s + 1, "v2:")))
		s++;
	if (startswith(s, "v1:") || startswith(s, "v2:"))
		s += 3;
	n = strcspn(s, "]/");
	if (*s == '[') { /* [v6 address]:port */
		const char *end = strchr(s, ']');
		if (!end)
			return -EINVAL;
		snprintf(host, host_len, "%.*s", (int)(end - s - 1), s + 1);
		snprintf(port, port_len, "%s", end[1] == ':' ? end + 2 : MON_DEFAULT_PORT);
		port[strcspn(port, "]/")] = '\0';
		return host[0] && port[0] ? 0 : -EINVAL;
	}
	colon = memchr(s, ':', n);
	if (colon && memchr(colon + 1, ':', n - (size_t)(colon + 1 - s)))
		colon = NULL; /* a bare v6 address */
	snprintf(host, host_len, "%.*s", (int)(colon ? (size_t)(colon - s) : n), s);
	snprintf(port, port_len, "%.*s", colon ? (int)(n - (size_t)(colon + 1 - s)) : 4,
		 colon ? colon + 1 : MON_DEFAULT_PORT);
	return host[0] && port[0] ? 0 : -EINVAL;
}

/* Connects to addr and reads the messenger's banner, within deadline (CLOCK_MONOTONIC ms). */
static int banner_from(const struct addrinfo *ai, uint64_t deadline)
{
	_cleanup_close_ int fd =
		socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	char banner[8];
	size_t got = 0;

	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS)
		return -errno;
	for (;;) {
		uint64_t now = now_ms();
		int so = 0, r;
		socklen_t len = sizeof(so);
		ssize_t n;

		if (now >= deadline)
			return -ETIMEDOUT;
		r = poll(&p, 1, (int)(deadline - now));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		if (p.events == POLLOUT) { /* connected, or refused */
			if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &len) < 0)
				return -errno;
			if (so)
				return -so;
			p.events = POLLIN;
			continue;
		}
		n = read(fd, banner + got, sizeof(banner) - got);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		got += (size_t)n;
		if (got >= 6)
			return memcmp(banner, "ceph v", 6) == 0 ? 0 : -EPROTO;
	}
}

int rbd_health_probe(const char *monitors, uint64_t timeout_ms, struct error_info *err)
{
	_cleanup_free_ char *list = strdup(monitors);
	uint64_t start = now_ms();
	char tried[400] = "";
	char *m, *save = NULL;
	size_t n_mons = 1;
	int r = -EINVAL;

	if (!list)
		return -ENOMEM;
	for (const char *c = monitors; *c; c++)
		n_mons += *c == ',';
	for (m = strtok_r(list, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
		struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
		/* Each monitor gets its share of the deadline: one that hangs does not use it up. */
		uint64_t deadline = now_ms() + timeout_ms / n_mons, end = start + timeout_ms;
		char host[256], port[16];
		size_t len = strlen(tried);
		int g;

		deadline = deadline > end ? end : deadline;
		if (split_monitor(m, host, sizeof(host), port, sizeof(port)) < 0) {
			snprintf(tried + len, sizeof(tried) - len, "%s%s: not host:port",
				 len ? "; " : "", m);
			continue;
		}
		g = getaddrinfo(host, port, &hints, &res);
		if (g != 0) {
			r = -EHOSTUNREACH;
			snprintf(tried + len, sizeof(tried) - len, "%s%s: %s", len ? "; " : "", m,
				 gai_strerror(g));
			continue;
		}
		r = banner_from(res, deadline);
		freeaddrinfo(res);
		if (r == 0)
			return 0;
		snprintf(tried + len, sizeof(tried) - len, "%s%s: %s", len ? "; " : "", m,
			 r == -ETIMEDOUT ? "no banner within its share of the deadline"
					 : strerror(-r));
	}
	return err_set(err, r == -ETIMEDOUT || r == -EINVAL ? r : -EHOSTUNREACH,
		       "no monitor answered within %llums (%s)", (unsigned long long)timeout_ms,
		       tried);
}

static int probe_cb(void *monitors, struct error_info *err)
{
	return rbd_health_probe(monitors, RBD_HEALTH_PROBE_MS, err);
}

int rbd_health_begin(const char *monitors, struct server_health_op *op, struct error_info *err)
{
	char key[SERVER_HEALTH_KEY_MAX + 16];

	snprintf(key, sizeof(key), RBD_HEALTH_KEY_PREFIX "%s", monitors);
	(void)server_health_set_hung_after_for(RBD_HEALTH_KEY_PREFIX, hung_after_ms);
	return server_health_gate(key, op, probe_cb, (void *)monitors, err);
}

void rbd_health_end(struct server_health_op *op, int r, const struct error_info *err)
{
	server_health_end(op, r, r < 0 && err ? err_msg(err) : NULL);
}
