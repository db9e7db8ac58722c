/* mount-table.h - the node's mount table as an index by target, read through libmount, and
 * libmount's monitor telling when it changed.
 *
 * The reconciler refreshes the index when the monitor fires (rate-limited while a burst of
 * its own mounts is in progress), never per check.  Each refresh bumps a generation number so
 * that facts learned after a refresh can be told from facts the table already reflects. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "hashmap.h"

struct mount_info {
	char *target;
	int id;
	dev_t devno;
	bool read_only; /* the mount's own (VFS) read-only flag */
	char *fstype;
	char *source;
	char *root;	  /* the path inside the filesystem that is mounted here */
	unsigned stacked; /* how many mounts share this target (the index keeps the top) */
};

struct mount_table;

struct mount_table *mount_table_new(void);
struct mount_table *mount_table_free(struct mount_table *t);
/* Re-reads /proc/self/mountinfo (or path, for tests).  On failure the old index is kept. */
int mount_table_refresh(struct mount_table *t, const char *path, struct error_info *err);
const struct mount_info *mount_table_get(const struct mount_table *t, const char *target);
const struct hashmap *mount_table_entries(const struct mount_table *t);
uint64_t mount_table_generation(const struct mount_table *t);
size_t mount_table_size(const struct mount_table *t);

struct mount_monitor;

/* Watches the kernel mount table (mnt_monitor_enable_kernel). */
struct mount_monitor *mount_monitor_new(struct error_info *err);
struct mount_monitor *mount_monitor_free(struct mount_monitor *m);
int mount_monitor_get_fd(const struct mount_monitor *m);
/* Consumes pending events; returns 1 when the table changed, 0 when not, -errno. */
int mount_monitor_drain(struct mount_monitor *m);
