/* local-provision.h - the local plugin's policy for volumes the CSI Controller service makes
 * (CreateVolume, DeleteVolume, GetCapacity, ControllerExpandVolume): which base paths, what a
 * volume id holds, how a size is recorded and reserved.  agent/csi/csi-controller.c turns the
 * CSI calls into these; nothing here knows CSI.
 *
 * A provisioned volume is the directory <basePath>/<id>, the same one the node side of the
 * plugin binds (local.c: basePath + volumeId).  Its id is derived from the volume's name and
 * carries its base path, so DeleteVolume, which gets nothing but the id, finds it:
 *
 *     lv1-<16 hex digits: FNV-1a 64 of the name><base path, '/' written as '.'>
 *
 * e.g. "lv1-8c1a6e26b8ec29f1.srv.volumes" for basePath /srv/volumes.  A byte of the base path
 * other than [A-Za-z0-9-] is written "_" and two hex digits ("." is "_2e"), so the id is one
 * safe path component, and at most LOCAL_PROV_ID_MAX bytes (the CSI spec's 128).
 *
 * The record of the volume (its name, its size, whether the size is enforced) is an extended
 * attribute of the directory itself, LOCAL_PROV_XATTR, a JSON object with a "version" (1): it
 * survives an agent restart and a lost journal, goes with the directory, and a later version
 * reads this one.  The directory is made by CreateVolume (0750), not at first stage, so the
 * record exists as soon as the volume does.
 *
 * Sizes: enforced (the default) means a project quota (lib/quota.h) on the directory, set at
 * CreateVolume and again at every set-up on the node; recorded only means the size is kept in
 * the record and reserved in GetCapacity, and nothing stops a pod from writing past it (as
 * OpenEBS Local PV hostpath does without XFS quotas).
 *
 * Threads: the calls here do not serialize themselves; the caller runs one at a time
 * (csi-controller.c holds a lock around them). */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"

#define LOCAL_PROV_ID_PREFIX "lv1-"
#define LOCAL_PROV_ID_MAX 128
#define LOCAL_PROV_XATTR "trusted.volagent.provision"
#define LOCAL_PROV_RECORD_VERSION 1

/* A StorageClass's parameters, as local_prov_param_set() took them. */
struct local_prov_params {
	char base_path[PATH_MAX]; /* "basePath": required */
	bool enforce;		  /* "enforceSize": "true" (the default) or "false" */
};

struct local_prov_volume {
	char id[LOCAL_PROV_ID_MAX + 1];
	char base_path[PATH_MAX];
	uint64_t size; /* 0: no size */
	bool enforce;
};

/* Sets params to the defaults (no basePath, enforced). */
void local_prov_params_init(struct local_prov_params *params);

/* Takes one StorageClass parameter.  Keys with a '/' (csi.storage.k8s.io/..., set by
 * external-provisioner) are not the plugin's and are ignored.  Returns 0, or -EINVAL with err
 * naming the key and why (an unknown key, a bad value). */
int local_prov_param_set(struct local_prov_params *params, const char *key, const char *value,
			 struct error_info *err);

/* Makes (or finds again) the volume called name with params, sized from required and limit
 * (the CSI capacity range; 0 = unset): the size is required, else limit, else none.
 * Returns 0 with *ret filled, or -errno with err set:
 *   -EINVAL   basePath missing, not absolute, not below a --local-path-prefix, not a
 *             directory, too long for an id, or a negative size (err names the field);
 *   -ERANGE   limit below required;
 *   -EEXIST   a volume of that name exists with another size or enforcement;
 *   -ENOSPC   the size is more than GetCapacity has for basePath;
 *   -EOPNOTSUPP an enforced size on a filesystem without project quotas (err names the
 *             path and what to enable). */
int local_prov_create(const char *name, const struct local_prov_params *params, int64_t required,
		      int64_t limit, struct local_prov_volume *ret, struct error_info *err);

/* Whether id is one local_prov_create makes; its base path into ret_base (PATH_MAX) when
 * ret_base is not NULL. */
bool local_prov_id_parse(const char *id, char *ret_base);

/* Finds the volume id: 1 with *ret filled, 0 when it does not exist (the id is not one of
 * ours, or its directory is gone), -errno with err set (-EINVAL its base path is not allowed,
 * -EPERM the directory has no record of ours). */
int local_prov_lookup(const char *id, struct local_prov_volume *ret, struct error_info *err);

/* Removes the volume id: its size lifted, then <basePath>/<id> with everything in it
 * (rm_tree_at: no symlink followed, no mount crossed).  Returns 0 also when it is gone
 * already; -EINVAL (err) when id is not one of ours or its base path is not below a
 * --local-path-prefix; -EPERM when the directory has no record of ours; -EBUSY when a mount
 * inside it was left in place. */
int local_prov_delete(const char *id, struct error_info *err);

/* What a new volume may still take below base_path: the filesystem's free space less what the
 * sized volumes there have reserved and not used yet (an enforced size: its limit less its
 * project's usage; a recorded size: all of it).  Returns 0 with *ret_bytes, or -errno with err
 * set (-EINVAL for a base path that is not allowed, as local_prov_create). */
int local_prov_capacity(const char *base_path, uint64_t *ret_bytes, struct error_info *err);

/* Records a larger size for the volume id (ControllerExpandVolume; the node raises the quota
 * in NodeExpandVolume).  A size at or below the recorded one changes nothing.  Returns 0 with
 * the size now recorded in *ret_size, or -errno with err set: -ENOENT no such volume, -EINVAL
 * not ours, -ERANGE limit below required, -ENOSPC not enough capacity. */
int local_prov_expand(const char *id, int64_t required, int64_t limit, uint64_t *ret_size,
		      struct error_info *err);

/* The size recorded on the directory dir_fd (any open descriptor of it, O_PATH too), when it
 * is a provisioned volume whose size is enforced: 1 and *ret_bytes, 0 when it has no such
 * record. */
int local_prov_dir_enforced_size(int dir_fd, uint64_t *ret_bytes);
