/* metrics-server.c - see metrics-server.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "macro.h"
#include "metrics-server.h"
#include "metrics.h"
#include "unix-socket.h"

struct metrics_server {
	struct MHD_Daemon *daemon;
	char *socket_path; /* unlinked at the end; NULL for TCP */
};

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_data_size, void **con_cls)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	char *text;

	if (!streq(method, "GET") && !streq(method, "HEAD"))
		return MHD_NO; /* closes the connection */
	if (!streq(url, "/metrics")) {
		static const char nf[] = "not found: the metrics are at /metrics\n";
		resp = MHD_create_response_from_buffer(strlen(nf), (void *)nf,
						       MHD_RESPMEM_PERSISTENT);
		ret = MHD_queue_response(conn, MHD_HTTP_NOT_FOUND, resp);
		MHD_destroy_response(resp);
		return ret;
	}
	text = metrics_render();
	if (!text)
		return MHD_NO;
	resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4");
	ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return ret;
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

int metrics_server_start(const char *address, const char *group, struct metrics_server **ret,
			 struct error_info *err)
{
	struct metrics_server *s = calloc(1, sizeof(*s));
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;

	if (!s)
		return -ENOMEM;
	if (startswith(address, "unix:") || address[0] == '/') {
		const char *path = startswith(address, "unix:") ? address + strlen("unix:")
								: address;
		int fd;

		while (startswith(path, "//"))
			path++; /* unix:///abs/path */
		fd = unix_socket_listen(path, group, err);
		if (fd < 0) {
			free(s);
			return err_prefix(err, "metrics socket");
		}
		s->socket_path = strdup(path);
		s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, handle, NULL,
					     MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_END);
		if (!s->daemon)
			close(fd);
	} else {
		struct sockaddr_storage sa;
		socklen_t len;

		if (parse_loopback(address, &sa, &len) < 0) {
			free(s);
			return err_set(err, -EINVAL,
				       "metrics-address: \"%s\" is not unix:/path or a loopback "
				       "host:port (127.0.0.1, localhost, [::1])",
				       address);
		}
		if (sa.ss_family == AF_INET6)
			flags |= MHD_USE_IPv6;
		s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, handle, NULL,
					     MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
					     MHD_OPTION_END);
	}
	if (!s->daemon) {
		metrics_server_free(s);
		return err_set(err, -EADDRINUSE, "metrics server on %s could not start", address);
	}
	*ret = s;
	return 0;
}

struct metrics_server *metrics_server_free(struct metrics_server *s)
{
	if (!s)
		return NULL;
	if (s->daemon)
		MHD_stop_daemon(s->daemon);
	if (s->socket_path) {
		unlink(s->socket_path);
		free(s->socket_path);
	}
	free(s);
	return NULL;
}
