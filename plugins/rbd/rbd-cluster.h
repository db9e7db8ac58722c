/* rbd-cluster.h - what the rbd plugin asks the Ceph cluster itself: does the pool and the
 * image exist, which clients have the image open (its watchers, the single-writer guard),
 * and fencing a client of ours that died.
 *
 * The daemon does not talk to Ceph itself: each call runs `volagent rbd-helper <op>` (the
 * running binary, /proc/self/exe, exec'd through lib/process.c), which dlopen()s librados
 * and librbd (rbd-ceph.h), gets its request as JSON on stdin (the key included: never on a
 * command line) and answers as JSON on stdout.  So the daemon neither links nor maps the
 * Ceph libraries, and a hang or crash in them costs one helper process, not the daemon.
 * Each run has a deadline of the operation timeout plus RBD_HELPER_SLACK_MS (exec, dlopen);
 * past it the helper is killed and the call fails with -ETIMEDOUT.  A helper that crashes
 * fails the call with -EIO.  The messages name the operation and the reason.  docs/rbd.md
 * describes the protocol. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "error.h"

struct rbd_cluster;

#define RBD_HELPER_SLACK_MS 5000

/* The program run as the helper: "/proc/self/exe" (the daemon itself) unless set; a test
 * binary that uses the plugin in-process points it at a volagent binary.  path is borrowed
 * and must stay valid; NULL restores the default. */
void rbd_cluster_set_helper(const char *path);

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

/* A handle on the cluster for the calls below: copies the credentials; timeout_ms bounds
 * the Ceph calls of each helper run.  Connecting happens in each helper run, so connection
 * errors come from the first call: -ETIMEDOUT (the monitors did not answer, or the helper
 * ran past its deadline), -EACCES (authentication refused), -ENOENT (the keyring or key
 * file is missing), -EOPNOTSUPP (the Ceph libraries are not installed), -EIO (the helper
 * crashed or gave no answer).  Returns 0 or -ENOMEM. */
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

/* From now on each call on c goes through the cluster's gate (rbd-health.h): -EHOSTUNREACH
 * at once while the cluster is down, and a call that times out makes it down.  The plugin
 * sets it; a test using the calls in-process need not. */
void rbd_cluster_track_health(struct rbd_cluster *c);

/* Connects and disconnects, nothing else: are the monitors there and is the key accepted? */
int rbd_cluster_check(struct rbd_cluster *c, struct error_info *err);

static inline void rbd_cluster_freep(struct rbd_cluster **c)
{
	rbd_cluster_free(*c);
}
#define _cleanup_rbd_cluster_ __attribute__((cleanup(rbd_cluster_freep)))
