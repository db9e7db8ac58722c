/* local-path-policy.h - which host paths a `local` volume may hand to a pod read-write: never
 * the host's root, a pseudo-filesystem (proc, sysfs, devtmpfs, cgroup, securityfs, debugfs,
 * tracefs, bpf, ...), the agent's own root, state or kubelet dir; with --local-path-prefix
 * (repeatable; the config key of the same name) only paths below one of the prefixes.  A
 * block device under /dev stays allowed: it is checked as a device (local.c), never bound as
 * a directory.  On by default; see docs/hardening.md. */
#pragma once

#include "error.h"
#include "plugin-option.h"

/* The lexical checks of path (absolute, normalized), at validation: -EPERM with err naming
 * the reason, 0 when allowed so far. */
int local_path_policy_check(const char *path, struct error_info *err);

/* The checks of the directory path opened as fd, just before it is bound: the filesystem it
 * is on (fstatfs: no pseudo-filesystem) and no directory under /dev.  -EPERM with err. */
int local_path_policy_check_dir(int fd, const char *path, struct error_info *err);

/* local_path_policy_check(), and path must lie below a configured --local-path-prefix (none
 * configured refuses every path): for directories the agent itself makes and deletes
 * (local-provision.h).  -EPERM with err naming the reason. */
int local_path_policy_check_below_prefix(const char *path, struct error_info *err);

/* --local-path-prefix: each call adds a prefix local volumes must lie below; "" clears the
 * list.  Returns 0 or -EINVAL with err set. */
int local_path_policy_add_prefix(const char *value, uint64_t ms, struct error_info *err);
