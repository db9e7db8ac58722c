/* nfs-spec.c - see nfs-spec.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "mount-options.h"
#include "nfs-spec.h"

void nfs_volume_done(struct nfs_volume *v)
{
	v->options = mount_options_free(v->options);
}

static bool is_ipv6_literal(const char *s)
{
	struct in6_addr a;

	return inet_pton(AF_INET6, s, &a) == 1;
}

/* Checks server and stores it without brackets in ret (NFS_SERVER_MAX + 1 bytes). */
static int parse_server(const char *s, char *ret, struct error_info *err)
{
	size_t n;

	if (!s || !*s)
		return err_set(err, -EINVAL, "server: required");
	n = strlen(s);
	if (s[0] == '[') {
		if (n < 3 || s[n - 1] != ']' || n - 2 > NFS_SERVER_MAX)
			return err_set(err, -EINVAL,
				       "server: \"%s\" is not a bracketed IPv6 address", s);
		memcpy(ret, s + 1, n - 2);
		ret[n - 2] = '\0';
		if (!is_ipv6_literal(ret))
			return err_set(err, -EINVAL,
				       "server: \"%s\" is not a bracketed IPv6 address", s);
		return 0;
	}
	if (n > NFS_SERVER_MAX)
		return err_set(err, -EINVAL, "server: longer than %d characters", NFS_SERVER_MAX);
	if (strchr(s, ':')) {
		if (!is_ipv6_literal(s))
			return err_set(err, -EINVAL,
				       "server: \"%s\" is not a host name or an IP address", s);
	} else {
		if (s[0] == '-' || s[0] == '.')
			return err_set(err, -EINVAL,
				       "server: \"%s\" is not a host name or an IP address", s);
		for (const char *c = s; *c; c++)
			if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			      (*c >= '0' && *c <= '9') || *c == '.' || *c == '-'))
				return err_set(err, -EINVAL,
					       "server: \"%s\" is not a host name or an IP address",
					       s);
	}
	memcpy(ret, s, n + 1);
	return 0;
}

/* Checks an export path and stores it normalized ("//a/b/" -> "/a/b") in ret. */
static int parse_export(const char *field, const char *s, char *ret, struct error_info *err)
{
	size_t len = 0;

	if (s[0] != '/')
		return err_set(err, -EINVAL, "%s: must be an absolute path on the server", field);
	if (strlen(s) > NFS_EXPORT_MAX)
		return err_set(err, -EINVAL, "%s: longer than %d characters", field,
			       NFS_EXPORT_MAX);
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return err_set(err, -EINVAL, "%s: contains a control character", field);
	for (const char *p = s; *p;) {
		size_t n;

		while (*p == '/')
			p++;
		n = strcspn(p, "/");
		if (!n)
			break;
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return err_set(err, -EINVAL, "%s: \"%s\" has a '.' or '..' component",
				       field, s);
		ret[len++] = '/';
		memcpy(ret + len, p, n);
		len += n;
		p += n;
	}
	if (!len)
		ret[len++] = '/';
	ret[len] = '\0';
	return 0;
}

static int check_option(const char *opt, const char *sensitive, struct error_info *err)
{
	static const char *const refused[] = { "bind", "rbind", "remount", "move" };
	const char *port;

	for (size_t i = 0; i < ARRAY_SIZE(refused); i++)
		if (streq(opt, refused[i]))
			return err_set(err, -EINVAL,
				       "mountOptions: \"%s\" is not an NFS mount option", opt);
	for (const char *c = opt; *c; c++)
		if ((unsigned char)*c <= 0x20 || *c == 0x7f) {
			char masked[64];
			snprintf(masked, sizeof(masked), "%.*s", (int)strcspn(opt, "="), opt);
			return err_set(err, -EINVAL,
				       "mountOptions: the option %s%s holds a space or a control "
				       "character",
				       masked, strchr(opt, '=') ? "=..." : "");
		}
	if (startswith(opt, "port=")) {
		char *end;
		long p;

		port = opt + strlen("port=");
		errno = 0;
		p = strtol(port, &end, 10);
		if (!*port || *end || errno || p < 0 || p > 65535)
			return err_set(err, -EINVAL, "mountOptions: port=%s is not a port number",
				       mount_option_is_sensitive(opt, sensitive) ? "****" : port);
	}
	return 0;
}

