/* rbd-cluster.h - what the rbd plugin asks the Ceph cluster itself, through librados and
 * librbd: does the pool and the image exist, which clients have the image open (its watchers,
 * the single-writer guard), and fencing a client of ours that died.
 *
 * Every call has a deadline: the connection sets client_mount_timeout, rados_mon_op_timeout
 * and rados_osd_op_timeout, so a dead or unreachable cluster fails with -ETIMEDOUT instead
 * of hanging a worker.  Opening the image with rbd_open_read_only registers no watcher and
 * takes no lock: the probe has no side effect on the image. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "error.h"

struct rbd_cluster;

struct rbd_credentials {
	const char *monitors; /* "host:port,host:port" */
	const char *user;     /* without "client." */
	const char *keyring;  /* a keyring file, or NULL */
	const char *keyfile;  /* a file holding the bare key, or NULL */
	const char *key;      /* the key itself (CSI secrets), or NULL; never logged */
};

struct rbd_watcher {
	char addr[128]; /* "127.0.0.1:0/3609330078" */
	int64_t id;	/* the client's global id: client.<id> */
};

/* Connects as client.<user>.  Errors name the reason a user can act on: -ETIMEDOUT (the
 * monitors did not answer), -EACCES/-EPERM (authentication refused), -ENOENT (the keyring or
 * key file is missing). */
int rbd_cluster_connect(const struct rbd_credentials *cred, uint64_t timeout_ms,
			struct rbd_cluster **ret, struct error_info *err);
struct rbd_cluster *rbd_cluster_free(struct rbd_cluster *c);

/* Opens pool/image read-only (no watcher, no lock) and lists its watchers into a new array
 * (*ret, caller frees) of *ret_n entries.  -ENOENT with "pool ... does not exist" or "image
 * ... does not exist in pool ...". */
int rbd_cluster_watchers(struct rbd_cluster *c, const char *pool, const char *image,
			 struct rbd_watcher **ret, size_t *ret_n, struct error_info *err);

/* Blocklists addr for expire_s seconds, so the OSDs drop its watch and lock at once instead
 * of after the watch timeout.  Needs the "osd blocklist" mon capability (profile rbd has it);
 * -EACCES otherwise. */
int rbd_cluster_blocklist(struct rbd_cluster *c, const char *addr, uint32_t expire_s);

static inline void rbd_cluster_freep(struct rbd_cluster **c)
{
	rbd_cluster_free(*c);
}
#define _cleanup_rbd_cluster_ __attribute__((cleanup(rbd_cluster_freep)))
