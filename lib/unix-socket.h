/* unix-socket.h - a listening unix socket for the agent's local services (metrics, admin),
 * created with the mode it must have from the start and an optional group. */
#pragma once

#include <sys/types.h>

#include "error.h"

/* Binds and listens on path (replacing a stale socket file, refusing any other file), mode
 * 0600, or 0660 with group (a name or a gid) when group is not NULL or "".  Returns the fd or
 * -errno with err set. */
int unix_socket_listen(const char *path, const char *group, struct error_info *err);
/* The gid of group (a name or a number).  Returns 0 or -ENOENT. */
int unix_socket_group_gid(const char *group, gid_t *ret);
