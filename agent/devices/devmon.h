/* devmon.h - keeps the device inventory current for the daemon and publishes it as
 * <state-dir>/devices.json.
 *
 * A libudev monitor on the "block" subsystem wakes the reconciler's epoll loop.  It listens to
 * udev's events when a udev daemon runs (/run/udev/control exists), so that what udev adds (by-*
 * links, ID_* properties) is there when the event arrives, and to the kernel's uevents
 * otherwise, so the inventory stays current on hosts without udev too.
 *
 * Each dispatch drains the pending events and, if there were any, scans the devices again (one
 * scan per burst, however many events it held), logs every stable id that now has another
 * kernel name as a rename with both names, and rewrites devices.json atomically (temp file,
 * fsync, rename, fsync of the directory) when its content changed.  Renames are found against
 * every name seen since start, so a device removed in one burst and back under another name
 * in a later one is still reported. */
#pragma once

#include "devinv.h"
#include "error.h"

struct devmon;

/* Opens the monitor, scans once and writes <state_dir>/devices.json (state_dir is created if
 * missing).  Blocking: probes every block device once.
 * Returns: the monitor, or NULL with err set. */
struct devmon *devmon_new(const char *state_dir, struct error_info *err);
struct devmon *devmon_free(struct devmon *dm);

/* The fd to poll for EPOLLIN; owned by the monitor. */
int devmon_get_fd(const struct devmon *dm);

/* Reads every pending event; rescans and rewrites devices.json when there were any.  Does not
 * block on the monitor (the fd is non-blocking) but probes devices when it rescans.
 * Returns: 0 on success (also when no event was pending), negative errno when the scan or the
 * write failed (the previous inventory and file are kept; err says why when not NULL). */
int devmon_dispatch(struct devmon *dm, struct error_info *err);

/* The inventory as of the last scan; valid until the next dispatch. */
const struct devinv *devmon_get_inventory(const struct devmon *dm);
/* "udev" or "kernel": whose events the monitor receives. */
const char *devmon_get_source(const struct devmon *dm);
