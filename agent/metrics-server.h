/* metrics-server.h - serves GET and HEAD /metrics (Prometheus text format) with libevent's
 * evhttp on a thread of its own, on a unix socket by default, on a loopback TCP port, or, when
 * asked explicitly (metrics-network), on a TCP port of the node's network for Prometheus.
 * Nothing but /metrics is served: every other path is 404, every other method 405. */
#pragma once

#include <stdbool.h>

#include "error.h"

struct metrics_server;

/* address: "unix:/abs/path", "/abs/path", or "127.0.0.1:PORT" / "localhost:PORT" /
 * "[::1]:PORT"; with network also any IPv4 or bracketed IPv6 literal ("0.0.0.0:PORT",
 * "[::]:PORT", "10.0.0.5:PORT"); names are never resolved.  Without network a non-loopback
 * address is refused, so that only an explicit setting puts the metrics on the network.
 * group: as for unix_socket_listen.  Returns 0 and the running server, or -errno with err
 * set. */
int metrics_server_start(const char *address, const char *group, bool network,
			 struct metrics_server **ret, struct error_info *err);
/* Stops the server's thread, closes the socket and every open connection, and removes the
 * unix socket file.  Accepts NULL; returns NULL. */
struct metrics_server *metrics_server_free(struct metrics_server *s);
