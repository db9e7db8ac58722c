/* metrics-server.h - serves GET and HEAD /metrics (Prometheus text format) with libevent's
 * evhttp on a thread of its own, on a unix socket by default or on a loopback TCP port. */
#pragma once

#include "error.h"

struct metrics_server;

/* address: "unix:/abs/path", "/abs/path", or "127.0.0.1:PORT" / "localhost:PORT" /
 * "[::1]:PORT" (loopback only: the metrics are not for the network).  group: as for
 * unix_socket_listen.  Returns 0 and the running server, or -errno with err set. */
int metrics_server_start(const char *address, const char *group, struct metrics_server **ret,
			 struct error_info *err);
/* Stops the server's thread, closes the socket and every open connection, and removes the
 * unix socket file.  Accepts NULL; returns NULL. */
struct metrics_server *metrics_server_free(struct metrics_server *s);
