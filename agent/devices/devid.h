/* devid.h - a disk's hardware identity, named as udev's 60-persistent-storage.rules name it
 * under /dev/disk/by-id, but computed from sysfs alone.
 *
 * Without a udev daemon (a DaemonSet that does not mount /run/udev, a minimal host, a container
 * started by hand) libudev still reads sysfs, so the names udev would give can be computed the
 * way its rules and its scsi_id/ata_id helpers compute them:
 *
 *   virtio-blk   serial                          virtio-<serial>
 *   NVMe         wwid (eui./uuid./nvme.)         nvme-<wwid>
 *                model + serial (+ nsid)         nvme-<model>_<serial>, nvme-<model>_<serial>_<nsid>
 *   SCSI         VPD page 0x83 designator        scsi-<type><id>; an NAA one also wwn-0x<naa>
 *                VPD page 0x80 serial            scsi-S<vendor><model><serial>
 *   SATA (libata) VPD 0x83 T10 vendor id         ata-<model>_<serial>; NAA: wwn-0x<naa>
 *
 * with udev's escaping (whitespace runs become "_", characters outside [A-Za-z0-9#+-.:=@_/]
 * become "_", valid UTF-8 and "\x" escapes stay).  A name is "wwn" strength when it comes from a
 * world-wide name (SCSI/ATA NAA, NVMe EUI-64/NGUID/UUID) and "serial" strength when it comes
 * from a serial number, which cloned virtual disks may share.  USB disks are left to udev
 * (their names come from usb_id, which sysfs alone cannot reproduce).  Library code: no logging. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct udev_device;

struct devid {
	char *wwn_name;	   /* by-id name from a world-wide name, or NULL */
	char *serial_name; /* by-id name from a serial number, or NULL */
	char **names;	   /* every by-id name udev makes for the disk, NULL-terminated */
};

/* Computes the by-id names of a whole disk from sysfs.  A device with no hardware identity
 * gets an empty struct devid (all NULL), which is not an error.
 * Returns: 0, -ENOMEM. */
int devid_from_sysfs(struct udev_device *dev, struct devid *ret);
void devid_done(struct devid *id);

/* A sysfs attribute substituted into a SYMLINK= rule without string_escape (virtio, NVMe wwid):
 * trailing whitespace cut, whitespace runs to "_", odd characters to "_".  Caller frees. */
char *devid_escape_link(const char *value);
/* A sysfs attribute substituted into ENV{} with string_escape=replace (NVMe model and serial):
 * trailing whitespace cut, then every character outside udev's set, spaces too, to "_". */
char *devid_escape_replace(const char *value);
/* A fixed-width field as scsi_id and ata_id export it: leading and trailing whitespace cut,
 * whitespace runs to "_", odd characters to "_".  len bounds value. */
char *devid_escape_whitespace(const char *value, size_t len);

/* What scsi_id (or ata_id, for vendor "ATA") makes of a SCSI disk's VPD pages: the bus ("scsi"
 * or "ata"), ID_SERIAL and ID_WWN_WITH_EXTENSION ("0x..." or NULL).  pg83/pg80 are the raw
 * pages as sysfs shows them (vpd_pg83, vpd_pg80), either may be NULL; vendor and model are the
 * INQUIRY fields (8 and 16 characters, space padded, as sysfs shows them).
 * Returns: 0, -ENOENT when the pages give no identity, -ENOMEM. */
int devid_scsi_from_vpd(const uint8_t *pg83, size_t n83, const uint8_t *pg80, size_t n80,
			const char *vendor, const char *model, const char **ret_bus,
			char **ret_serial, char **ret_wwn);
