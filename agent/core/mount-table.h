/* mount-table.h - the mounts of the agent's trees (its root dir, the kubelet dir), keyed by
 * mount ID and indexed by target, and the monitor that tells when they change.
 *
 * Two sources, chosen once at start-up by mount_notify_probe():
 *   - events (Linux 6.15+): fanotify mount events are applied one mount at a time (a
 *     statmount of the mount that appeared, a removal by ID of one that went); a full read
 *     is a listmount diffed by ID that statmounts only the new mounts;
 *   - fallback (older kernels): libmount's monitor says the table changed, and a full read
 *     parses /proc/self/mountinfo, diffed by (32-bit ID, target).
 * Either way entries are kept across reads, mounts outside the trees are not indexed, and
 * every change is reported as the target it happened on, so the caller updates only what
 * changed.  Each read or batch of events bumps a generation number so that facts learned
 * after it can be told from facts the table already reflects.  Nothing here logs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "hashmap.h"

/* One mount; its strings live in the same allocation.  fstype, source and root are "" for a
 * mount below a lean prefix read by statmount (mount_table_set_lean). */
struct mount_info {
	const char *target;
	const char *fstype;
	const char *source;
	const char *root;   /* the path inside the filesystem that is mounted here */
	uint64_t mnt_id;    /* the key: the 64-bit unique ID (events), else id */
	uint64_t parent_id; /* the parent's, in the same space as mnt_id */
	dev_t devno;
	int id;		       /* mountinfo's (reusable, 32-bit) mount ID */
	uint32_t target_hash;  /* hashmap_hash(target), computed once */
	unsigned stacked : 31; /* how many mounts share this target (the index keeps the top) */
	bool read_only : 1;    /* the mount's own (VFS) read-only flag */
	/* private to mount-table.c */
	struct mount_info *next_on_target;
	uint64_t seen;
	const char *key; /* mnt_id in decimal */
};

struct mount_table;

/* Called for each target whose mounts changed (one appeared, went, or another became the top
 * of its stack); t already shows the change.  hash is hashmap_hash(target). */
typedef void (*mount_table_changed_fn)(const struct mount_table *t, const char *target,
				       uint32_t hash, void *userdata);

/* A table of the mounts at or below the n trees (absolute, canonical, no trailing slash);
 * n == 0: every mount.  The strings are copied. */
struct mount_table *mount_table_new(const char *const *trees, size_t n);
struct mount_table *mount_table_free(struct mount_table *t);
/* Full reads use listmount/statmount (set when the monitor has mount events). */
void mount_table_use_listmount(struct mount_table *t, bool on);
/* Mounts at or below these n prefixes (absolute, canonical, no trailing slash: pod volume
 * dirs, whose users need only the target, IDs and flags) are read by statmount without their
 * fstype, source and root, which the kernel would format for each.  The strings are copied.
 * Returns 0 or -ENOMEM. */
int mount_table_set_lean(struct mount_table *t, const char *const *prefixes, size_t n);
/* A full read: listmount + statmount of new IDs, or /proc/self/mountinfo (path, for tests)
 * through libmount.  changed (may be NULL) gets each target that changed since the last
 * read.  On failure the old index is kept.  Returns 0 or -errno with err set. */
int mount_table_refresh(struct mount_table *t, const char *path, mount_table_changed_fn changed,
			void *userdata, struct error_info *err);
/* The visible (top) mount at target, or NULL.  _hashed: hash is hashmap_hash(target). */
const struct mount_info *mount_table_get(const struct mount_table *t, const char *target);
const struct mount_info *mount_table_get_hashed(const struct mount_table *t, const char *target,
						uint32_t hash);
/* target -> top mount_info, for walks. */
const struct hashmap *mount_table_entries(const struct mount_table *t);
uint64_t mount_table_generation(const struct mount_table *t);
/* Targets indexed (a stack counts once). */
size_t mount_table_size(const struct mount_table *t);
/* Whether path is one of the trees or lies below one. */
bool mount_table_covers(const struct mount_table *t, const char *path);

struct mount_monitor;

/* The mount events of the caller's mount namespace when try_events is set and
 * mount_notify_probe() says the kernel has them, else libmount's monitor of the kernel table
 * (mnt_monitor_enable_kernel).  reason gets the probe's one line, for the start-up log. */
struct mount_monitor *mount_monitor_new(bool try_events, char *reason, size_t reason_size,
					struct error_info *err);
struct mount_monitor *mount_monitor_free(struct mount_monitor *m);
bool mount_monitor_has_events(const struct mount_monitor *m);
int mount_monitor_get_fd(const struct mount_monitor *m);
/* What mount_monitor_dispatch() asks of the caller besides 0 (nothing) or -errno. */
enum {
	MOUNT_MONITOR_READ = 1,	  /* read the table (fallback: it changed; events: lost) */
	MOUNT_MONITOR_UNREAD = 2, /* mounts attached and went before they could be read */
};

/* Consumes what is pending.  Fallback: returns MOUNT_MONITOR_READ when the table changed (the
 * caller reads it with mount_table_refresh), else 0.  Events: applies them to t, reporting
 * each changed target to changed, and returns MOUNT_MONITOR_READ when events were lost (a
 * queue overflow: the caller makes a full read now), MOUNT_MONITOR_UNREAD when a mount went
 * before its statmount (its target is unknown: a full read, of the actual state too, can say
 * what the caller believed was there), else 0.  Returns -errno on failure. */
int mount_monitor_dispatch(struct mount_monitor *m, struct mount_table *t,
			   mount_table_changed_fn changed, void *userdata);
