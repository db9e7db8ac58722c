/* file-util.h - replacing a small state file atomically, for the journal and devices.json,
 * writing a whole buffer to a descriptor, and reading a small file such as a sysfs attribute in
 * one go. */
#pragma once

#include <sys/types.h>

#include "error.h"

/* Replaces dir/name with data so that a reader sees the old or the new file, never a part, and
 * the new one survives a crash once this returns: a temp file (.name.tmp, created with mode,
 * never through a symlink), fsync, rename, fsync of the directory. */
int file_write_atomic(const char *dir, const char *name, const char *data, mode_t mode,
		      struct error_info *err);

/* Writes all of buf to fd, again after EINTR and short writes (async-signal-safe: only
 * write(2)).  Returns 0 or a negative errno (-EIO when write returns 0). */
int fd_write_all(int fd, const void *buf, size_t len);

/* fsync of the directory that holds path: makes a rename or an unlink in it durable (a power
 * cut after the rename's return may otherwise bring the old name back).  0 or -errno. */
int file_fsync_parent(const char *path);

/* Reads at most size bytes of dir/name with one read(): enough for a sysfs attribute.
 * Returns the byte count (0 for an empty file) or a negative errno. */
ssize_t file_read_at(const char *dir, const char *name, void *buf, size_t size);
