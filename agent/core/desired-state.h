/* desired-state.h - the desired state of the world (kubelet's desired_state_of_world): which
 * volumes must be mounted, and where, for which pods.
 *
 * Three indexes: volumes by node-wide volume name (one per source, shared by the pods that
 * use it), pod volumes by target directory, and each volume's pod volumes (a list in the
 * volume).  A change hook tells the owner which targets and volumes each change touched, so
 * it can revisit just those.  Owned by the reconciler thread; no locking. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "hashmap.h"
#include "plugin.h"
#include "pod-spec.h"

struct dsw_volume {
	char *name; /* node-wide volume name, e.g. "local:/dev/loop3" (in the same allocation) */
	struct volume_spec *spec;
	const struct volume_plugin *plugin;
	bool uses_device;	 /* staged once per node before pods use it */
	char *device_mount_path; /* where the device is mounted, for device volumes */
	size_t n_pod_volumes;	 /* how many pod volumes use it */
	size_t n_read_write;	 /* how many of them want it writable */
	/* CSI: the volume came from NodeStage/NodePublish.  name is "csi:<volume_id>", the
	 * device is mounted at the staging path kubelet gave, and it stays desired while staged
	 * even with no pod volume. */
	bool csi;
	bool staged;
	char *volume_id;
	char *fingerprint;		    /* what NodeStage asked, to tell a compatible repeat */
	struct dsw_pod_volume *pod_volumes; /* the n_pod_volumes that use it (next_of_volume) */
};

/* target, pod_uid and outer_name live in the same allocation. */
struct dsw_pod_volume {
	const char *target;   /* the pod volume directory; the key */
	uint32_t target_hash; /* hashmap_hash(target) */
	const char *pod_uid;
	const char *outer_name; /* the volume's name in the pod */
	bool read_only;		/* pod-level readOnly or the source's */
	struct dsw_volume *volume;
	bool csi;	   /* from NodePublish: target is below the kubelet root */
	char *fingerprint; /* CSI: what NodePublish asked */
	/* The other pod volumes of the same volume (its pod_volumes list). */
	struct dsw_pod_volume *next_of_volume, *prev_of_volume;
	/* The last pass found it mounted as wanted: counted in dsw_mounted_count(). */
	bool mounted;
};

struct desired_state;

/* root_dir: pod volume dirs are <root_dir>/pods/<uid>/volumes/kubernetes.io~<plugin>/<name>. */
struct desired_state *dsw_new(const char *root_dir);
struct desired_state *dsw_free(struct desired_state *d);

/* Called after each change: a pod volume added or dropped (target and its volume's name), or
 * a volume added or dropped without a pod volume (target NULL).  The strings are valid during
 * the call only.  NULL: no hook. */
typedef void (*dsw_change_fn)(void *userdata, const char *target, const char *volume_name);
void dsw_set_change_hook(struct desired_state *d, dsw_change_fn fn, void *userdata);

/* Makes room for n_pods more pods with n_pod_volumes more pod volumes (and as many volumes) in
 * the indexes, e.g. before loading that many spec files at start-up.  Returns 0 or -ENOMEM
 * (then they grow as they fill). */
int dsw_reserve(struct desired_state *d, size_t n_pods, size_t n_pod_volumes);
/* Replaces everything pod p->uid wanted with what p wants now.  Fails (changing nothing) with
 * -EEXIST when one of p's sources is already used by another pod with a different spec. */
int dsw_set_pod(struct desired_state *d, const struct pod_spec *p, struct error_info *err);
/* What the caller recorded as pod uid's owner (the spec file that declares it), or NULL, also
 * when the pod is not desired.  dsw_set_pod keeps it when it replaces the pod. */
void *dsw_pod_owner(const struct desired_state *d, const char *uid);
/* Records owner for pod uid.  Returns 0, or -ENOENT when the pod is not desired. */
int dsw_pod_set_owner(struct desired_state *d, const char *uid, void *owner);
/* Forgets pod uid and its volumes.  Returns 0, or -ENOENT when it was not known. */
int dsw_remove_pod(struct desired_state *d, const char *uid);

/* CSI NodeStage: makes volume name (spec, staged at staging_path) desired.  A volume of that
 * name must not exist yet; see dsw_get_volume.  Returns the volume, or NULL on ENOMEM. */
struct dsw_volume *dsw_csi_stage(struct desired_state *d, const char *name, const char *volume_id,
				 struct volume_spec *spec, const struct volume_plugin *plugin,
				 const char *staging_path, const char *fingerprint);
/* CSI NodeUnstage: the volume no longer needs to be staged; it goes once no pod uses it. */
void dsw_csi_unstage(struct desired_state *d, struct dsw_volume *v);
/* CSI NodePublish without a stage (a volume that needs none): makes the volume desired
 * unstaged.  Returns the volume, or NULL on ENOMEM. */
struct dsw_volume *dsw_csi_volume(struct desired_state *d, const char *name, const char *volume_id,
				  struct volume_spec *spec, const struct volume_plugin *plugin);
/* CSI NodePublish: v mounted at target.  Returns the pod volume, or NULL on ENOMEM or when
 * target is already desired. */
struct dsw_pod_volume *dsw_csi_publish(struct desired_state *d, struct dsw_volume *v,
				       const char *target, const char *pod_uid,
				       const char *outer_name, bool read_only,
				       const char *fingerprint);
/* CSI NodeUnpublish: target is no longer desired.  Returns 0 or -ENOENT. */
int dsw_csi_unpublish(struct desired_state *d, const char *target);

struct dsw_volume *dsw_get_volume(const struct desired_state *d, const char *name);
struct dsw_pod_volume *dsw_get_pod_volume(const struct desired_state *d, const char *target);
/* The same with hash = hashmap_hash(target) computed once by the caller. */
struct dsw_pod_volume *dsw_get_pod_volume_hashed(const struct desired_state *d, const char *target,
						 uint32_t hash);
const struct hashmap *dsw_volumes(const struct desired_state *d);
const struct hashmap *dsw_pod_volumes(const struct desired_state *d);
/* Records whether pv is mounted as wanted; dsw_mounted_count() is how many are (a pod volume
 * dropped from the state stops counting). */
void dsw_pod_volume_set_mounted(struct desired_state *d, struct dsw_pod_volume *pv, bool mounted);
size_t dsw_mounted_count(const struct desired_state *d);

/* "<root>/pods/<uid>/volumes/kubernetes.io~<plugin>/<name>"; caller frees. */
char *dsw_pod_volume_dir(const char *root_dir, const char *pod_uid, const char *plugin,
			 const char *outer_name);
/* "<root>/plugins/kubernetes.io/<plugin>/mounts/<escaped volume name>"; caller frees. */
char *dsw_device_mount_dir(const char *root_dir, const char *plugin, const char *volume_name);
/* volumeMode Block (kubelet's layout for block volumes): a pod's file,
 * "<root>/pods/<uid>/volumeDevices/kubernetes.io~<plugin>/<name>", and the node-wide held
 * device, "<root>/plugins/kubernetes.io/<plugin>/volumeDevices/<escaped volume name>/dev";
 * caller frees. */
char *dsw_pod_volume_device_path(const char *root_dir, const char *pod_uid, const char *plugin,
				 const char *outer_name);
char *dsw_device_held_path(const char *root_dir, const char *plugin, const char *volume_name);
