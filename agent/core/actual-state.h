/* actual-state.h - the actual state of the world (kubelet's actual_state_of_world): which pod
 * volumes are mounted where, and which devices are attached and mounted node-wide.
 *
 * Pod mounts are learned from the reconciler's own operations and from the mount table (a
 * mount found under <root>/pods that no operation of this run made is "unverified" until a
 * plugin's check_set_up says what it holds).  Devices are learned from operations, the journal
 * and the table.  Owned by the reconciler thread. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "hashmap.h"
#include "mount-table.h"
#include "plugin.h"

/* One pod mount; target, pod_uid, outer_name and plugin_name live in the same allocation. */
struct asw_pod_mount {
	const char *target; /* the key */
	const char *pod_uid;
	const char *outer_name;
	const char *plugin_name;
	/* What is mounted here; NULL while unverified.  Set with asw_pod_mount_set_volume. */
	const char *volume_name;
	/* The other pod mounts that hold the same volume (asw_pod_mounts_of). */
	struct asw_pod_mount *next_of_volume, *prev_of_volume;
	uint64_t learned_gen; /* table generation when this was learned */
	int mount_id;
	uint32_t target_hash; /* hashmap_hash(target) */
	bool foreign;	      /* verified to hold something no spec wants here */
	bool broken;	      /* its health check failed: torn down, then set up again */
	bool read_only;
	bool unwanted; /* the reconciler's verdict at its last visit (asw_pod_mount_set_unwanted) */
};

struct asw_device {
	char *volume_name; /* the key */
	char *plugin_name;
	struct volume_spec *spec; /* NULL when it could not be reconstructed */
	char *mount_path;	  /* the node-wide mount */
	struct device_attachment att;
	bool attached; /* attach done (or not needed) */
	bool mounted;
	bool read_only;
	bool broken; /* its health check failed: released, then staged again */
	/* The UUID of the filesystem this agent made or mounted on the device (journaled, kept
	 * across a reboot and across failed set-ups until the volume is released): a device that
	 * probes blank is never formatted again, one with another filesystem never mounted.
	 * NULL when not known (a raw block volume, a journal of an older agent). */
	char *fs_uuid;
	int mount_id;
	uint64_t learned_gen;
};

struct actual_state;

/* A CSI volume's entry that holds nothing but its filesystem's record: not mounted, not
 * attached (a stage that failed and was withdrawn, or every mount gone with a reboot).  Kept
 * until kubelet unstages the volume: its next stage must find the record (a device that then
 * probes blank is not formatted).  There is nothing of it to release. */
bool asw_device_is_record_only(const struct asw_device *d);

struct actual_state *asw_new(const char *root_dir);
struct actual_state *asw_free(struct actual_state *a);

/* Records that target holds volume_name (NULL: unknown yet).  Replaces an existing entry. */
struct asw_pod_mount *asw_set_pod_mount(struct actual_state *a, const char *target,
					const char *pod_uid, const char *outer_name,
					const char *plugin_name, const char *volume_name,
					bool read_only, int mount_id, uint64_t gen);
void asw_remove_pod_mount(struct actual_state *a, const char *target, uint64_t gen);
struct asw_pod_mount *asw_get_pod_mount(const struct actual_state *a, const char *target);
/* The same with hash = hashmap_hash(target) computed once by the caller. */
struct asw_pod_mount *asw_get_pod_mount_hashed(const struct actual_state *a, const char *target,
					       uint32_t hash);
const struct hashmap *asw_pod_mounts(const struct actual_state *a);
/* How many pod mounts hold volume_name. */
size_t asw_count_pod_mounts_of(const struct actual_state *a, const char *volume_name);
/* The first pod mount that holds volume_name (the others follow on next_of_volume), or NULL:
 * an index kept by the state, so the reconciler needs none of its own. */
const struct asw_pod_mount *asw_pod_mounts_of(const struct actual_state *a,
					      const char *volume_name);
