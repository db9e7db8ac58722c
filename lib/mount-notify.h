/* mount-notify.h - the kernel's mount API by mount ID: fanotify mount events on a mount
 * namespace (FAN_MNT_ATTACH / FAN_MNT_DETACH, Linux 6.15+), statmount(2) of one mount and
 * listmount(2) of a namespace's mounts (Linux 6.8+).
 *
 * With these the agent's view of the mount table can follow the kernel one mount at a time
 * (an event, then a statmount of that mount) instead of re-reading the text of every mount on
 * the node.  Older kernels (Debian's 6.1) have none of it: mount_notify_probe() says so once
 * at start-up, and the caller keeps libmount's monitor and mountinfo.  Nothing here logs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* listmount()'s "the root mount": list the whole namespace. */
#define MOUNT_LIST_ROOT UINT64_MAX

/* Whether this kernel has fanotify mount events and statmount/listmount, and the caller may
 * use them (CAP_SYS_ADMIN).  Writes one line for the start-up log to reason (what is there,
 * or the first thing missing and why: "listmount(2): Function not implemented", ...). */
bool mount_notify_probe(char *reason, size_t reason_size);

/* What an event says happened to a mount of the marked namespace. */
enum {
	MOUNT_EVENT_ATTACH = 1 << 0,   /* the mount appeared in the namespace */
	MOUNT_EVENT_DETACH = 1 << 1,   /* the mount left it (both bits: moved within it) */
	MOUNT_EVENT_OVERFLOW = 1 << 2, /* events were lost: read the table again (id is 0) */
};

struct mount_event {
	unsigned int mask; /* MOUNT_EVENT_* */
	uint64_t id;	   /* the mount's 64-bit unique ID (statmount's mnt_id) */
};

struct mount_notify;

/* A fanotify group (FAN_REPORT_MNT, non-blocking, close-on-exec) marked with FAN_MARK_MNTNS
 * for attach and detach on the mount namespace ns_fd refers to (an fd on /proc/PID/ns/mnt),
 * or on the caller's own when ns_fd < 0.  The group holds no reference that keeps the
 * namespace alive.  Returns 0 or -errno (-EINVAL: the kernel has no mount events;
 * -EPERM: no CAP_SYS_ADMIN over that namespace). */
int mount_notify_new(int ns_fd, struct mount_notify **ret_notify);
struct mount_notify *mount_notify_free(struct mount_notify *notify);

/* The fd to poll for EPOLLIN: readable while events are queued. */
int mount_notify_get_fd(const struct mount_notify *notify);

/* Delivers every queued event in the kernel's order to cb, then returns the number
 * delivered (0: nothing was queued).  A queue overflow (FAN_Q_OVERFLOW: more events than the
 * group's queue holds, 16384 by default) is delivered as one event with MOUNT_EVENT_OVERFLOW
 * after the events that were kept.  When cb returns a negative errno, reading stops and that
 * is returned; events not yet delivered stay for the next call.  Never blocks.
 * Returns: the count, or negative errno. */
int mount_notify_read_events(struct mount_notify *notify,
			     int (*cb)(const struct mount_event *event, void *userdata),
			     void *userdata);

/* One mount as statmount(2) describes it.  The strings live in the same allocation. */
struct mount_stat {
	uint64_t id;		/* 64-bit unique mount ID, as in fanotify events */
	uint64_t parent_id;	/* the parent's; equal to id for the namespace root */
	uint32_t id_old;	/* the reusable ID: mountinfo's first field */
	uint32_t parent_id_old; /* mountinfo's second field */
	dev_t dev;		/* the superblock's device (mountinfo's major:minor) */
	uint64_t attr;		/* MOUNT_ATTR_*: RDONLY, NOSUID, NODEV, NOEXEC, atime... */
	uint64_t propagation;	/* MS_SHARED, MS_SLAVE, MS_PRIVATE or MS_UNBINDABLE */
	const char *target;	/* the mount point, from the caller's root */
	const char *root;	/* the mounted directory, from the filesystem's root */
	const char *fstype;	/* "ext4", "fuse.sshfs" (type.subtype, as mountinfo) */
	const char *source;	/* "/dev/sda1", "server:/export"; NULL if the kernel has none */
	const char *options;	/* superblock options ("size=1024k,mode=755"); NULL if none */
};

/* Whether the mount itself is read-only (MOUNT_ATTR_RDONLY; not the superblock's flag). */
bool mount_stat_is_read_only(const struct mount_stat *info);

/* statmount(2) of the mount with the 64-bit unique id in the caller's namespace.  Returns 0,
 * -ENOENT when no such mount is (any longer) in the namespace, or -errno. */
int mount_stat_by_id(uint64_t id, struct mount_stat **ret_info);
/* What mount_stat_by_id_want() asks the kernel for besides the IDs, the device and the
 * attributes (always there). */
enum {
	MOUNT_STAT_TARGET = 1 << 0,  /* target */
	MOUNT_STAT_DETAILS = 1 << 1, /* root, fstype, source, options */
};
/* The same, reading only what want says (the strings not asked for are NULL): each string
 * costs the kernel a formatting, a mount point the most.  mount_stat_by_id() wants all. */
int mount_stat_by_id_want(uint64_t id, unsigned want, struct mount_stat **ret_info);
struct mount_stat *mount_stat_free(struct mount_stat *info);
/* Frees n infos and the array. */
void mount_stat_array_free(struct mount_stat **infos, size_t n);

/* listmount(2) of the mounts below the mount parent_id, its whole subtree (MOUNT_LIST_ROOT:
 * every mount of the caller's namespace), paging through the kernel's list.  The array is
 * malloc'ed (NULL when empty) and sorted by increasing ID.  Returns 0 or -errno (-ENOENT: no
 * mount parent_id). */
int mount_list(uint64_t parent_id, uint64_t **ret_ids, size_t *ret_n);

/* Compares two sorted ID lists, as mount_list() returns them: cb(id, true) for each ID only in
 * new_ids (a mount that appeared), cb(id, false) for each only in old_ids (one that went).
 * Unique IDs are never reused, so an ID in both is the same mount: a full resync need not
 * statmount it again.  When cb returns a negative errno the walk stops and returns it.
 * Returns: the number of differences, or negative errno. */
int mount_ids_diff(const uint64_t *old_ids, size_t n_old, const uint64_t *new_ids, size_t n_new,
		   int (*cb)(uint64_t id, bool added, void *userdata), void *userdata);

/* The mounts whose mount point is prefix or lies under prefix/ (a path boundary: /a/bc is
 * not under /a/b), each statmount'ed.  prefix is absolute and canonical (mount points are
 * reported without symlinks), without a trailing slash ("/" itself is allowed).  Only one
 * subtree is listed: when prefix is a mount point, that of the lowest mount stacked on it,
 * which costs only the mounts below prefix (the way to make a tree cheap to read: bind-mount
 * it onto itself); else that of the mount holding prefix, every mount of which is
 * statmount'ed to learn its mount point (about 4 us each).  Mounts covered by a mount on an
 * ancestor of prefix are not seen; mounts that go away meanwhile are left out.  Returns 0 or
 * -errno; on success the caller frees the result with mount_stat_array_free(). */
int mount_list_below(const char *prefix, struct mount_stat ***ret_infos, size_t *ret_n);
