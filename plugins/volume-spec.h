/* volume-spec.h - one volume's source as the agent understands it, whatever it came from (a
 * pod spec file or a CSI volume_context): the plugin type and its fields as strings.
 *
 * Keeping the fields as a flat string map lets pod spec files ({"nfs": {"server": ...}}) and
 * CSI volume_context ({"type": "nfs", "server": ...}) feed the same plugin validation.  A spec
 * is immutable once built and reference-counted, because operations on worker threads hold it
 * while the desired state may drop it. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The attribute that names more mount options to keep secret ("ticket,domain"; see
 * mount-options.h), and what a sensitive option is written as in the journal. */
#define VOLUME_SPEC_SENSITIVE_KEY "sensitiveMountOptions"
#define VOLUME_SPEC_MASKED_OPTION "(sensitive option not journaled)"

/* key and value are one allocation (value follows key's NUL); read-only outside
 * volume-spec.c. */
struct volume_attr {
	char *key;
	char *value;
};

struct volume_spec {
	unsigned refs;
	char *type; /* the plugin: "local", "nfs", "rbd" (in the spec's allocation) */
	struct volume_attr *attrs; /* the source's fields, e.g. path=/mnt/disks/ssd1 */
	size_t n_attrs;
	/* NULL-terminated; never NULL after volume_spec_new; changed by
	 * volume_spec_add_mount_option only (an empty list is shared). */
	char **mount_options;
	bool read_only;
	/* volumeMode Block: the pod gets the device node itself (bind-mounted onto a file),
	 * never a filesystem on it; false is Filesystem. */
	bool block;
	/* Credentials that came with the request (CSI `secrets`), e.g. a CephX key.  Never
	 * logged, never written to a file by the core, wiped when the spec is freed; not part of
	 * volume_spec_equal (a rotated secret is the same volume). */
	struct volume_attr *secrets;
	size_t n_secrets;
};

struct volume_spec *volume_spec_new(const char *type);
struct volume_spec *volume_spec_ref(struct volume_spec *s);
/* Drops one reference; frees on the last.  Accepts NULL; returns NULL. */
struct volume_spec *volume_spec_unref(struct volume_spec *s);
/* Adds or replaces key.  Returns 0 or -ENOMEM. */
int volume_spec_set(struct volume_spec *s, const char *key, const char *value);
/* The value of key, or NULL. */
const char *volume_spec_get(const struct volume_spec *s, const char *key);
int volume_spec_add_mount_option(struct volume_spec *s, const char *opt);
/* Adds or replaces a secret.  Returns 0 or -ENOMEM. */
int volume_spec_set_secret(struct volume_spec *s, const char *key, const char *value);
/* The secret key, or NULL. */
const char *volume_spec_get_secret(const struct volume_spec *s, const char *key);
/* Whether two specs describe the same source the same way (type, fields, options, ro, volume
 * mode). */
bool volume_spec_equal(const struct volume_spec *a, const struct volume_spec *b);

/* --- rendering: the one way a spec leaves the agent (volume-spec-format.c) ---
 *
 * Every writer (log lines, error messages, the journal, `volagent status`, metrics) renders a
 * spec through these, so that none of them can drift from the others: sensitive mount options
 * (mount-options.h, plus the names in VOLUME_SPEC_SENSITIVE_KEY) are masked, in the options
 * list and in a "mountOptions" attribute alike, and secrets are never part of the output. */

enum volume_spec_json_form {
	/* For people (status): the fields flat, "mountOptions" a list with each sensitive
	 * option as "name=****", "readOnly": true when set, "volumeMode": "Block" for a raw
	 * block volume. */
	VOLUME_SPEC_JSON_STATUS,
	/* The journal's (on-disk, unchanged since journal version 1): {"type", "attrs",
	 * "mount_options", "read_only"}, and "block": true for a raw block volume only (so an
	 * entry without it, as every older one, reads as Filesystem), each sensitive option replaced by
	 * VOLUME_SPEC_MASKED_OPTION, so that such an entry is never restored from it. */
	VOLUME_SPEC_JSON_JOURNAL,
};

/* s as a new JSON object (json_null() for a NULL s) in the given form.  Returns NULL on
 * ENOMEM. */
json_t *volume_spec_to_json(const struct volume_spec *s, enum volume_spec_json_form form);

/* s as one line for a log or a message: "nfs server=h path=/x mountOptions=vers=4.1,
 * password=**** ro".  Returns a new string, or NULL on ENOMEM. */
char *volume_spec_format(const struct volume_spec *s);

/* Whether s has a sensitive mount option (in its list or its "mountOptions" attribute). */
bool volume_spec_has_sensitive_option(const struct volume_spec *s);

/* Replaces in text (NUL-terminated, in a buffer of size bytes) each value of a sensitive
 * option of s with "****", for a message that may have echoed one (a helper's error, a
 * fingerprint).  Truncates to fit size. */
void volume_spec_mask_text(const struct volume_spec *s, char *text, size_t size);

static inline void volume_spec_unrefp(struct volume_spec **s)
{
	volume_spec_unref(*s);
}
#define _cleanup_volume_spec_ __attribute__((cleanup(volume_spec_unrefp)))
