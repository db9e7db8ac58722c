/* crypt-volume.h - encryption at rest for the plugins whose volumes are block devices (local,
 * rbd): the policy around lib/luks.h.
 *
 * The seam is attach/detach.  A plugin's attach makes its device appear (local resolves it,
 * rbd maps the image) and then calls crypt_volume_attach(): for a volume that asks for
 * encryption the device is opened as a dm-crypt mapping (formatted with LUKS2 first when it
 * carries nothing at all) and the attachment's device_path becomes /dev/mapper/<name>, so that
 * everything after it (format-once and mount, the raw block bind, expand) sees the mapping
 * and never the ciphertext.  The plugin's detach calls crypt_volume_detach() first: it closes
 * the mapping (after the core unmounted what was on it).  A volume that does not ask for
 * encryption is refused when its device carries a LUKS header.
 *
 * How a volume asks: the spec attribute "encrypted" = "true" (CSI volume_context), with the
 * passphrase in the request's secrets under "encryptionPassphrase" (CSI), or in the file the
 * attribute "encryptionPassphraseFile" names (pod spec files: "encryption":
 * {"passphraseFile": ...}); that file must be a regular file owned by root with no group or
 * other permission bits.  The passphrase is read only for the open, held in memory that is
 * locked, left out of core dumps and wiped after, and never written anywhere. */
#pragma once

#include <stdbool.h>

#include "error.h"
#include "plugin.h"

#define CRYPT_VOLUME_ATTR "encrypted"
#define CRYPT_VOLUME_ATTR_FILE "encryptionPassphraseFile"
#define CRYPT_VOLUME_SECRET "encryptionPassphrase"
/* The attachment's records: the mapping's name and the device under it. */
#define CRYPT_VOLUME_META_NAME "crypt"
#define CRYPT_VOLUME_META_BACKING "crypt_device"
/* Mapping names: the prefix and a hash of the volume's node-wide name. */
#define CRYPT_VOLUME_NAME_PREFIX "volagent-"
#define CRYPT_VOLUME_NAME_MAX 64
/* The longest passphrase taken (a file or a secret). */
#define CRYPT_VOLUME_PASSPHRASE_MAX 4096

/* Whether spec asks for encryption ("encrypted": "true"). */
bool crypt_volume_requested(const struct volume_spec *spec);

/* Whether key is an attribute of this layer, which the plugin's validate lets through. */
bool crypt_volume_is_attr(const char *key);

/* Checks the encryption attributes of spec ("encrypted" is "true" or "false"; a passphrase
 * file only with "encrypted", and the file itself: see crypt_volume_check_passphrase_file).
 * Never blocks beyond a stat.  Returns 0 or -EINVAL with err naming the field. */
int crypt_volume_validate(const struct volume_spec *spec, struct error_info *err);

/* Checks that path is a regular file (no symlink) owned by root with no group or other
 * permission bits.  Returns 0 or -errno (-EPERM for the ownership and the mode) with the
 * reason in err. */
int crypt_volume_check_passphrase_file(const char *path, struct error_info *err);

/* The mapping name for the volume volume_name ("volagent-" and 16 hex digits of its hash:
 * stable, in dm's safe characters, the same for the same volume on every call) into ret
 * (>= CRYPT_VOLUME_NAME_MAX bytes). */
void crypt_volume_mapping_name(const char *volume_name, char *ret);

/* After the plugin's attach filled att->device_path (the device itself): for an encrypted
 * volume opens it (adopting a mapping of that device already open under the volume's name:
 * no second open), formats it first when it is blank and writable, and refuses a device with
 * anything else on it (-EMEDIUMTYPE); device_path becomes the mapping and att records the
 * mapping's name and the device.  For any other volume, a device with a LUKS header is
 * refused (-EMEDIUMTYPE).  A wrong passphrase is -EPERM, a kernel without device-mapper
 * -EOPNOTSUPP, each with nothing opened.  On failure att is unchanged.
 * Returns: 0 on success, negative errno with err naming volume_name on failure. */
int crypt_volume_attach(const struct volume_spec *spec, const char *volume_name, bool read_only,
			struct device_attachment *att, struct error_info *err);

/* Closes the mapping att records (0 when there is none, or it is closed already); -EBUSY
 * while it is in use.  The plugin's own detach then sees the device (see
 * crypt_volume_backing_device). */
int crypt_volume_detach(const struct device_attachment *att, struct error_info *err);

/* What a journal recorded of an encrypted attach is what crypt_volume_attach would have made
 * for volume_name: its mapping's name and path, and the device under it.  0 for an attachment
 * without encryption; -EBADMSG with the reason otherwise. */
int crypt_volume_check_attachment(const char *volume_name, const struct device_attachment *att,
				  struct error_info *err);

/* The device under att's mapping, or att->device_path when it has none. */
const char *crypt_volume_backing_device(const struct device_attachment *att);

/* For expand: when device_path (any path of the device) is one of this layer's mappings, makes the kernel re-read the
 * size of the device under it and grows the mapping to it.  0 when device_path is no
 * mapping.  Returns 0 or -errno with err filled. */
int crypt_volume_grow(const char *device_path, struct error_info *err);
