/* mount-utab.h - libmount's utab (/run/mount/utab): the userspace options of a mount
 * (_netdev, x-*, nofail), which never reach the kernel and which systemd and findmnt merge with
 * the kernel's mount table.  The agent writes an entry for each mount it makes with such
 * options and drops it when it unmounts there. */
#pragma once

#include <stdbool.h>

/* Whether options ("ro,_netdev", may be NULL) hold userspace options, as libmount's own option
 * maps tell. */
bool mnt_utab_has_userspace_options(const char *options);

/* Records the userspace options of the mount just made on target_fd (the directory, opened
 * before the mount) under its real path.  Best effort: a host without a writable /run/mount
 * keeps none. */
void mnt_utab_record(const char *source, int target_fd, const char *options);

/* Drops utab's entry for target, if it has one, so that a later mount there does not inherit
 * its options.  Costs one stat(2) where utab is missing or empty. */
void mnt_utab_forget(const char *target);
