/* helper-scope.h - move a long-lived helper process (rbd-fuse, rbd-nbd) out of the agent's
 * cgroup into a transient scope unit of its own, when the agent runs as a systemd service.
 *
 * Under systemd a service's processes are all in its cgroup: stopping or restarting
 * volagent.service kills every process left there (KillMode=mixed: SIGKILL once the main
 * process has exited), whatever session or parent they have.  A helper that serves a mounted
 * volume must outlive the agent, so it is moved into `volagent-<kind>-<pid>.scope` under
 * system-volagent.slice with StartTransientUnit (sd-bus).  The scope is garbage-collected
 * when the helper exits.  Without systemd (a container, a shell) nothing is done: there the
 * helper's own session is what keeps it alive. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"

/* True when this process is part of a systemd service unit on a systemd-booted system, i.e.
 * when a helper left in our cgroup would die with the service.  VOLAGENT_HELPER_SCOPE=0 in
 * the environment turns scopes off (true never forces them on). */
bool helper_scope_wanted(void);

/* Moves process pid (the helper's daemon process, after it daemonized: children it forked
 * before the call would stay behind) into a new transient scope named after kind (letters,
 * digits and '-') and pid, with description as its Description=.  Waits until the process
 * is in the scope.  The unit name is written to ret_unit (may be NULL) on success.
 *
 * Returns: 1 when moved, 0 when not under systemd (nothing to do), negative errno on failure
 * with the reason in err (bus unreachable, StartTransientUnit refused, -ESRCH: the process
 * exited, -ETIMEDOUT: not moved within 10 s). */
int helper_scope_move(pid_t pid, const char *kind, const char *description, char *ret_unit,
		      size_t unit_size, struct error_info *err);
