/* spec-trust.h - whether a pod spec file may be believed.
 *
 * The pods dir is a door to mount(2) as root, so a spec file is trusted only when nobody but
 * root could have written it or put it there (as sshd's StrictModes and sudo do): the file and
 * every directory above it up to / are owned by root and not writable by group or others (a
 * root-owned sticky directory such as /tmp may stand above the pods dir: others cannot replace
 * what root made in it), and it is a regular file, reached through no symlink owned by someone
 * else.  A refusal names the part that failed and why, as "<what>: <reason>". */
#pragma once

#include "error.h"

/* Checks dir and every directory above it.  Returns 0 when trusted, -EPERM (or the errno of
 * a failed lstat) with err saying which directory and why. */
int spec_trust_check_dir(const char *dir, struct error_info *err);
/* Opens name, in the directory dir_fd whose path is dir (itself already checked), for reading
 * (O_NONBLOCK), when the file is trusted; a root-owned symlink is followed, and its target
 * and the directories above the target are checked as well.  Returns the fd, or -errno (-EPERM:
 * refused, err saying why; -ENOENT: gone). */
int spec_trust_open(int dir_fd, const char *dir, const char *name, struct error_info *err);
