/* mount-notify.c - see mount-notify.h.
 *
 * Debian 12's headers (linux-libc-dev 6.1) have none of statmount, listmount or the fanotify
 * mount events, so the syscall numbers, constants and structures are spelled out here, laid
 * out as in the kernel's include/uapi/linux/mount.h and fanotify.h (checked by the static
 * asserts).  The structures get names of their own, so newer headers cannot clash. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "macro.h"
#include "mount-notify.h"

/* x86_64 (and every architecture of the common syscall table) */
#ifndef __NR_statmount
#define __NR_statmount 457
#endif
#ifndef __NR_listmount
#define __NR_listmount 458
#endif

#ifndef FAN_REPORT_MNT
#define FAN_REPORT_MNT 0x00004000
#endif
#ifndef FAN_MARK_MNTNS
#define FAN_MARK_MNTNS 0x00000110
#endif
#ifndef FAN_MNT_ATTACH
#define FAN_MNT_ATTACH 0x01000000
#endif
#ifndef FAN_MNT_DETACH
#define FAN_MNT_DETACH 0x02000000
#endif
#ifndef FAN_EVENT_INFO_TYPE_MNT
#define FAN_EVENT_INFO_TYPE_MNT 7
#endif

#ifndef STATMOUNT_SB_BASIC
#define STATMOUNT_SB_BASIC 0x00000001U
#endif
#ifndef STATMOUNT_MNT_BASIC
#define STATMOUNT_MNT_BASIC 0x00000002U
#endif
#ifndef STATMOUNT_MNT_ROOT
#define STATMOUNT_MNT_ROOT 0x00000008U
#endif
#ifndef STATMOUNT_MNT_POINT
#define STATMOUNT_MNT_POINT 0x00000010U
#endif
#ifndef STATMOUNT_FS_TYPE
#define STATMOUNT_FS_TYPE 0x00000020U
#endif
#ifndef STATMOUNT_MNT_OPTS
#define STATMOUNT_MNT_OPTS 0x00000080U
#endif
#ifndef STATMOUNT_FS_SUBTYPE
#define STATMOUNT_FS_SUBTYPE 0x00000100U
#endif
#ifndef STATMOUNT_SB_SOURCE
#define STATMOUNT_SB_SOURCE 0x00000200U
#endif
#ifndef MNT_ID_REQ_SIZE_VER0
#define MNT_ID_REQ_SIZE_VER0 24
#endif
#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#endif

/* struct mnt_id_req (the published version 0 is enough: the caller's own namespace) */
struct kernel_mnt_id_req {
	uint32_t size;
	uint32_t mnt_ns_fd; /* spare before 6.18 */
	uint64_t mnt_id;
	uint64_t param;
};

/* struct statmount: a fixed 512-byte part, then the strings its [str] fields point into */
struct kernel_statmount {
	uint32_t size;
	uint32_t mnt_opts; /* [str] */
	uint64_t mask;
	uint32_t sb_dev_major;
	uint32_t sb_dev_minor;
	uint64_t sb_magic;
	uint32_t sb_flags;
	uint32_t fs_type; /* [str] */
	uint64_t mnt_id;
	uint64_t mnt_parent_id;
	uint32_t mnt_id_old;
	uint32_t mnt_parent_id_old;
	uint64_t mnt_attr;
	uint64_t mnt_propagation;
	uint64_t mnt_peer_group;
	uint64_t mnt_master;
	uint64_t propagate_from;
	uint32_t mnt_root;  /* [str] */
	uint32_t mnt_point; /* [str] */
	uint64_t mnt_ns_id;
	uint32_t fs_subtype; /* [str] */
	uint32_t sb_source;  /* [str] */
	uint32_t opt_num;
	uint32_t opt_array;
	uint32_t opt_sec_num;
	uint32_t opt_sec_array;
	uint64_t supported_mask;
	uint32_t mnt_uidmap_num;
	uint32_t mnt_uidmap;
	uint32_t mnt_gidmap_num;
	uint32_t mnt_gidmap;
	uint64_t spare2[43];
	char str[];
};

