/* admin-server.h - the local admin socket that `volagent status` talks to.  Each connection
 * gets one JSON snapshot of the agent's state and is closed.  Root may connect; others only
 * through the socket's group (0660), and the server checks the peer's credentials too. */
#pragma once

#include "error.h"
#include "reconciler.h"

struct admin_server;

/* Listens on path (mode 0600, or 0660 with group) and serves snapshots of r. */
int admin_server_start(const char *path, const char *group, struct reconciler *r,
		       struct admin_server **ret, struct error_info *err);
struct admin_server *admin_server_free(struct admin_server *s);
