/* rbd-ceph.h - the Ceph client itself: librados and librbd, loaded with dlopen() on first use.
 * Only the `volagent rbd-helper` process calls these (agent/cmd-rbd-helper.c); the daemon
 * reaches them through rbd-cluster.h, which runs that helper, so the daemon neither links
 * nor maps the Ceph libraries and a hang or crash inside them cannot touch it.
 *
 * Every call has a deadline: the connection sets client_mount_timeout, rados_mon_op_timeout
 * and rados_osd_op_timeout, so a dead or unreachable cluster fails with -ETIMEDOUT instead
 * of hanging.  Opening the image with rbd_open_read_only registers no watcher and takes no
 * lock: the probe has no side effect on the image. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "rbd-cluster.h"

/* The sonames dlopen()ed, also listed in the binary's .note.dlopen (scripts/build-image
 * reads it to put their packages in the image). */
#define RBD_CEPH_LIBRADOS "librados.so.2"
#define RBD_CEPH_LIBRBD "librbd.so.1"

struct rbd_ceph;

/* Loads librados and librbd (once per process) and resolves the symbols used here.
 * Returns 0, or -EOPNOTSUPP with err naming the library or symbol that is missing. */
int rbd_ceph_dlopen(struct error_info *err);

/* Connects as client.<user>.  Errors name the reason a user can act on: -ETIMEDOUT (the
 * monitors did not answer), -EACCES (authentication refused), -ENOENT (the keyring or
 * key file is missing), -EOPNOTSUPP (the Ceph libraries are not installed). */
int rbd_ceph_connect(const struct rbd_credentials *cred, uint64_t timeout_ms, struct rbd_ceph **ret,
		     struct error_info *err);
struct rbd_ceph *rbd_ceph_free(struct rbd_ceph *c);

/* Opens pool/image read-only (no watcher, no lock) and lists its watchers into a new array
 * (*ret, caller frees) of *ret_n entries.  -ENOENT with "pool ... does not exist" or "image
 * ... does not exist in pool ...". */
int rbd_ceph_watchers(struct rbd_ceph *c, const char *pool, const char *image,
		      struct rbd_watcher **ret, size_t *ret_n, struct error_info *err);

/* Blocklists addr for expire_s seconds.  Needs the "osd blocklist" mon capability (profile
 * rbd has it); -EACCES otherwise. */
int rbd_ceph_blocklist(struct rbd_ceph *c, const char *addr, uint32_t expire_s,
		       struct error_info *err);

static inline void rbd_ceph_freep(struct rbd_ceph **c)
{
	rbd_ceph_free(*c);
}
#define _cleanup_rbd_ceph_ __attribute__((cleanup(rbd_ceph_freep)))