/* struct fanotify_event_info_mnt */
struct kernel_fanotify_info_mnt {
	struct fanotify_event_info_header hdr;
	uint64_t mnt_id;
};

_Static_assert(sizeof(struct kernel_mnt_id_req) == MNT_ID_REQ_SIZE_VER0, "mnt_id_req v0");
_Static_assert(sizeof(struct kernel_statmount) == 512, "statmount fixed part");
_Static_assert(offsetof(struct kernel_statmount, mnt_id) == 40, "statmount.mnt_id");
_Static_assert(offsetof(struct kernel_statmount, mnt_attr) == 64, "statmount.mnt_attr");
_Static_assert(offsetof(struct kernel_statmount, mnt_point) == 108, "statmount.mnt_point");
_Static_assert(offsetof(struct kernel_statmount, sb_source) == 124, "statmount.sb_source");
_Static_assert(offsetof(struct kernel_statmount, mnt_gidmap) == 164, "statmount.mnt_gidmap");
_Static_assert(offsetof(struct kernel_fanotify_info_mnt, mnt_id) == 8, "info_mnt.mnt_id");
_Static_assert(sizeof(struct kernel_fanotify_info_mnt) == 16, "info_mnt size");

/* What the first kernel with statmount (6.8) knows. */
#define STATMOUNT_WANT_V1                                                                      \
	(STATMOUNT_SB_BASIC | STATMOUNT_MNT_BASIC | STATMOUNT_MNT_ROOT | STATMOUNT_MNT_POINT | \
	 STATMOUNT_FS_TYPE)
/* Enough for a mount point of PATH_MAX and its options; grown on EOVERFLOW. */
#define STATMOUNT_BUF_INITIAL 2048
#define STATMOUNT_BUF_MAX (16 * 1024 * 1024)
#define LISTMOUNT_PAGE 1024
#define EVENT_BUF_SIZE (16 * 1024)

static int sys_statmount(uint64_t id, uint64_t mask, struct kernel_statmount *buf, size_t size)
{
	struct kernel_mnt_id_req req = {
		.size = MNT_ID_REQ_SIZE_VER0,
		.mnt_id = id,
		.param = mask,
	};

	return syscall(__NR_statmount, &req, buf, size, 0) < 0 ? -errno : 0;
}

static ssize_t sys_listmount(uint64_t parent, uint64_t last, uint64_t *ids, size_t n)
{
	struct kernel_mnt_id_req req = {
		.size = MNT_ID_REQ_SIZE_VER0,
		.mnt_id = parent,
		.param = last,
	};
	long r = syscall(__NR_listmount, &req, ids, n, 0);

	return r < 0 ? -errno : r;
}

/* ---- probe ---- */

bool mount_notify_probe(char *reason, size_t reason_size)
{
	_cleanup_close_ int fan = -1, ns = -1;
	_cleanup_free_ struct kernel_statmount *sm = NULL;
	struct utsname u;
	const char *release = uname(&u) == 0 ? u.release : "?";
	uint64_t id;
	ssize_t n;
	int r;

	n = sys_listmount(MOUNT_LIST_ROOT, 0, &id, 1);
	if (n < 0) {
		snprintf(reason, reason_size, "no mount events: listmount(2): %s (kernel %s)",
			 strerror((int)-n), release);
		return false;
	}
	if (n != 1) {
		snprintf(reason, reason_size,
			 "no mount events: listmount(2) lists no mount (kernel %s)", release);
		return false;
	}
	sm = malloc(STATMOUNT_BUF_INITIAL);
	if (!sm) {
		snprintf(reason, reason_size, "no mount events: %s", strerror(ENOMEM));
		return false;
	}
	r = sys_statmount(id, STATMOUNT_MNT_BASIC, sm, STATMOUNT_BUF_INITIAL);
	if (r < 0) {
		snprintf(reason, reason_size, "no mount events: statmount(2): %s (kernel %s)",
			 strerror(-r), release);
		return false;
	}
	fan = fanotify_init(FAN_REPORT_MNT | FAN_CLOEXEC | FAN_NONBLOCK, 0);
	if (fan < 0) {
		snprintf(reason, reason_size,
			 "no mount events: fanotify_init(FAN_REPORT_MNT): %s (kernel %s)",
			 strerror(errno), release);
		return false;
	}
	ns = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	if (ns < 0) {
		snprintf(reason, reason_size, "no mount events: /proc/self/ns/mnt: %s",
			 strerror(errno));
		return false;
	}
	if (fanotify_mark(fan, FAN_MARK_ADD | FAN_MARK_MNTNS, FAN_MNT_ATTACH | FAN_MNT_DETACH, ns,
			  NULL) < 0) {
		snprintf(reason, reason_size,
			 "no mount events: fanotify_mark(FAN_MARK_MNTNS): %s (kernel %s)",
			 strerror(errno), release);
		return false;
	}
	snprintf(reason, reason_size,
		 "mount events: fanotify FAN_MNT_ATTACH/DETACH, statmount(2), listmount(2) "
		 "(kernel %s)",
		 release);
	return true;
}

