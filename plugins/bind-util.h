/* bind-util.h - the pod side that most plugins share: a pod volume is a bind mount of a
 * directory (the source dir itself, or a device's node-wide mount) into the pod's dir. */
#pragma once

#include <stdbool.h>

#include "error.h"
#include "plugin.h"

/* Whether target is the root of a mount of the same object as source, read-only exactly when
 * read_only: 1 yes, 0 no (not mounted, or something else), -errno when it cannot be told. */
int bind_check(const char *target, const char *source, bool read_only);

/* bind_check() for check_set_up, using what the mount table showed at target (seen): when the
 * mount at target is still seen->mount_id, its read-only flag and whether it is stacked come
 * from seen, and only the target and the source are looked at (a statx each); otherwise it
 * is bind_check().  A mount stacked on another is refused (0).  Sets seen->confirmed on 1
 * from seen. */
int bind_check_seen(const char *target, const char *source, bool read_only,
		    struct mount_seen *seen);

/* Binds the directory source_fd (an O_PATH descriptor of source) onto target, unless target
 * already holds it (idempotent).  A target that is another mount is refused (-EBUSY).  A
 * target->fresh (made just now) is not looked at first. */
int bind_set_up(int source_fd, const char *source, const struct mount_target *target,
		bool read_only, struct error_info *err);

/* Opens a node-wide device mount (the agent's own dir, or kubelet's staging dir) for
 * bind_set_up: O_PATH, not following a final symlink. */
int bind_open_device_mount(const char *path, struct error_info *err);
