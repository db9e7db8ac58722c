/* plugin-settings.h - the agent configuration the plugins read (their own config keys), set
 * once by `volagent run` before the reconciler starts and read-only afterwards, so plugins
 * stay stateless const vtables.  Tests may set them too. */
#pragma once

#include <stdint.h>

struct plugin_settings {
	/* nfs */
	const char *nfs_mode;			/* "shared" (default) or "direct" */
	uint64_t nfs_op_timeout_ms;		/* a mount, unmount or statfs gives up after this */
	uint64_t nfs_connect_timeout_ms;	/* the reachability check's TCP connect */
	uint64_t nfs_unmount_escalate_ms;	/* then MNT_FORCE, then MNT_DETACH */
	/* rbd */
	const char *rbd_attach_methods;		/* tried in order: "krbd,nbd,fuse" */
	uint64_t rbd_op_timeout_ms;		/* librados/librbd calls and attach helpers */
	const char *rbd_run_dir;		/* FUSE dirs and key files, under the state dir */
};

/* The current settings (defaults until plugin_settings_set is called). */
const struct plugin_settings *plugin_settings(void);
/* Copies s (the strings must outlive the agent's run). */
void plugin_settings_set(const struct plugin_settings *s);
