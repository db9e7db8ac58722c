/* metrics-server.c - see metrics-server.h.  One thread runs a libevent loop with evhttp on
 * it: every connection is non-blocking and served by that loop, so a client that sends
 * nothing or reads slowly holds up neither the other scrapes nor the reconciler (the text is
 * rendered from the metrics counters, which any thread may read).  libevent (core + extra)
 * links only libc: no TLS library is mapped into the daemon for an endpoint that never uses
 * TLS.  The loop is stopped through an eventfd that the loop itself watches, so libevent's
 * own locking (libevent_pthreads) is not needed. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "metrics-server.h"
#include "metrics.h"
#include "server-thread.h"
#include "unix-socket.h"

/* A connection idle (or stuck sending its request, or not reading the answer) this long is
 * closed, so that forgotten clients do not pile up. */
#define METRICS_CONN_TIMEOUT_S 30
/* A scrape is a GET with a few headers and no body. */
#define METRICS_MAX_HEADERS 8192
#define METRICS_MAX_BODY 4096

struct metrics_server {
	struct event_base *base;
	struct evhttp *http;
	struct event *stop_ev;
	struct server_thread thread;
	char *socket_path; /* unlinked at the end; NULL for TCP */
};

static void reply_text(struct evhttp_request *req, int code, const char *reason, const char *text)
{
	struct evbuffer *body = evbuffer_new();

	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "text/plain; charset=utf-8");
	if (body)
		evbuffer_add(body, text, strlen(text));
	evhttp_send_reply(req, code, reason, body);
	if (body)
		evbuffer_free(body);
}

static void free_text(const void *data, size_t len, void *extra)
{
	free((void *)data);
}

static void handle(struct evhttp_request *req, void *userdata)
{
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
	struct evkeyvalq *headers = evhttp_request_get_output_headers(req);
	struct evbuffer *body;
	char len[24];
	char *text;

	if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
		evhttp_add_header(headers, "Allow", "GET, HEAD");
		reply_text(req, 405, "Method Not Allowed",
			   "method not allowed: the metrics are read with GET or HEAD\n");
		return;
	}
	if (!path || !streq(path, "/metrics")) {
		reply_text(req, HTTP_NOTFOUND, "Not Found",
			   "not found: the metrics are at /metrics\n");
		return;
	}
	text = metrics_render();
	if (!text) {
		reply_text(req, HTTP_INTERNAL, "Internal Server Error", "out of memory\n");
		return;
	}
	evhttp_add_header(headers, "Content-Type", "text/plain; version=0.0.4");
	if (cmd == EVHTTP_REQ_HEAD) {
		/* The length GET would send; evhttp sends no body (and no length) for HEAD. */
		snprintf(len, sizeof(len), "%zu", strlen(text));
		evhttp_add_header(headers, "Content-Length", len);
		free(text);
		evhttp_send_reply(req, HTTP_OK, "OK", NULL);
		return;
	}
	body = evbuffer_new();
	if (!body || evbuffer_add_reference(body, text, strlen(text), free_text, NULL) < 0) {
		free(text);
		if (body)
			evbuffer_free(body);
		reply_text(req, HTTP_INTERNAL, "Internal Server Error", "out of memory\n");
		return;
	}
	evhttp_send_reply(req, HTTP_OK, "OK", body);
	evbuffer_free(body);
}

/* libevent's own messages (accept failures and the like) go to the agent's log. */
static void libevent_log(int severity, const char *msg)
{
	if (severity >= EVENT_LOG_WARN)
		log_warning("metrics server", "error", msg);
	else
		log_debug("metrics", "libevent", "message", msg);
}

static void on_stop(evutil_socket_t fd, short what, void *userdata)
{
	event_base_loopbreak(userdata);
}

static void *metrics_main(void *userdata)
{
	struct metrics_server *s = userdata;

	(void)pthread_setname_np(pthread_self(), "metrics");
	event_base_dispatch(s->base);
	return NULL;
}

/* A loopback host:port into ret.  Returns 0 or -EINVAL. */
static int parse_loopback(const char *address, struct sockaddr_storage *ret, socklen_t *ret_len)
{
	const char *colon = strrchr(address, ':');
	char host[64];
	long port;
	char *end;

	if (!colon || (size_t)(colon - address) >= sizeof(host))
		return -EINVAL;
	snprintf(host, sizeof(host), "%.*s", (int)(colon - address), address);
	port = strtol(colon + 1, &end, 10);
	if (*end || port <= 0 || port > 65535)
		return -EINVAL;
	memset(ret, 0, sizeof(*ret));
	if (streq(host, "127.0.0.1") || streq(host, "localhost")) {
		struct sockaddr_in *in = (struct sockaddr_in *)ret;
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		*ret_len = sizeof(*in);
		return 0;
	}
	if (streq(host, "[::1]")) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ret;
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		in6->sin6_addr = in6addr_loopback;
		*ret_len = sizeof(*in6);
		return 0;
	}
	return -EINVAL;
}