/* The reconciler marks a pod mount that holding a volume is not wanted where it is, when it
 * visits it; the state counts them per volume, so whether a volume is being released from
 * somewhere is known without a walk over its k pod mounts.  A pod mount that leaves its
 * volume's list is unmarked. */
void asw_pod_mount_set_unwanted(struct actual_state *a, struct asw_pod_mount *pm, bool unwanted);
/* How many pod mounts of volume_name are marked unwanted, or -1 when that is not known (an
 * allocation failed once: the caller walks the pod mounts instead). */
int asw_count_unwanted_of(const struct actual_state *a, const char *volume_name);
/* Records that pm holds volume_name (NULL: unknown again), e.g. after a verify.  Returns 0,
 * or -ENOMEM with pm left unverified. */
int asw_pod_mount_set_volume(struct actual_state *a, struct asw_pod_mount *pm,
			     const char *volume_name);

struct asw_device *asw_add_device(struct actual_state *a, const char *volume_name,
				  const char *plugin_name, struct volume_spec *spec,
				  const char *mount_path);
struct asw_device *asw_get_device(const struct actual_state *a, const char *volume_name);
void asw_remove_device(struct actual_state *a, const char *volume_name);
const struct hashmap *asw_devices(const struct actual_state *a);
/* How many volumes have a verified pod mount (one each however many pods mount it). */
size_t asw_volume_count(const struct actual_state *a);

/* Targets outside <root>/pods whose mounts the state must learn from the table too (CSI
 * publish targets below the kubelet root).  The strings are copied. */
int asw_track_target(struct actual_state *a, const char *target, const char *pod_uid,
		     const char *outer_name, const char *plugin_name);
void asw_untrack_target(struct actual_state *a, const char *target);

/* Brings the state in line with a freshly read table: pod mounts that the table no longer
 * shows are dropped (unless learned after the table was read), mounts under <root>/pods or at
 * a tracked target that the state does not know are added as unverified, and each device's
 * mounted flag follows the table.  changed (may be NULL) gets each target whose record
 * changed.  Returns true when anything changed. */
bool asw_sync_with_table(struct actual_state *a, const struct mount_table *t,
			 void (*changed)(const char *target, void *userdata), void *userdata);
/* What a full read (not the first) must sync besides the targets it reported changed (each
 * synced with asw_sync_target): the records the table did not confirm when they were learned
 * (an operation's mount that went again before the table showed it, a tracked target), the
 * targets unmounted since, and the devices.  Elsewhere the state agrees with the table, which
 * reports every change.  changed, and the return value, as asw_sync_with_table. */
bool asw_sync_changed(struct actual_state *a, const struct mount_table *t,
		      void (*changed)(const char *target, void *userdata), void *userdata);
/* The table the state is synced with: a record learned from an operation that the table
 * already shows needs no full read (NULL: every such record waits for one). */
void asw_set_table(struct actual_state *a, const struct mount_table *t);
/* pm's mount ID changed (a verification): the next full read checks it unless the table shows
 * that mount. */
void asw_pod_mount_changed(struct actual_state *a, const struct asw_pod_mount *pm);
/* The same for one target whose mounts changed (hash: hashmap_hash(target)), after a mount
 * event or a read that reported it.  Returns true when anything changed. */
bool asw_sync_target(struct actual_state *a, const struct mount_table *t, const char *target,
		     uint32_t hash);

/* Splits "<root>/pods/<uid>/volumes/kubernetes.io~<plugin>/<name>" (or volumeDevices/ in
 * place of volumes/: a raw block volume's file) into its parts (pointers
 * into a copy the caller frees via *ret_buf).  Returns false for any other path. */
bool asw_parse_pod_volume_dir(const char *root_dir, const char *path, char **ret_buf,
			      const char **ret_uid, const char **ret_plugin, const char **ret_name);
