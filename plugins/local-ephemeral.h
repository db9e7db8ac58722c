/* local-ephemeral.h - the directories of ephemeral local volumes (CSI inline ephemeral
 * volumes, `csi.storage.k8s.io/ephemeral: "true"`, and pod spec files' `"local":
 * {"ephemeral": true}`): one fresh directory per published target, below the
 * `--local-ephemeral-dir` base (default <state-dir>/local-ephemeral), removed with its data
 * when the target is torn down. */
#pragma once

#include "error.h"
#include "plugin-option.h"

/* The local plugin's option table: the base directory, `--local-ephemeral-dir`. */
/* --local-ephemeral-dir: where ephemeral volumes get their directories ("": the default,
 * <state-dir>/local-ephemeral).  Returns 0 or -EINVAL with err set. */
int local_ephemeral_set_dir(const char *value, uint64_t ms, struct error_info *err);

/* The directory for the volume published at target, as <base>/<name> into buf (PATH_MAX):
 * name is a hash of target, so set-up, adoption and tear-down find it from the target alone.
 * NULL when the path does not fit. */
const char *local_ephemeral_path(const char *target, char *buf);

/* Opens (O_PATH) the directory for target, making the base (0700) and the directory (0750)
 * when missing, never through a symlink.  Returns 0 or -errno with err set. */
int local_ephemeral_open(const char *target, int *ret_fd, struct error_info *err);

/* Removes the directory for target with all its data (lib/remove-tree.h: no symlink is
 * followed, no mount inside is crossed).  0 when there is none. */
int local_ephemeral_remove(const char *target, struct error_info *err);

/* volume_ops.remove_orphans: removes each directory of the base (named as dir names make them)
 * that belongs to none of the n targets, is a directory (no symlink) and is no mount point,
 * as local_ephemeral_remove does.  The others stay, whatever they are. */
int local_ephemeral_remove_orphans(const char *const *targets, size_t n, unsigned *ret_removed,
				   struct error_info *err);
