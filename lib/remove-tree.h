/* remove-tree.h - removing a directory with everything in it, for data that is the agent's to
 * delete (an ephemeral volume's directory), without ever following a symlink or crossing into
 * a mount that someone left inside it. */
#pragma once

#include "error.h"

/* Removes name (a directory below parent_fd) and all it holds.  Every entry is reached with
 * openat/unlinkat relative to its directory's descriptor and O_NOFOLLOW: a symlink is removed
 * as a link, never followed.  A directory that is another mount (its mount ID or device
 * differs from name's) is not entered nor removed: the walk goes on with the rest, and the
 * call returns -EBUSY naming it, leaving that mount, and the directories above it, in place.
 * name missing is 0.  Returns 0 or -errno with err set. */
int rm_tree_at(int parent_fd, const char *name, struct error_info *err);