/* A listening TCP socket on a loopback address.  Returns the fd or -errno with err set. */
static int tcp_listen(const char *address, struct error_info *err)
{
	_cleanup_close_ int fd = -1;
	struct sockaddr_storage sa;
	socklen_t len;
	int one = 1;

	if (parse_loopback(address, &sa, &len) < 0)
		return err_set(err, -EINVAL,
			       "metrics-address: \"%s\" is not unix:/path or a loopback "
			       "host:port (127.0.0.1, localhost, [::1])",
			       address);
	fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return err_set(err, -errno, "metrics-address: %s: socket: %s", address,
			       strerror(errno));
	if (sa.ss_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, len) < 0 || listen(fd, SOMAXCONN) < 0)
		return err_set(err, -errno, "metrics-address: %s: %s", address, strerror(errno));
	return TAKE_FD(fd);
}

int metrics_server_start(const char *address, const char *group, struct metrics_server **ret,
			 struct error_info *err)
{
	struct metrics_server *s = calloc(1, sizeof(*s));
	int fd, k;

	if (!s)
		return -ENOMEM;
	if (startswith(address, "unix:") || address[0] == '/') {
		const char *path = startswith(address, "unix:") ? address + strlen("unix:")
								: address;

		while (startswith(path, "//"))
			path++; /* unix:///abs/path */
		fd = unix_socket_listen(path, group, err);
		if (fd < 0) {
			free(s);
			return err_prefix(err, "metrics socket");
		}
		s->socket_path = strdup(path);
		if (!s->socket_path) {
			unlink(path);
			close(fd);
			free(s);
			return -ENOMEM;
		}
	} else {
		fd = tcp_listen(address, err);
		if (fd < 0) {
			free(s);
			return fd;
		}
	}

	event_set_log_callback(libevent_log);
	s->base = event_base_new();
	s->http = s->base ? evhttp_new(s->base) : NULL;
	if (!s->http) {
		close(fd);
		metrics_server_free(s);
		return err_set(err, -ENOMEM, "metrics server on %s: out of memory", address);
	}
	/* The loop accepts until EAGAIN: a blocking socket would stop it in accept(). */
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0 ||
	    !evhttp_accept_socket_with_handle(s->http, fd)) {
		close(fd);
		metrics_server_free(s);
		return err_set(err, -ENOMEM, "metrics server on %s could not start", address);
	}
	/* Every method reaches handle(), which answers 405 to all but GET and HEAD. */
	evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
						    EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
						    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
						    EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_timeout(s->http, METRICS_CONN_TIMEOUT_S);
	evhttp_set_max_headers_size(s->http, METRICS_MAX_HEADERS);
	evhttp_set_max_body_size(s->http, METRICS_MAX_BODY);
	evhttp_set_gencb(s->http, handle, s);

	k = server_thread_open(&s->thread, EFD_NONBLOCK);
	s->stop_ev = k == 0 ? event_new(s->base, s->thread.stop_fd, EV_READ, on_stop, s->base)
			    : NULL;
	if (!s->stop_ev || event_add(s->stop_ev, NULL) < 0) {
		k = k < 0 ? k : -ENOMEM;
		metrics_server_free(s);
		return err_set(err, k, "metrics server on %s: %s", address, strerror(-k));
	}
	k = server_thread_start(&s->thread, metrics_main, s);
	if (k < 0) {
		metrics_server_free(s);
		return err_set(err, k, "metrics server on %s: %s", address, strerror(-k));
	}
	*ret = s;
	return 0;
}

struct metrics_server *metrics_server_free(struct metrics_server *s)
{
	if (!s)
		return NULL;
	server_thread_stop(&s->thread);
	/* Closes the listening socket and every open connection. */
	if (s->http)
		evhttp_free(s->http);
	if (s->stop_ev)
		event_free(s->stop_ev);
	if (s->base)
		event_base_free(s->base);
	server_thread_close(&s->thread);
	if (s->socket_path) {
		unlink(s->socket_path);
		free(s->socket_path);
	}
	free(s);
	return NULL;
}