/* Builds v from spec; read_only adds "ro" (the spec's own readOnly always does). */
int nfs_volume_load(const struct volume_spec *spec, bool read_only, struct nfs_volume *v,
		    struct error_info *err)
{
	const char *path = volume_spec_get(spec, "path");
	const char *share = volume_spec_get(spec, "share");
	const char *attr_opts = volume_spec_get(spec, "mountOptions");
	const char *port;
	char other[NFS_EXPORT_MAX + 1];
	int r;

	memset(v, 0, sizeof(*v));
	v->sensitive = volume_spec_get(spec, "sensitiveMountOptions");
	r = parse_server(volume_spec_get(spec, "server"), v->server, err);
	if (r < 0)
		return r;
	if (!path && !share)
		return err_set(err, -EINVAL, "path: required (CSI: share or path)");
	r = parse_export(path ? "path" : "share", path ? path : share, v->path, err);
	if (r < 0)
		return r;
	if (path && share) {
		r = parse_export("share", share, other, err);
		if (r < 0)
			return r;
		if (!streq(other, v->path))
			return err_set(err, -EINVAL, "share: differs from path; give one of them");
	}
	snprintf(v->source, sizeof(v->source), strchr(v->server, ':') ? "[%s]:%s" : "%s:%s",
		 v->server, v->path);

	for (char **o = spec->mount_options; o && *o; o++)
		if (mount_options_append(&v->options, *o) < 0)
			return -ENOMEM;
	if (attr_opts && *attr_opts) {
		char **extra = NULL;
		r = mount_options_split(attr_opts, &extra);
		if (r == -EINVAL)
			return err_set(err, r,
				       "mountOptions: an empty option or a control character in the "
				       "list");
		if (r < 0)
			return r;
		for (char **o = extra; *o; o++)
			if (mount_options_append(&v->options, *o) < 0) {
				mount_options_free(extra);
				return -ENOMEM;
			}
		mount_options_free(extra);
	}
	for (char **o = v->options; o && *o; o++) {
		r = check_option(*o, v->sensitive, err);
		if (r < 0)
			return r;
	}
	if ((read_only || spec->read_only) &&
	    !(mount_options_get(v->options, "ro") && !mount_options_get(v->options, "rw")))
		if (mount_options_append(&v->options, "ro") < 0)
			return -ENOMEM;
	if (!v->options && mount_options_split("", &v->options) < 0)
		return -ENOMEM;
	port = mount_options_get(v->options, "port");
	v->port = port && atoi(port) > 0 ? (unsigned)atoi(port) : NFS_DEFAULT_PORT;
	return 0;
}

static bool attr_is_known(const char *key)
{
	static const char *const known[] = { "server", "path", "share", "mountOptions",
					     "sensitiveMountOptions" };

	for (size_t i = 0; i < ARRAY_SIZE(known); i++)
		if (streq(key, known[i]))
			return true;
	/* Pod info kubelet adds to a CSI volume_context (podInfoOnMount). */
	return startswith(key, "csi.storage.k8s.io/");
}

