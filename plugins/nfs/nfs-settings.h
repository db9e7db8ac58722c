/* nfs-settings.h - the nfs plugin's settings (--nfs-mode, --nfs-timeout, ...): the table of
 * its options that `volagent run` reads as flags and config keys (plugin-option.h), and the
 * values they set.  Set before the agent starts, read-only afterwards, so read without a
 * lock. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "plugin-option.h"

struct nfs_settings {
	bool direct;		      /* --nfs-mode direct: one NFS mount per pod */
	uint64_t op_timeout_ms;	      /* a mount, unmount or statfs gives up after this */
	uint64_t connect_timeout_ms;  /* the reachability check's TCP connect */
	uint64_t unmount_escalate_ms; /* then MNT_FORCE, then MNT_DETACH */
};

extern struct nfs_settings nfs_settings;

/* The plugin's option table (struct volume_plugin's options). */
extern const struct plugin_option nfs_options[];
