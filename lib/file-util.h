/* file-util.h - replacing a small state file atomically, for the journal and devices.json. */
#pragma once

#include <sys/types.h>

#include "error.h"

/* Replaces dir/name with data so that a reader sees the old or the new file, never a part, and
 * the new one survives a crash once this returns: a temp file (.name.tmp, created with mode,
 * never through a symlink), fsync, rename, fsync of the directory. */
int file_write_atomic(const char *dir, const char *name, const char *data, mode_t mode,
		      struct error_info *err);
