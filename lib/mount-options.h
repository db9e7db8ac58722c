/* mount-options.h - mount option lists ("vers=4.1,port=2049,ro"): split, join, look up, and
 * mask the options that carry credentials before they reach a log line or an error message
 * (kubelet's MountSensitive does the same for its mount commands).
 *
 * An option list is a NULL-terminated vector of strings, one option each, as
 * volume_spec.mount_options holds them.
 *
 * Sensitive options are masked as "name=****" (a flag option as "****").  An option is
 * sensitive when its name (case-insensitive, the part before '=') is one of
 *   password, pass, passwd, secret, credentials, cred, key, keytab, token
 * or it is sec=krb5, sec=krb5i or sec=krb5p (Kerberos: its presence hints at a keytab), or
 * its name is in the caller's extra list (a comma-separated list of option names, e.g. the
 * spec attribute "sensitiveMountOptions"). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Splits s at ',' into a new vector in *ret, as libmount parses an option string: a ','
 * inside double quotes belongs to the value, so an SELinux label such as
 * context="system_u:object_r:container_file_t:s0:c12,c34" stays one option, quotes and all.
 * An empty s gives an empty vector.  Returns 0, -EINVAL when an item is empty ("a,,b"), a
 * quote is not closed, or s holds a control character, or -ENOMEM. */
int mount_options_split(const char *s, char ***ret);

/* Whether opt is exactly one option as mount_options_split() reads it (a quoted value may
 * hold commas). */
bool mount_option_is_single(const char *opt);

/* Frees a vector and its strings.  Accepts NULL; returns NULL. */
char **mount_options_free(char **v);

/* How many options v holds (NULL counts as none). */
size_t mount_options_count(char *const *v);

/* Appends a copy of opt to *v (which may be NULL).  Returns 0 or -ENOMEM. */
int mount_options_append(char ***v, const char *opt);

/* Whether opt is an SELinux label option: context=, fscontext=, defcontext= or rootcontext=.
 * Such an option labels a filesystem when it is mounted; a bind of that mount cannot change
 * it. */
bool mount_option_is_selinux(const char *opt);

/* The SELinux label options of v (see above), in their order, joined with ','; "" when v has
 * none.  Returns a new string or NULL on ENOMEM. */
char *mount_options_selinux(char *const *v);

/* The options of a mount the agent makes itself: v, plus "ro" when read_only, "nosuid"
 * unless v has "suid" or "nosuid", and "nodev" unless it has "dev" or "nodev" (a volume's
 * set-uid files and device nodes do not count on the host unless the volume asks).  Returns a
 * new vector of v's own strings (free the vector only, not its items), or NULL on ENOMEM. */
char **mount_options_own_mount(char *const *v, bool read_only);

/* Joins v with ','.  Returns a new string ("" for none) or NULL on ENOMEM. */
char *mount_options_join(char *const *v);

/* The value of the last option named key in v: "2049" for port=2049, "" for a flag option
 * ("ro"); NULL when v has no such option.  The name compares case-sensitively, as the
 * kernel does. */
const char *mount_options_get(char *const *v, const char *key);

/* Whether opt is sensitive (see above); extra may be NULL. */
bool mount_option_is_sensitive(const char *opt, const char *extra);

/* v joined with ',' and each sensitive option masked.  Returns a new string or NULL. */
char *mount_options_mask(char *const *v, const char *extra);

/* Replaces in text (a NUL-terminated string in a buffer of size bytes) every occurrence of
 * the value of each sensitive option of v (of the whole option for a sensitive flag) with
 * "****", so that a message that echoes an option (a helper's error, a command line) leaks
 * nothing.  The result is truncated to fit size. */
void mount_options_mask_text(char *text, size_t size, char *const *v, const char *extra);
