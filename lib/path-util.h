/* path-util.h - validating paths from specs and walking directories without following
 * symlinks, so that what was checked is what gets mounted on. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "error.h"

/* A name that is safe as one path component: [A-Za-z0-9._-]{1,253}, not "." or "..". */
bool path_is_safe_component(const char *s);

/* An absolute, normalized path: starts with '/', no empty, "." or ".." component, no trailing
 * '/', no control characters, shorter than PATH_MAX.  field names the spec field for the
 * message ("volumes[0].local.path: must be absolute"). */
int path_validate_absolute(const char *path, const char *field, struct error_info *err);

/* Whether path equals root or lies below it (both normalized absolute paths). */
bool path_is_under(const char *path, const char *root);

/* One openat2(2) of path (relative to dir_fd, or absolute) as O_PATH | O_CLOEXEC | flags,
 * refusing every symlink and magic link on the way (RESOLVE_NO_SYMLINKS), and with beneath
 * also anything that resolves outside dir_fd (RESOLVE_BENEATH).  Returns the fd or -errno
 * (-ELOOP: a symlink; -ENOSYS: a kernel before 5.6, for the caller to walk instead). */
int path_open_no_symlinks(int dir_fd, const char *path, int flags, bool beneath);

/* Opens root (which is trusted) and walks rel below it one component at a time with
 * O_NOFOLLOW, creating missing directories with mode when create is set.  A component that
 * is a symlink or not a directory is refused with -ELOOP or -ENOTDIR.  On success stores an
 * O_PATH descriptor of the final directory in *ret_fd.  (When all of rel exists and has no
 * symlink, one openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) does the walk.) */
int path_open_dir_below(const char *root, const char *rel, bool create, mode_t mode, int *ret_fd,
			struct error_info *err);

/* path_open_dir_below() from root_fd, an open descriptor of the trusted directory root (named
 * for messages), which stays open: a caller that walks below the same root many times opens it
 * once. */
int path_open_dir_below_at(int root_fd, const char *root, const char *rel, bool create, mode_t mode,
			   int *ret_fd, struct error_info *err);

/* rmdir(path), then each parent up to but not including stop, until one is not empty.  Never
 * removes anything but empty directories.  Returns 0 or the first unexpected -errno. */
int path_rmdir_up_to(const char *path, const char *stop);

/* Escapes s into one path component with percent encoding of '/', '%' and a leading '.',
 * so distinct inputs stay distinct ("/dev/loop3" gives "%2Fdev%2Floop3").  Caller frees. */
char *path_escape_component(const char *s);

/* Reverses path_escape_component.  Returns NULL on a malformed escape or ENOMEM. */
char *path_unescape_component(const char *s);

/* "/proc/self/fd/N" for fd, into buf of at least 32 bytes; returns buf. */
const char *path_fd_path(int fd, char *buf);
#define FD_PATH_MAX 32

/* mkdir -p with mode for a trusted directory (the agent's own root and state dirs). */
int path_mkdir_p(const char *path, mode_t mode);
