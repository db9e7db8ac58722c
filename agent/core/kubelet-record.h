/* kubelet-record.h - whether a CSI path that the agent has no record of is its own by
 * kubelet's record: the layout kubelet gives CSI paths and the vol_data.json it writes beside
 * them (driverName, volumeHandle) before it calls NodeStageVolume or NodePublishVolume.
 *
 * After a restart that lost the journal, a mount at a CSI path is adopted (and so unmounted
 * on unpublish or unstage) only when kubelet's record there names this driver and the
 * volume of the call; any other mount (a secret tmpfs, another driver's staging mount) is
 * someone else's and is left alone.  See docs/hardening.md. */
#pragma once

#include <stdbool.h>

/* Whether path (absolute, normalized) lies in <kubelet_root>/pods/ or <kubelet_root>/plugins/,
 * the dirs kubelet gives CSI drivers (never its pki/, plugins_registry/, ...). */
bool kubelet_path_in_csi_dirs(const char *kubelet_root, const char *path);

/* Whether path (absolute, normalized) has the shape of a CSI publish target or staging path
 * below kubelet_root:
 *   pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount
 *   plugins/kubernetes.io/csi/<driver or "pv">/<dir>/globalmount
 *   plugins/kubernetes.io/csi/volumeDevices/{staging,publish}/<pv>[/...]
 * and write where kubelet keeps its vol_data.json for it into ret_record (size bytes). */
bool kubelet_csi_record_path(const char *kubelet_root, const char *path, char *ret_record,
			     size_t size);

/* Whether kubelet's vol_data.json for path names driver and volume_id. */
bool kubelet_record_owns(const char *kubelet_root, const char *path, const char *driver,
			 const char *volume_id);

/* Calls fn(target) for each CSI publish target pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount
 * below kubelet_root whose vol_data.json names driver: what kubelet still records as published
 * (it removes the record after a successful unpublish), whether the agent has a record or
 * not.  Stops at the first negative return of fn.
 * Returns: 0 on success (no pods dir: nothing), negative errno on failure. */
int kubelet_recorded_targets(const char *kubelet_root, const char *driver,
			     int (*fn)(const char *target, void *userdata), void *userdata);
