/* secret-watch.h - proves that a secret never reaches a file under some directories, however
 * briefly it was there: fanotify watches a mount, and every file on it is read when it is
 * closed after writing (FAN_CLOSE_WRITE) and, blocking the opener until it is read, whenever it
 * is opened (FAN_OPEN_PERM).  A key written, handed to a helper and zeroed before removal is
 * therefore seen: the helper's open waits until the watcher has read the file.
 *
 * The watched dir is made a mount of its own (a bind mount onto itself) so that only files on
 * it are seen; mounts below it (a tmpfs secret dir, FUSE, pod filesystems) are not.  Files are
 * counted as "under" a prefix by their path (/proc/self/fd).  Needs root (CAP_SYS_ADMIN) and a
 * private mount namespace. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct secret_watch;

/* Starts watching dir (bind-mounted onto itself) for secret.  Returns NULL with errno set. */
struct secret_watch *secret_watch_start(const char *dir, const char *secret);

/* Stops the watcher, undoes the bind mount and frees.  NULL is fine. */
void secret_watch_stop(struct secret_watch *w);

/* The first path under prefix seen holding the secret (copied into buf), or NULL.  n_files
 * (may be NULL) is how many file reads under prefix the watcher made, so a test can see that
 * it did watch; ret_mode (may be NULL) gets the found file's permission bits. */
const char *secret_watch_found(struct secret_watch *w, const char *prefix, char *buf, size_t len,
			       unsigned *n_files, unsigned *ret_mode);
