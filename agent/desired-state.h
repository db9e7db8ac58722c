/* desired-state.h - the desired state of the world (kubelet's desired_state_of_world): which
 * volumes must be mounted, and where, for which pods.
 *
 * Two indexes: volumes by node-wide volume name (one per source, shared by the pods that
 * use it), and pod volumes by target directory.  Owned by the reconciler thread; no locking. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "hashmap.h"
#include "plugin.h"
#include "pod-spec.h"

struct dsw_volume {
	char *name;			/* node-wide volume name, e.g. "local:/dev/loop3" */
	struct volume_spec *spec;
	const struct volume_plugin *plugin;
	bool uses_device;		/* staged once per node before pods use it */
	char *device_mount_path;	/* where the device is mounted, for device volumes */
	size_t n_pod_volumes;		/* how many pod volumes use it */
	size_t n_read_write;		/* how many of them want it writable */
};

struct dsw_pod_volume {
	char *target;			/* the pod volume directory; the key */
	char *pod_uid;
	char *outer_name;		/* the volume's name in the pod */
	bool read_only;			/* pod-level readOnly or the source's */
	struct dsw_volume *volume;
};

struct desired_state;

/* root_dir: pod volume dirs are <root_dir>/pods/<uid>/volumes/kubernetes.io~<plugin>/<name>. */
struct desired_state *dsw_new(const char *root_dir);
struct desired_state *dsw_free(struct desired_state *d);

/* Replaces everything pod p->uid wanted with what p wants now.  Fails (changing nothing) with
 * -EEXIST when one of p's sources is already used by another pod with a different spec. */
int dsw_set_pod(struct desired_state *d, const struct pod_spec *p, struct error_info *err);
/* Forgets pod uid and its volumes.  Returns 0, or -ENOENT when it was not known. */
int dsw_remove_pod(struct desired_state *d, const char *uid);

struct dsw_volume *dsw_get_volume(const struct desired_state *d, const char *name);
struct dsw_pod_volume *dsw_get_pod_volume(const struct desired_state *d, const char *target);
const struct hashmap *dsw_volumes(const struct desired_state *d);
const struct hashmap *dsw_pod_volumes(const struct desired_state *d);
size_t dsw_pod_count(const struct desired_state *d);

/* "<root>/pods/<uid>/volumes/kubernetes.io~<plugin>/<name>"; caller frees. */
char *dsw_pod_volume_dir(const char *root_dir, const char *pod_uid, const char *plugin,
			 const char *outer_name);
/* "<root>/plugins/kubernetes.io/<plugin>/mounts/<escaped volume name>"; caller frees. */
char *dsw_device_mount_dir(const char *root_dir, const char *plugin, const char *volume_name);
