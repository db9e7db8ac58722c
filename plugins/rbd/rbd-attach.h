/* rbd-attach.h - the ways an rbd image becomes a block device on this node, as a strategy:
 *
 *   krbd  `rbd map`: the kernel's rbd client, /dev/rbdN.  Needs the rbd kernel module.
 *   nbd   `rbd-nbd map`: librbd in a daemon serving /dev/nbdN.  Needs the nbd module.
 *   fuse  `rbd-fuse` exposes the image as a file in a FUSE dir, a loop device over it.  Needs
 *         only FUSE and loop; slower, and every I/O goes through one user-space daemon.
 *
 * Each method either succeeds and describes what it made in the attachment's meta (method=,
 * device, and per method: pid=, fuse_dir=, image_file=, loop=), or fails, undoes what it
 * made, and says why in err.  rbd_attach_release() undoes any of them from the meta alone
 * (also a partial record written before the method started, and after an agent restart), and
 * copes with a helper that died: the loop device is cleared, the dead FUSE mount unmounted.
 *
 * Helpers get the key through a file (the keyring, the secretFile, or a 0600 file under the
 * run dir written from the CSI secret and removed once the helper has connected), never on
 * the command line. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "plugin.h"

struct rbd_params {
	const char *monitors;
	const char *pool;
	const char *image;
	const char *user;
	const char *keyring;	 /* file, or NULL */
	const char *secret_file; /* file with the bare key, or NULL */
	const char *key;	 /* the key itself, or NULL; never logged */
	const char *fstype;
	bool read_only;
	char *name;	   /* "rbd:<pool>/<image>" */
	char *run_dir;	   /* FUSE dirs, logs, records */
	char *secret_dir;  /* key files, for the moment a helper reads them (a tmpfs) */
	char *record_path; /* <run_dir>/<escaped name>.rec */
	char *base;	   /* <run_dir>/<escaped name>: prefix of its files */
	uint64_t timeout_ms;
	uint64_t nbd_reattach_ms; /* rbd-nbd map --reattach-timeout */
};

enum rbd_method {
	RBD_METHOD_KRBD,
	RBD_METHOD_NBD,
	RBD_METHOD_FUSE,
};

/* "krbd" -> RBD_METHOD_KRBD.  -EINVAL for an unknown name. */
int rbd_method_from_name(const char *name, enum rbd_method *ret);

/* Attaches p's image with method m, filling ret (device_path and meta).  On failure nothing
 * it made is left behind. */
int rbd_attach_method(const struct rbd_params *p, enum rbd_method m, struct device_attachment *ret,
		      struct error_info *err);

/* Undoes an attachment described by att's meta (method= says which).  Idempotent.
 * *ret_was_dead (may be NULL) says whether the helper behind it had already died, so that
 * its lingering watcher may be fenced. */
int rbd_attach_release(const struct device_attachment *att, uint64_t timeout_ms, bool *ret_was_dead,
		       struct error_info *err);

/* An nbd attachment whose rbd-nbd died (killed with the agent's container, say) while the
 * kernel still holds the device for its reattach timeout: starts `rbd-nbd attach --device` on
 * the same device with p's credentials, so that the filesystem mounted on it carries on, and
 * sets att's "pid" to the new daemon.  0 when it serves the device again (or already did);
 * -EOPNOTSUPP for other methods; -ENOTCONN when the device was disconnected (too late);
 * another -errno with err set when the attach failed. */
int rbd_attach_reattach(const struct rbd_params *p, struct device_attachment *att,
			struct error_info *err);

/* Whether the kernel's objects att names (read by a restarted agent from its journal, this
 * boot) are still the ones its attach made, by their identity and never by their name alone:
 * /dev/rbdN maps the recorded pool and image; the loop device is backed by the recorded image
 * file.  (An nbd device is not checked here: a reattached rbd-nbd of ours serves it under a
 * new pid.)  dev: the image's
 * own device (under an encrypted volume's mapping).  Reads sysfs and /proc only: never
 * blocks.  Returns 0, or -ESTALE with err saying what the name now names (unmapped, or reused
 * for another image or file while the agent was down). */
int rbd_attach_still_ours(const struct device_attachment *att, const char *dev,
			  struct error_info *err);

/* Whether the attachment still works: its helper alive, its device still ours and answering.
 * Returns 0, or -ENOTCONN / -EIO / -ETIMEDOUT with a message. */
int rbd_attach_check(const struct device_attachment *att, uint64_t timeout_ms,
		     struct error_info *err);