/* ---- events ---- */

struct mount_notify {
	int fd;
	size_t pos, len; /* undelivered events in buf[pos..len) */
	char buf[EVENT_BUF_SIZE] __attribute__((aligned(8)));
};

int mount_notify_new(int ns_fd, struct mount_notify **ret_notify)
{
	_cleanup_close_ int fd = -1, own_ns = -1;
	struct mount_notify *notify;

	fd = fanotify_init(FAN_REPORT_MNT | FAN_CLOEXEC | FAN_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (ns_fd < 0) {
		own_ns = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
		if (own_ns < 0)
			return -errno;
		ns_fd = own_ns;
	}
	if (fanotify_mark(fd, FAN_MARK_ADD | FAN_MARK_MNTNS, FAN_MNT_ATTACH | FAN_MNT_DETACH, ns_fd,
			  NULL) < 0)
		return -errno;
	notify = calloc(1, sizeof(*notify));
	if (!notify)
		return -ENOMEM;
	notify->fd = TAKE_FD(fd);
	*ret_notify = notify;
	return 0;
}

struct mount_notify *mount_notify_free(struct mount_notify *notify)
{
	if (!notify)
		return NULL;
	if (notify->fd >= 0)
		close(notify->fd);
	free(notify);
	return NULL;
}

int mount_notify_get_fd(const struct mount_notify *notify)
{
	return notify->fd;
}

/* Turns one event record into ev.  Returns 1 when it is one to deliver, 0 to skip. */
static int event_parse(const struct fanotify_event_metadata *meta, struct mount_event *ev)
{
	const char *p = (const char *)meta + meta->metadata_len;
	const char *end = (const char *)meta + meta->event_len;

	*ev = (struct mount_event){ 0 };
	if (meta->mask & FAN_Q_OVERFLOW) {
		ev->mask = MOUNT_EVENT_OVERFLOW;
		return 1;
	}
	if (meta->mask & FAN_MNT_ATTACH)
		ev->mask |= MOUNT_EVENT_ATTACH;
	if (meta->mask & FAN_MNT_DETACH)
		ev->mask |= MOUNT_EVENT_DETACH;
	while (end - p >= (ptrdiff_t)sizeof(struct fanotify_event_info_header)) {
		struct fanotify_event_info_header hdr;

		memcpy(&hdr, p, sizeof(hdr));
		if (hdr.len < sizeof(hdr) || hdr.len > end - p)
			break;
		if (hdr.info_type == FAN_EVENT_INFO_TYPE_MNT &&
		    hdr.len >= sizeof(struct kernel_fanotify_info_mnt)) {
			memcpy(&ev->id, p + offsetof(struct kernel_fanotify_info_mnt, mnt_id),
			       sizeof(ev->id));
			return ev->mask ? 1 : 0;
		}
		p += hdr.len;
	}
	return 0;
}

int mount_notify_read_events(struct mount_notify *notify,
			     int (*cb)(const struct mount_event *event, void *userdata),
			     void *userdata)
{
	int count = 0;

	for (;;) {
		while (notify->pos < notify->len) {
			const struct fanotify_event_metadata *meta =
				(const void *)(notify->buf + notify->pos);
			size_t left = notify->len - notify->pos;
			struct mount_event ev;
			int r;

			if (left < FAN_EVENT_METADATA_LEN ||
			    meta->event_len < FAN_EVENT_METADATA_LEN || meta->event_len > left ||
			    meta->vers != FANOTIFY_METADATA_VERSION) {
				/* Cannot happen with a kernel that speaks this version. */
				notify->pos = notify->len = 0;
				return -EPROTO;
			}
			if (event_parse(meta, &ev)) {
				r = cb(&ev, userdata);
				if (r < 0)
					return r; /* this event is delivered again next time */
				count++;
			}
			/* A mount event has no fd; close anything else so that it cannot leak. */
			if (meta->fd >= 0)
				close(meta->fd);
			notify->pos += meta->event_len;
		}
		notify->pos = notify->len = 0;

		ssize_t n = read(notify->fd, notify->buf, sizeof(notify->buf));
		if (n < 0) {
			if (errno == EAGAIN)
				return count;
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return count;
		notify->len = (size_t)n;
	}
}

/* ---- statmount ---- */

bool mount_stat_is_read_only(const struct mount_stat *info)
{
	return info->attr & MOUNT_ATTR_RDONLY;
}

/* The string at offset off of sm->str, if the kernel set bit in sm->mask and it lies inside
 * the strsize bytes it wrote there. */
static const char *sm_string(const struct kernel_statmount *sm, size_t strsize, uint64_t bit,
			     uint32_t off)
{
	if (!(sm->mask & bit) || off >= strsize || !memchr(sm->str + off, 0, strsize - off))
		return NULL;
	return sm->str + off;
}

/* The copy of a string of sm in the strings of st (copied from sm->str to strs). */
static const char *rebase(const struct kernel_statmount *sm, const char *p, char *strs)
{
	return p ? strs + (p - sm->str) : NULL;
}

int mount_stat_by_id(uint64_t id, struct mount_stat **ret_info)
{
	return mount_stat_by_id_want(id, MOUNT_STAT_TARGET | MOUNT_STAT_DETAILS, ret_info);
}

int mount_stat_by_id_want(uint64_t id, unsigned want_what, struct mount_stat **ret_info)
{
	union {
		struct kernel_statmount sm;
		char bytes[STATMOUNT_BUF_INITIAL];
	} stackbuf;
	_cleanup_free_ char *heap = NULL;
	struct kernel_statmount *sm = &stackbuf.sm;
	size_t size = sizeof(stackbuf), strsize, extra = 0;
	uint64_t want = STATMOUNT_SB_BASIC | STATMOUNT_MNT_BASIC;
	const char *target, *root, *fstype, *source, *options, *sub;
	struct mount_stat *st;
	char *strs;
	int r;

	if (want_what & MOUNT_STAT_TARGET)
		want |= STATMOUNT_MNT_POINT;
	if (want_what & MOUNT_STAT_DETAILS)
		want |= STATMOUNT_MNT_ROOT | STATMOUNT_FS_TYPE | STATMOUNT_MNT_OPTS |
			STATMOUNT_FS_SUBTYPE | STATMOUNT_SB_SOURCE;
	/* The kernel's answer goes to the stack, or to the heap when it needs more; the result
	 * is then one allocation the size of what it holds. */
	for (;;) {
		r = sys_statmount(id, want, sm, size);
		if (r == -EINVAL && (want & ~(uint64_t)STATMOUNT_WANT_V1)) {
			/* A kernel that rejects the flags it does not know. */
			want &= STATMOUNT_WANT_V1;
			continue;
		}
		if (r != -EOVERFLOW || size >= STATMOUNT_BUF_MAX)
			break;
		size *= 2;
		free(heap);
		heap = malloc(size);
		if (!heap)
			return -ENOMEM;
		sm = (struct kernel_statmount *)heap;
	}
	if (r < 0)
		return r;

	/* size: what the kernel wrote, strings included */
	strsize = sm->size > sizeof(*sm) && sm->size <= size ? sm->size - sizeof(*sm)
							     : size - sizeof(*sm);
	target = sm_string(sm, strsize, STATMOUNT_MNT_POINT, sm->mnt_point);
	root = sm_string(sm, strsize, STATMOUNT_MNT_ROOT, sm->mnt_root);
	fstype = sm_string(sm, strsize, STATMOUNT_FS_TYPE, sm->fs_type);
	source = sm_string(sm, strsize, STATMOUNT_SB_SOURCE, sm->sb_source);
	options = sm_string(sm, strsize, STATMOUNT_MNT_OPTS, sm->mnt_opts);
	sub = sm_string(sm, strsize, STATMOUNT_FS_SUBTYPE, sm->fs_subtype);
	if (((want_what & MOUNT_STAT_TARGET) && !target) ||
	    ((want_what & MOUNT_STAT_DETAILS) && (!root || !fstype)))
		return -EPROTO;
	/* mountinfo shows "type.subtype" (fuse.sshfs): built after the kernel's strings. */
	if (sub && *sub)
		extra = strlen(fstype) + 1 + strlen(sub) + 1;

	st = malloc(sizeof(*st) + strsize + extra);
	if (!st)
		return -ENOMEM;
	strs = (char *)(st + 1);
	memcpy(strs, sm->str, strsize);
	*st = (struct mount_stat){
		.id = sm->mnt_id,
		.parent_id = sm->mnt_parent_id,
		.id_old = sm->mnt_id_old,
		.parent_id_old = sm->mnt_parent_id_old,
		.dev = makedev(sm->sb_dev_major, sm->sb_dev_minor),
		.attr = sm->mnt_attr,
		.propagation = sm->mnt_propagation,
		.target = rebase(sm, target, strs),
		.root = rebase(sm, root, strs),
		.fstype = rebase(sm, fstype, strs),
		.source = source && *source ? rebase(sm, source, strs) : NULL,
		.options = options && *options ? rebase(sm, options, strs) : NULL,
	};
	if (extra) {
		snprintf(strs + strsize, extra, "%s.%s", fstype, sub);
		st->fstype = strs + strsize;
	}
	*ret_info = st;
	return 0;
}

struct mount_stat *mount_stat_free(struct mount_stat *info)
{
	free(info);
	return NULL;
}

void mount_stat_array_free(struct mount_stat **infos, size_t n)
{
	if (!infos)
		return;
	for (size_t i = 0; i < n; i++)
		mount_stat_free(infos[i]);
	free(infos);
}

/* ---- listmount ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int mount_list(uint64_t parent_id, uint64_t **ret_ids, size_t *ret_n)
{
	_cleanup_free_ uint64_t *ids = NULL;
	size_t n = 0, cap = 0;
	uint64_t last = 0;

	for (;;) {
		if (cap - n < LISTMOUNT_PAGE) {
			uint64_t *ni = realloc(ids, (cap + LISTMOUNT_PAGE * 4) * sizeof(*ids));

			if (!ni)
				return -ENOMEM;
			ids = ni;
			cap += LISTMOUNT_PAGE * 4;
		}
		ssize_t got = sys_listmount(parent_id, last, ids + n, cap - n);
		if (got < 0)
			return (int)got;
		if (got == 0)
			break;
		n += (size_t)got;
		last = ids[n - 1];
	}
	if (n == 0) {
		free(ids);
		ids = NULL;
	}
	/* The kernel lists in ID order (since 6.10); sort only if one ever does not. */
	for (size_t i = 1; i < n; i++) {
		if (ids[i - 1] >= ids[i]) {
			qsort(ids, n, sizeof(*ids), cmp_u64);
			break;
		}
	}
	*ret_ids = TAKE_PTR(ids);
	*ret_n = n;
	return 0;
}

int mount_ids_diff(const uint64_t *old_ids, size_t n_old, const uint64_t *new_ids, size_t n_new,
		   int (*cb)(uint64_t id, bool added, void *userdata), void *userdata)
{
	size_t i = 0, j = 0;
	int count = 0, r;

	while (i < n_old || j < n_new) {
		if (j == n_new || (i < n_old && old_ids[i] < new_ids[j])) {
			r = cb(old_ids[i++], false, userdata);
		} else if (i == n_old || new_ids[j] < old_ids[i]) {
			r = cb(new_ids[j++], true, userdata);
		} else {
			i++;
			j++;
			continue;
		}
		if (r < 0)
			return r;
		count++;
	}
	return count;
}

/* Whether path is prefix or below it. */
static bool path_is_below(const char *path, const char *prefix, size_t plen)
{
	if (plen == 1 && prefix[0] == '/')
		return path[0] == '/';
	return strncmp(path, prefix, plen) == 0 && (path[plen] == '\0' || path[plen] == '/');
}

/* The mount whose subtree holds every mount at or below prefix: when prefix is a mount point,
 * the lowest of the mounts stacked on it (ret_at_prefix: it is one of them), else the mount
 * that holds prefix.  So a prefix that is itself a mount point costs only its own subtree. */
static int prefix_subtree(const char *prefix, uint64_t *ret_id, bool *ret_at_prefix)
{
	struct statx stx;
	uint64_t id;

	if (statx(AT_FDCWD, prefix, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_MNT_ID_UNIQUE,
		  &stx) < 0)
		return -errno;
	if (!(stx.stx_mask & STATX_MNT_ID_UNIQUE))
		return -EOPNOTSUPP;
	id = stx.stx_mnt_id;
	if (!(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) ||
	    !(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT)) {
		*ret_id = id;
		*ret_at_prefix = false;
		return 0;
	}
	/* statx saw the top of the stack: walk down while the parent is mounted on prefix too. */
	for (int depth = 0; depth < 1000; depth++) {
		struct mount_stat *st = NULL, *parent = NULL;
		bool down;
		int r;

		r = mount_stat_by_id(id, &st);
		if (r < 0)
			return r;
		down = st->parent_id != st->id && mount_stat_by_id(st->parent_id, &parent) == 0 &&
		       streq(parent->target, prefix);
		if (down)
			id = st->parent_id;
		mount_stat_free(st);
		mount_stat_free(parent);
		if (!down)
			break;
	}
	*ret_id = id;
	*ret_at_prefix = true;
	return 0;
}

int mount_list_below(const char *prefix, struct mount_stat ***ret_infos, size_t *ret_n)
{
	_cleanup_free_ uint64_t *ids = NULL;
	struct mount_stat **infos = NULL;
	size_t plen = strlen(prefix), n_ids = 0, n = 0;
	uint64_t root = MOUNT_LIST_ROOT;
	bool at_prefix = false;
	int r;

	if (plen == 0 || prefix[0] != '/' || (plen > 1 && prefix[plen - 1] == '/'))
		return -EINVAL;
	if (plen > 1 && prefix_subtree(prefix, &root, &at_prefix) < 0)
		root = MOUNT_LIST_ROOT; /* prefix cannot be reached: look at every mount */
	r = mount_list(root, &ids, &n_ids);
	if (r == -ENOENT && root != MOUNT_LIST_ROOT) { /* its mount went away meanwhile */
		root = MOUNT_LIST_ROOT;
		at_prefix = false;
		r = mount_list(root, &ids, &n_ids);
	}
	if (r < 0)
		return r;
	/* The subtree's own root is not in its listing. */
	if (at_prefix) {
		uint64_t *ni = realloc(ids, (n_ids + 1) * sizeof(*ids));

		if (!ni)
			return -ENOMEM;
		ids = ni;
		ids[n_ids++] = root;
	}
	for (size_t i = 0; i < n_ids; i++) {
		struct mount_stat *info;

		r = mount_stat_by_id(ids[i], &info);
		if (r == -ENOENT)
			continue;
		if (r < 0)
			goto fail;
		if (!path_is_below(info->target, prefix, plen)) {
			mount_stat_free(info);
			continue;
		}
		if (n % 64 == 0) {
			struct mount_stat **ni = realloc(infos, (n + 64) * sizeof(*infos));

			if (!ni) {
				mount_stat_free(info);
				r = -ENOMEM;
				goto fail;
			}
			infos = ni;
		}
		infos[n++] = info;
	}
	*ret_infos = infos;
	*ret_n = n;
	return 0;
fail:
	mount_stat_array_free(infos, n);
	return r;
}
