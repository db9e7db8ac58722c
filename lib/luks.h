/* luks.h - LUKS2 devices through libcryptsetup: format, open (a dm-crypt mapping under
 * /dev/mapper), look up, resize and close.  Knows nothing of volumes: the policy (which
 * device, which name, when) is plugins/crypt-volume.c's.
 *
 * Chosen once for every volume (docs/encryption.md says why): LUKS2, aes-xts-plain64 with a
 * 512-bit key (two AES-256 keys), 512-byte sectors (any device size and filesystem), the keyslot's
 * PBKDF argon2id with fixed costs (LUKS_PBKDF_*: no benchmark, so that every node formats
 * the same way and an open costs the same everywhere; about half a second on one core).
 *
 * Passphrases are handed in as (pointer, length) and never copied here; libcryptsetup keeps
 * its own copies in locked memory it wipes.  Its log messages go to the "crypt" debug
 * subsystem only; none of them carries a passphrase. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"

#define LUKS_CIPHER "aes"
#define LUKS_CIPHER_MODE "xts-plain64"
#define LUKS_KEY_BITS 512
#define LUKS_PBKDF "argon2id"
#define LUKS_PBKDF_ITERATIONS 4		 /* argon2 time cost */
#define LUKS_PBKDF_MEMORY_KB (64 * 1024) /* argon2 memory cost */
#define LUKS_PBKDF_THREADS 1

/* Where mappings appear. */
#define LUKS_MAPPER_DIR "/dev/mapper"
#define LUKS_PATH_MAX 256

/* Whether the kernel has device-mapper (its misc device is registered): without it no
 * mapping can be opened (luks_open is -EOPNOTSUPP), while luks_format still works (it needs
 * only the kernel's crypto API for the keyslot). */
bool luks_dm_available(void);

/* Formats dev as LUKS2 (the constants above, a random volume key) with one keyslot for the
 * passphrase.  The caller has checked dev carries nothing (or luks_unfinished_format said it
 * holds its own unfinished format).  owner (at most LUKS_OWNER_MAX bytes, may be NULL) names
 * who formats: the header is written with the label LUKS_LABEL_FORMATTING and owner, and
 * labelled owner alone once the keyslot is in, so that a format stopped in between (the key
 * derivation takes about a second) can be told apart afterwards.  Returns 0 or -errno with
 * err naming dev. */
int luks_format(const char *dev, const char *owner, const char *pass, size_t pass_len,
		struct error_info *err);

#define LUKS_LABEL_FORMATTING "formatting:"
#define LUKS_OWNER_MAX 36 /* LUKS2 labels hold 47 bytes */

/* Whether dev holds a LUKS2 header that luks_format(owner) began and did not finish: no
 * keyslot in use and the label LUKS_LABEL_FORMATTING owner.  Nothing was ever written through
 * such a header (no passphrase opens it), so formatting it again loses nothing.  Returns 1
 * when it does; 0 when not (no LUKS2 header, a keyslot in use, any other label: a header made
 * keyless on purpose keeps the label of its finished format); -errno with err when dev cannot
 * be read. */
int luks_unfinished_format(const char *dev, const char *owner, struct error_info *err);

/* Opens the LUKS device dev as the mapping name (read-only when read_only), writing
 * /dev/mapper/<name> into ret_path (>= LUKS_PATH_MAX bytes).  A wrong passphrase is -EPERM with
 * nothing opened; a kernel without device-mapper is -EOPNOTSUPP naming it (the passphrase is
 * checked first, so that a wrong one still says so); dev without a LUKS header is
 * -EMEDIUMTYPE; a header without a keyslot (a format that stopped before adding it) is
 * -ENOKEY saying so.  Returns 0 or -errno with err filled. */
int luks_open(const char *dev, const char *name, const char *pass, size_t pass_len, bool read_only,
	      char *ret_path, struct error_info *err);

/* Whether the mapping name is open: 1 with its backing device's number in *ret_backing and
 * that device's path in ret_backing_path (>= LUKS_PATH_MAX bytes), 0 when it is not (or the
 * kernel has no device-mapper), -errno when it cannot be told. */
int luks_lookup(const char *name, dev_t *ret_backing, char *ret_backing_path);

/* Grows the open mapping name to its backing device's size (after the device grew).
 * Returns 0 or -errno with err filled. */
int luks_resize(const char *name, struct error_info *err);

/* Closes the mapping name.  0 when it is not open; -EBUSY while something holds it open (a
 * mount, a pod's process). */
int luks_close(const char *name, struct error_info *err);

/* Checks pass against the LUKS device dev's keyslots without opening anything (one key
 * derivation: what an open costs before the kernel's part).  -EPERM when it is wrong; -ENOKEY
 * when the header has no keyslot (see luks_open). */
int luks_verify(const char *dev, const char *pass, size_t pass_len, struct error_info *err);
