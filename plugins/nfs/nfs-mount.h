/* nfs-mount.h - the mount path of the nfs plugin: mounting an export (through libmount,
 * which runs mount.nfs), binding the node-wide mount into a pod, unmounting, and statfs of
 * a mounted export.  A dead server never blocks an agent thread: each of these runs in a
 * killable child (nfs-child.h) with a deadline (--nfs-timeout), and a stuck unmount is
 * escalated to MNT_FORCE, then MNT_DETACH, each after --nfs-unmount-escalate.  A mount goes
 * through the server's gate and reachability check first (nfs-server.h).
 *
 * Paths are canonical (nfs-mountinfo.h).  Messages name the source, the target and the
 * options (sensitive values masked by the caller's nfs_volume_finish).  Nothing here logs
 * above debug. */
#pragma once

#include <stdbool.h>

#include "error.h"
#include "nfs-spec.h"
#include "plugin.h"

/* Mounts v at t (canonical path canon), unless it is there already.  Returns 0, -EBUSY when
 * something else is mounted there, -EHOSTUNREACH while the server is down, -ETIMEDOUT, or
 * the -errno of the mount (-EACCES, -ENOENT, -EINVAL, -ECONNREFUSED, -ENODEV: no NFS client,
 * -EIO), err saying why in words a user can act on. */
int nfs_mount_at(const struct nfs_volume *v, const struct mount_target *t, const char *canon,
		 struct error_info *err);

/* Binds the node-wide mount source onto t (canonical path canon), read-only when read_only.
 * A bind that times out is undone.  Returns 0 or -errno (-ETIMEDOUT). */
int nfs_bind_at(const char *source, const struct mount_target *t, const char *canon, bool read_only,
		struct error_info *err);

/* Unmounts path (canonical), escalating when it hangs: umount2(0); after
 * --nfs-unmount-escalate MNT_FORCE; after as long again MNT_DETACH.  Stacked mounts are all
 * removed.  Returns 0, -EINVAL when nothing was mounted there, or -errno. */
int nfs_unmount(const char *path, struct error_info *err);

/* statfs of a mounted export within --nfs-timeout.  Returns 0, -ETIMEDOUT, -ESTALE (the
 * export was removed or recreated), or another -errno, err saying which. */
int nfs_statfs(const char *path, struct error_info *err);