int nfs_spec_validate(const struct volume_spec *spec, struct error_info *err)
{
	struct nfs_volume v;
	int r;

	for (size_t i = 0; i < spec->n_attrs; i++)
		if (!attr_is_known(spec->attrs[i].key))
			return err_set(err, -EINVAL,
				       "%s: unknown field (nfs takes server, path, readOnly; CSI: "
				       "server, share or path, mountOptions; and "
				       "sensitiveMountOptions)",
				       spec->attrs[i].key);
	r = nfs_volume_load(spec, false, &v, err);
	nfs_volume_done(&v);
	return r;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "nfs:server:/path", plus "#" and a hash of the sorted options (and of the spec's
 * readOnly) when there are any, so that pods asking for different options never share one
 * mount.  The hash, not the options, keeps secrets out of the name (it appears in paths and
 * logs). */
char *nfs_spec_volume_name(const struct volume_spec *spec)
{
	struct nfs_volume v;
	struct error_info ignored = { 0 };
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
	size_t n;
	char *name = NULL;

	if (nfs_volume_load(spec, false, &v, &ignored) < 0) {
		nfs_volume_done(&v);
		/* Unvalidated specs never get here; keep a stable name anyway. */
		return strdup_printf("nfs:%s:%s", volume_spec_get(spec, "server") ?: "",
				     volume_spec_get(spec, "path") ?: volume_spec_get(spec, "share") ?: "");
	}
	n = mount_options_count(v.options);
	if (!n && !spec->read_only) {
		name = strdup_printf("nfs:%s", v.source);
		nfs_volume_done(&v);
		return name;
	}
	qsort(v.options, n, sizeof(char *), cmp_str);
	for (size_t i = 0; i < n; i++) {
		for (const char *c = v.options[i]; *c; c++)
			h = (h ^ (unsigned char)*c) * 0x100000001b3ULL;
		h = (h ^ ',') * 0x100000001b3ULL;
	}
	if (spec->read_only)
		h = (h ^ '!') * 0x100000001b3ULL;
	name = strdup_printf("nfs:%s#%08x", v.source, (unsigned)(h ^ (h >> 32)));
	nfs_volume_done(&v);
	return name;
}

/* Rebuilds a spec from "nfs:server:/path" (a name without options).  A name with an options
 * hash cannot be turned back into its options: such a mount is only torn down. */
int nfs_spec_from_name(const char *volume_name, const char *mount_path,
		       struct volume_spec **ret_spec, struct error_info *err)
{
	_cleanup_volume_spec_ struct volume_spec *s = NULL;
	_cleanup_free_ char *server = NULL;
	const char *rest, *path;

	if (!startswith(volume_name, "nfs:"))
		return err_set(err, -EINVAL, "%s is not an nfs volume name", volume_name);
	if (strchr(volume_name, '#'))
		return err_set(err, -EINVAL,
			       "%s: the mount options are not recorded in the name; the volume can "
			       "only be unmounted",
			       volume_name);
	rest = volume_name + strlen("nfs:");
	if (rest[0] == '[') {
		const char *close = strstr(rest, "]:/");
		if (!close)
			return err_set(err, -EINVAL, "%s is not an nfs volume name", volume_name);
		server = strndup(rest + 1, (size_t)(close - rest - 1));
		path = close + 2;
	} else {
		const char *colon = strstr(rest, ":/");
		if (!colon)
			return err_set(err, -EINVAL, "%s is not an nfs volume name", volume_name);
		server = strndup(rest, (size_t)(colon - rest));
		path = colon + 1;
	}
	s = volume_spec_new("nfs");
	if (!server || !s || volume_spec_set(s, "server", server) < 0 ||
	    volume_spec_set(s, "path", path) < 0)
		return -ENOMEM;
	*ret_spec = TAKE_PTR(s);
	return 0;
}

/* --- messages -------------------------------------------------------------------------- */

/* Masks every sensitive option value that err's message may have picked up. */
static int masked(const struct nfs_volume *v, int r, struct error_info *err)
{
	if (err && r < 0)
		mount_options_mask_text(err->msg, sizeof(err->msg), v->options, v->sensitive);
	return r;
}

/* The end of an operation on v: masks err's message (see masked) and frees v.  Returns r. */
int nfs_volume_finish(struct nfs_volume *v, int r, struct error_info *err)
{
	r = masked(v, r, err);
	nfs_volume_done(v);
	return r;
}

/* The options of the mount: the spec's, plus nosuid and nodev unless it asks suid or dev
 * (a vector of v's strings: free the vector only).  Not in v->options, which names the
 * volume: the names of the mounts older agents made stay the same. */
char **nfs_volume_mount_options(const struct nfs_volume *v)
{
	return mount_options_own_mount(v->options, false);
}

/* The options of the mount for a message: "vers=4.1,password=****,nosuid,nodev". */
void nfs_volume_options_text(const struct nfs_volume *v, char *buf, size_t size)
{
	_cleanup_free_ char **o = nfs_volume_mount_options(v);
	_cleanup_free_ char *m = o ? mount_options_mask(o, v->sensitive) : NULL;

	snprintf(buf, size, "%s", m && *m ? m : "none");
}

void nfs_volume_host_port(const struct nfs_volume *v, char *buf, size_t size)
{
	snprintf(buf, size, strchr(v->server, ':') ? "[%s]:%u" : "%s:%u", v->server, v->port);
}
