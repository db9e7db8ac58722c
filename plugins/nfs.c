/* nfs.c - the "nfs" plugin: an export of an NFS server, mounted with the kernel's NFS client
 * through libmount, which runs mount.nfs (nfs-common) as mount(8) does on any node.
 *
 * Spec: pod spec files give {"nfs": {"server": ..., "path": ..., "readOnly": bool}} and the
 * volume's "mountOptions" (Kubernetes' names); a CSI volume_context gives type=nfs, server,
 * share (or path) and mountOptions (one comma-separated string), plus the capability's mount
 * flags.  The mount is source "server:/path" ("[v6addr]:/path") with the spec's options,
 * plus "ro" when read-only, and "nosuid" and "nodev" unless the options ask "suid" or "dev"
 * (as on the agent's device mounts; kubelet's nfs plugin adds neither; mount.nfs itself
 * adds addr= and clientaddr=).
 *
 * Modes (--nfs-mode, this plugin's option):
 *   shared (default): one NFS mount per node per export and options, at the node-wide dir the
 *     core gives mount_device (or kubelet's staging dir with CSI), bind-mounted into each pod;
 *     unmounted when the last pod goes.
 *   direct: each pod dir gets its own NFS mount, as kubelet's in-tree plugin does.
 *
 * A dead server never blocks an agent thread: every mount, unmount and statfs of an NFS path
 * runs in a killable child (nfs-child.h) with a deadline (--nfs-timeout); a stuck unmount
 * is escalated to MNT_FORCE, then MNT_DETACH, each after --nfs-unmount-escalate.  Whether a
 * path is mounted, and by what, is read from /proc/self/mountinfo, never by stat()ing the
 * path.  Before a mount, a TCP connect to the server's port (port= or 2049) with a short
 * timeout (--nfs-connect-timeout) turns "server down" into an error in milliseconds.
 *
 * Every message this file produces has the values of sensitive mount options masked (see
 * mount-options.h; the spec attribute "sensitiveMountOptions" lists more option names). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmount.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "mount-options.h"
#include "mount-util.h"
#include "nfs-child.h"
#include "nfs-probe.h"
#include "path-util.h"
#include "plugin-option.h"
#include "plugin.h"
#include "server-health.h"

#define NFS_DEFAULT_PORT 2049
#define SERVER_MAX 253
#define EXPORT_MAX 1024

/* One NFS volume as the spec describes it, ready to mount. */
struct nfs_volume {
	char server[SERVER_MAX + 1];		  /* bare: "10.0.2.2", "fd00::1", "nfs.example" */
	char path[EXPORT_MAX + 1];		  /* the export, normalized: "/export" */
	char source[SERVER_MAX + EXPORT_MAX + 4]; /* "10.0.2.2:/export", "[fd00::1]:/x" */
	char **options;				  /* spec options, CSI mountOptions, then "ro" */
	const char *sensitive;			  /* the spec's sensitiveMountOptions, or NULL */
	unsigned port;				  /* for the reachability check */
};

/* The plugin's options (its table is at the end of this file): set before the agent starts,
 * read-only afterwards. */
static struct {
	bool direct;		      /* --nfs-mode direct: one NFS mount per pod */
	uint64_t op_timeout_ms;	      /* a mount, unmount or statfs gives up after this */
	uint64_t connect_timeout_ms;  /* the reachability check's TCP connect */
	uint64_t unmount_escalate_ms; /* then MNT_FORCE, then MNT_DETACH */
} settings = {
	.direct = false,
	.op_timeout_ms = 30000,
	.connect_timeout_ms = 2000,
	.unmount_escalate_ms = 10000,
};

static void nfs_volume_done(struct nfs_volume *v)
{
	v->options = mount_options_free(v->options);
}

/* --- spec ------------------------------------------------------------------------------ */

static bool nfs_can_support(const struct volume_spec *spec)
{
	return streq(spec->type, "nfs");
}

static bool is_ipv6_literal(const char *s)
{
	struct in6_addr a;

	return inet_pton(AF_INET6, s, &a) == 1;
}

/* Checks server and stores it without brackets in ret (SERVER_MAX + 1 bytes). */
static int parse_server(const char *s, char *ret, struct error_info *err)
{
	size_t n;

	if (!s || !*s)
		return err_set(err, -EINVAL, "server: required");
	n = strlen(s);
	if (s[0] == '[') {
		if (n < 3 || s[n - 1] != ']' || n - 2 > SERVER_MAX)
			return err_set(err, -EINVAL,
				       "server: \"%s\" is not a bracketed IPv6 address", s);
		memcpy(ret, s + 1, n - 2);
		ret[n - 2] = '\0';
		if (!is_ipv6_literal(ret))
			return err_set(err, -EINVAL,
				       "server: \"%s\" is not a bracketed IPv6 address", s);
		return 0;
	}
	if (n > SERVER_MAX)
		return err_set(err, -EINVAL, "server: longer than %d characters", SERVER_MAX);
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
	if (strlen(s) > EXPORT_MAX)
		return err_set(err, -EINVAL, "%s: longer than %d characters", field, EXPORT_MAX);
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
static int nfs_volume_load(const struct volume_spec *spec, bool read_only, struct nfs_volume *v,
			   struct error_info *err)
{
	const char *path = volume_spec_get(spec, "path");
	const char *share = volume_spec_get(spec, "share");
	const char *attr_opts = volume_spec_get(spec, "mountOptions");
	const char *port;
	char other[EXPORT_MAX + 1];
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

static int nfs_validate(const struct volume_spec *spec, struct error_info *err)
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
static char *nfs_get_volume_name(const struct volume_spec *spec)
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
static int nfs_construct_spec(const char *volume_name, const char *mount_path,
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

static bool nfs_uses_device(const struct volume_spec *spec)
{
	return !settings.direct;
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
static int nfs_volume_finish(struct nfs_volume *v, int r, struct error_info *err)
{
	r = masked(v, r, err);
	nfs_volume_done(v);
	return r;
}

/* The options of the mount: the spec's, plus nosuid and nodev unless it asks suid or dev
 * (a vector of v's strings: free the vector only).  Not in v->options, which names the
 * volume: the names of the mounts older agents made stay the same. */
static char **mount_options_of(const struct nfs_volume *v)
{
	return mount_options_own_mount(v->options, false);
}

/* The options of the mount for a message: "vers=4.1,password=****,nosuid,nodev". */
static void options_for_message(const struct nfs_volume *v, char *buf, size_t size)
{
	_cleanup_free_ char **o = mount_options_of(v);
	_cleanup_free_ char *m = o ? mount_options_mask(o, v->sensitive) : NULL;

	snprintf(buf, size, "%s", m && *m ? m : "none");
}

static void host_port(const struct nfs_volume *v, char *buf, size_t size)
{
	snprintf(buf, size, strchr(v->server, ':') ? "[%s]:%u" : "%s:%u", v->server, v->port);
}

/* --- mount table (read from mountinfo, never by touching the path) --------------------- */

struct mount_entry {
	char source[SERVER_MAX + EXPORT_MAX + 4];
	char fstype[32];
	char root[PATH_MAX];
	dev_t devno;
	bool ro;
};

/* Looks up the topmost mount at path.  Returns 1 (found, ret filled), 0, or -errno. */
static int mountinfo_lookup(const char *path, struct mount_entry *ret)
{
	struct libmnt_table *tb = mnt_new_table();
	struct libmnt_fs *fs;
	int r = 0;

	if (!tb)
		return -ENOMEM;
	if (mnt_table_parse_file(tb, "/proc/self/mountinfo") < 0) {
		mnt_unref_table(tb);
		return -EIO;
	}
	fs = mnt_table_find_target(tb, path, MNT_ITER_BACKWARD);
	if (fs) {
		const char *vfs = mnt_fs_get_vfs_options(fs);
		if (ret) {
			snprintf(ret->source, sizeof(ret->source), "%s",
				 mnt_fs_get_source(fs) ?: "");
			snprintf(ret->fstype, sizeof(ret->fstype), "%s",
				 mnt_fs_get_fstype(fs) ?: "");
			snprintf(ret->root, sizeof(ret->root), "%s", mnt_fs_get_root(fs) ?: "/");
			ret->devno = mnt_fs_get_devno(fs);
			ret->ro = vfs && mnt_optstr_get_option(vfs, "ro", NULL, NULL) == 0;
		}
		r = 1;
	}
	mnt_unref_table(tb);
	return r;
}

/* path with its parent resolved (the parent is a local directory; the last component may
 * be an NFS mount and is not touched), as mountinfo shows it. */
static int canonical_path(const char *path, char *ret, size_t size)
{
	_cleanup_free_ char *parent = strdup(path);
	char real[PATH_MAX];
	char *slash;

	if (!parent)
		return -ENOMEM;
	slash = strrchr(parent, '/');
	if (!slash || !slash[1])
		return -EINVAL;
	*slash = '\0';
	if (!realpath(*parent ? parent : "/", real))
		return -errno;
	if (snprintf(ret, size, "%s/%s", streq(real, "/") ? "" : real, slash + 1) >= (int)size)
		return -ENAMETOOLONG;
	return 0;
}

/* The canonical path of name in dir_fd. */
static int canonical_target(const struct mount_target *t, char *ret, size_t size)
{
	char fdp[FD_PATH_MAX], real[PATH_MAX];
	ssize_t n = readlink(path_fd_path(t->parent_fd, fdp), real, sizeof(real) - 1);

	if (n < 0)
		return -errno;
	real[n] = '\0';
	if (snprintf(ret, size, "%s/%s", streq(real, "/") ? "" : real, t->name) >= (int)size)
		return -ENAMETOOLONG;
	return 0;
}

static bool is_nfs_type(const char *fstype)
{
	return streq(fstype, "nfs") || streq(fstype, "nfs4");
}

/* --- work done in children -------------------------------------------------------------- */

struct mount_job {
	const char *source;
	int dir_fd;
	const char *name;
	const char *options;
};

static int mount_job_run(void *arg, struct error_info *err)
{
	const struct mount_job *j = arg;
	struct libmnt_context *cxt;
	char dst[FD_PATH_MAX], buf[256] = "";
	int fd, rc;

	/* Not O_CLOEXEC: mount.nfs gets /proc/self/fd/N as the mount point and must be able to
	 * resolve it.  This process is single-threaded, so nothing else inherits it. */
	fd = openat(j->dir_fd, j->name, O_PATH | O_DIRECTORY | O_NOFOLLOW);
	if (fd < 0)
		return err_set(err, -errno, "mount target %s: %s", j->name, strerror(errno));
	cxt = mnt_new_context();
	if (!cxt)
		return -ENOMEM;
	mnt_context_disable_canonicalize(cxt, 1);
	mnt_context_disable_mtab(cxt, 1);
	if (mnt_context_set_source(cxt, j->source) < 0 ||
	    mnt_context_set_target(cxt, path_fd_path(fd, dst)) < 0 ||
	    mnt_context_set_fstype(cxt, "nfs") < 0 ||
	    (*j->options && mnt_context_set_options(cxt, j->options) < 0))
		return err_set(err, -ENOMEM, "cannot set up the mount context");
	rc = mnt_context_mount(cxt);
	/* A helper's failure is not always in rc: its exit status says. */
	if (rc == 0 &&
	    (!mnt_context_helper_executed(cxt) || mnt_context_get_helper_status(cxt) == 0))
		return 0;
	if (mnt_context_helper_executed(cxt))
		return err_set(err, -EIO, "mount.nfs exited with status %d",
			       mnt_context_get_helper_status(cxt));
	mnt_context_get_excode(cxt, rc, buf, sizeof(buf));
	rc = mnt_context_get_syscall_errno(cxt) > 0 ? -mnt_context_get_syscall_errno(cxt)
						    : (rc < 0 ? rc : -EIO);
	return err_set(err, rc, "%s", buf[0] ? buf : strerror(-rc));
}

struct bind_job {
	const char *source;
	int dir_fd;
	const char *name;
	bool read_only;
};

static int bind_job_run(void *arg, struct error_info *err)
{
	const struct bind_job *j = arg;
	int src = open(j->source, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (src < 0)
		return err_set(err, -errno, "node-wide mount %s: %s", j->source, strerror(errno));
	return mnt_util_bind_at(src, j->dir_fd, j->name, j->read_only, err);
}

struct umount_job {
	const char *target;
	int flags;
};

static int umount_job_run(void *arg, struct error_info *err)
{
	const struct umount_job *j = arg;

	if (umount2(j->target, j->flags | UMOUNT_NOFOLLOW) < 0)
		return -errno;
	return 0;
}

static int statfs_job_run(void *arg, struct error_info *err)
{
	struct statfs sf;

	if (statfs(arg, &sf) < 0)
		return -errno;
	return 0;
}

/* --- operations -------------------------------------------------------------------------- */

/* A TCP connect to the server's NFS port within nfs_connect_timeout_ms.  ret_fd (may be
 * NULL: closed) gets the connected socket. */
static int check_reachable(const struct nfs_volume *v, int *ret_fd, struct error_info *err)
{
	uint64_t timeout = settings.connect_timeout_ms;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char port[8], hp[SERVER_MAX + 16];
	struct timespec t0, t1;
	int r, last = ETIMEDOUT;

	host_port(v, hp, sizeof(hp));
	snprintf(port, sizeof(port), "%u", v->port);
	r = getaddrinfo(v->server, port, &hints, &res);
	if (r != 0)
		return err_set(err, -EHOSTUNREACH, "nfs server %s is unreachable: %s", hp,
			       r == EAI_SYSTEM ? strerror(errno) : gai_strerror(r));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		_cleanup_close_ int fd =
			socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		uint64_t spent;
		socklen_t len = sizeof(int);
		int so = 0;

		if (fd < 0) {
			last = errno;
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			if (ret_fd)
				*ret_fd = TAKE_FD(fd);
			goto ok;
		}
		if (errno != EINPROGRESS) {
			last = errno;
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		spent = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000 +
			(uint64_t)((t1.tv_nsec - t0.tv_nsec) / 1000000);
		if (spent >= timeout) {
			last = ETIMEDOUT;
			break;
		}
		r = poll(&p, 1, (int)(timeout - spent));
		if (r == 0) {
			last = ETIMEDOUT;
			continue;
		}
		if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &len) < 0) {
			last = errno;
			continue;
		}
		if (so == 0) {
			if (ret_fd)
				*ret_fd = TAKE_FD(fd);
			goto ok;
		}
		last = so;
	}
	freeaddrinfo(res);
	if (last == ETIMEDOUT)
		return err_set(err, -ETIMEDOUT,
			       "nfs server %s is unreachable: no answer to a TCP connect within "
			       "%llums",
			       hp, (unsigned long long)timeout);
	if (last != ECONNREFUSED && last != EHOSTUNREACH && last != ENETUNREACH)
		return err_set(err, -EHOSTUNREACH, "nfs server %s is unreachable: %s", hp,
			       strerror(last));
	return err_set(err, -last, "nfs server %s is unreachable: %s", hp, strerror(last));
ok:
	freeaddrinfo(res);
	return 0;
}

/* First line(s) of what mount.nfs said, on one line. */
static void helper_text(const struct nfs_child *c, char *buf, size_t size)
{
	size_t n = 0;

	buf[0] = '\0';
	for (const char *p = c->output; *p && n + 1 < size;) {
		size_t len = strcspn(p, "\n");
		if (len) {
			n += (size_t)snprintf(buf + n, size - n, "%s%.*s", n ? "; " : "", (int)len,
					      p);
			if (n >= size)
				n = size - 1;
		}
		p += len;
		if (*p)
			p++;
	}
}

/* Turns a failed mount into an error a user can act on. */
static int mount_error(const struct nfs_volume *v, const struct nfs_child *c, int r,
		       const char *target, struct error_info *err)
{
	char text[400], opts[256];
	int code = r;

	options_for_message(v, opts, sizeof(opts));
	if (r == -ETIMEDOUT)
		return err_set(err, -ETIMEDOUT,
			       "mount %s on %s timed out after %llums: the server accepts "
			       "connections but does not answer (options %s)",
			       v->source, target, (unsigned long long)settings.op_timeout_ms, opts);
	helper_text(c, text, sizeof(text));
	if (!text[0])
		snprintf(text, sizeof(text), "%s", err_msg(&c->result));
	if (r == -ENODEV || strstr(text, "No such device") ||
	    strstr(text, "unknown filesystem type"))
		return err_set(err, -ENODEV,
			       "mount %s: this kernel has no NFS client (unknown filesystem type "
			       "'nfs'): load the nfs module or install the kernel's NFS support",
			       v->source);
	if (strstr(text, "access denied") || strstr(text, "Permission denied"))
		code = -EACCES;
	else if (strstr(text, "No such file or directory"))
		code = -ENOENT;
	else if (strstr(text, "incorrect mount option") || strstr(text, "Invalid argument") ||
		 strstr(text, "bad option"))
		code = -EINVAL;
	else if (strstr(text, "Connection refused"))
		code = -ECONNREFUSED;
	else if (strstr(text, "timed out"))
		code = -ETIMEDOUT;
	else if (code >= 0)
		code = -EIO;
	return err_set(err, code, "mount %s on %s (options %s) failed: %s", v->source, target, opts,
		       text);
}

/* Unmounts path (canonical), escalating when it hangs: umount2(0); after
 * nfs_unmount_escalate_ms MNT_FORCE; after as long again MNT_DETACH.  Stacked mounts are
 * all removed.  Returns 0, -EINVAL when nothing was mounted there, or -errno. */
static int unmount_escalating(const char *path, struct error_info *err)
{
	static const int steps[] = { 0, MNT_FORCE, MNT_DETACH };
	static const char *const step_names[] = { "umount", "umount MNT_FORCE",
						  "umount MNT_DETACH" };
	bool any = false;
	int r;

	for (int round = 0; round < 8; round++) {
		bool gone = false;

		r = mountinfo_lookup(path, NULL);
		if (r < 0)
			return err_set(err, r, "reading the mount table: %s", strerror(-r));
		if (r == 0)
			return any ? 0 : -EINVAL;
		for (size_t i = 0; i < ARRAY_SIZE(steps) && !gone; i++) {
			struct umount_job job = { .target = path, .flags = steps[i] };
			uint64_t wait = i + 1 < ARRAY_SIZE(steps) ? settings.unmount_escalate_ms
								  : settings.op_timeout_ms;
			struct nfs_child c;

			r = nfs_child_start(&c, umount_job_run, &job, err);
			if (r < 0)
				return r;
			if (nfs_child_wait(&c, wait)) {
				r = c.result.code;
				if (r == 0 || r == -EINVAL || r == -ENOENT) {
					gone = true;
					break;
				}
				if (r == -EBUSY)
					return err_set(err, r,
						       "unmount %s: the mount is busy (a process "
						       "uses it)",
						       path);
				return err_set(err, r, "unmount %s (%s): %s", path, step_names[i],
					       strerror(-r));
			}
			nfs_child_abandon(&c);
			/* A stuck umount may already have detached the mount and hang in the
			 * teardown of the NFS client: then the path is free. */
			if (mountinfo_lookup(path, NULL) == 0)
				gone = true;
			else if (i + 1 < ARRAY_SIZE(steps))
				log_debug("nfs", "unmount is stuck, escalating", "target", path,
					  "next", step_names[i + 1]);
		}
		if (!gone)
			return err_set(err, -ETIMEDOUT,
				       "unmount %s did not finish: umount, MNT_FORCE after %llums "
				       "and MNT_DETACH after as long again all hung (is the NFS "
				       "server dead?)",
				       path, (unsigned long long)settings.unmount_escalate_ms);
		any = true;
	}
	return err_set(err, -EBUSY, "%s: still mounted after 8 unmounts", path);
}

static int mount_nfs_now(const struct nfs_volume *v, const struct mount_target *t,
			 const char *canon, struct mount_job *job, struct error_info *err);

/* The probe of a server that is down: TCP connect, then the NFS NULL call (nfs-probe.h). */
static int probe_server(void *arg, struct error_info *err)
{
	const struct nfs_volume *v = arg;
	int fd = -1, r = check_reachable(v, &fd, err);

	return r < 0 ? r : nfs_probe_null(fd, settings.connect_timeout_ms, err);
}

/* The server's gate (server-health.h): begins op on v's server, running the probe when the
 * server is down and one is due.  Returns 0 (end op with server_health_end), or -errno with
 * err set: -EHOSTUNREACH while the server is down. */
static int server_gate(const struct nfs_volume *v, struct server_health_op *op,
		       struct error_info *err)
{
	char key[SERVER_MAX + 32], hp[SERVER_MAX + 16];

	host_port(v, hp, sizeof(hp));
	snprintf(key, sizeof(key), "nfs server %s", hp);
	return server_health_gate(key, op, probe_server, (void *)v, err);
}

/* Mounts v at t (canonical path canon), unless it is there already. */
static int mount_nfs_at(const struct nfs_volume *v, const struct mount_target *t, const char *canon,
			struct error_info *err)
{
	_cleanup_free_ char **own = mount_options_of(v);
	_cleanup_free_ char *opts = own ? mount_options_join(own) : NULL;
	struct mount_job job = { .source = v->source, .dir_fd = t->parent_fd, .name = t->name };
	struct server_health_op op;
	struct mount_entry e;
	int r;

	if (!opts)
		return -ENOMEM;
	job.options = opts;
	r = mountinfo_lookup(canon, &e);
	if (r < 0)
		return err_set(err, r, "reading the mount table: %s", strerror(-r));
	if (r == 1) {
		if (is_nfs_type(e.fstype) && streq(e.source, v->source))
			return 0;
		return err_set(err, -EBUSY,
			       "%s is already a mount point of something else (%s); refusing to "
			       "mount over it",
			       t->path, e.source);
	}
	r = server_gate(v, &op, err);
	if (r < 0)
		return r;
	r = mount_nfs_now(v, t, canon, &job, err);
	server_health_end(&op, r, err_msg(err));
	return r;
}

/* The mount itself, once the server's gate let it through. */
static int mount_nfs_now(const struct nfs_volume *v, const struct mount_target *t,
			 const char *canon, struct mount_job *job, struct error_info *err)
{
	struct nfs_child c;
	int r;

	r = check_reachable(v, NULL, err);
	if (r < 0)
		return r;
	if (log_debug_enabled("nfs")) {
		char o[256];
		options_for_message(v, o, sizeof(o));
		log_debug("nfs", "mounting", "source", v->source, "target", t->path, "options", o);
	}
	memset(&c, 0, sizeof(c));
	r = nfs_child_run(&c, mount_job_run, job, settings.op_timeout_ms, err);
	if (r == 0)
		return 0;
	if (c.proc.pid <= 0)
		return r; /* never started: err says why */
	if (r == -ETIMEDOUT && mountinfo_lookup(canon, NULL) == 1) {
		/* The mount landed as the child was killed: do not leave it behind. */
		struct error_info ignored = { 0 };
		(void)unmount_escalating(canon, &ignored);
	}
	return mount_error(v, &c, r, t->path, err);
}

/* Reads the target's entry itself (seen is not used: nfs compares the source and the
 * superblock's root, which the lean table does not keep). */
static int nfs_check_set_up(const struct volume_mounter *m, const char *target,
			    struct mount_seen *seen, struct error_info *err)
{
	struct nfs_volume v;
	struct mount_entry e, d;
	char canon[PATH_MAX], dcanon[PATH_MAX];
	int r;

	r = canonical_path(target, canon, sizeof(canon));
	if (r < 0)
		return r == -ENOENT ? 0 : err_set(err, r, "%s: %s", target, strerror(-r));
	r = mountinfo_lookup(canon, &e);
	if (r <= 0)
		return r;
	if (m->device_mount_path) {
		r = canonical_path(m->device_mount_path, dcanon, sizeof(dcanon));
		if (r < 0)
			return r == -ENOENT ? 0 : r;
		r = mountinfo_lookup(dcanon, &d);
		if (r <= 0)
			return r;
		return e.devno == d.devno && streq(e.root, d.root) && e.ro == m->read_only;
	}
	r = nfs_volume_load(m->spec, m->read_only, &v, err);
	if (r < 0) {
		nfs_volume_done(&v);
		return r;
	}
	r = is_nfs_type(e.fstype) && streq(e.source, v.source) && e.ro == m->read_only;
	nfs_volume_done(&v);
	return r;
}

static int nfs_set_up_at(const struct volume_mounter *m, const struct mount_target *target,
			 struct error_info *err)
{
	struct nfs_volume v;
	char canon[PATH_MAX];
	int r = nfs_check_set_up(m, target->path, &(struct mount_seen){ 0 }, err);

	if (r == 1)
		return 0;
	r = canonical_target(target, canon, sizeof(canon));
	if (r < 0)
		return err_set(err, r, "%s: %s", target->path, strerror(-r));
	r = mountinfo_lookup(canon, NULL);
	if (r == 1)
		return err_set(err, -EBUSY,
			       "%s is already a mount point of something else; refusing to mount "
			       "over it",
			       target->path);
	r = nfs_volume_load(m->spec, m->read_only, &v, err);
	if (r < 0)
		goto out;
	if (m->device_mount_path) {
		struct bind_job job = { .source = m->device_mount_path,
					.dir_fd = target->parent_fd,
					.name = target->name,
					.read_only = m->read_only };
		struct nfs_child c;

		r = nfs_child_run(&c, bind_job_run, &job, settings.op_timeout_ms, err);
		if (r == -ETIMEDOUT) {
			struct error_info ignored = { 0 };
			if (mountinfo_lookup(canon, NULL) == 1)
				(void)unmount_escalating(canon, &ignored);
			err_set(err, r,
				"bind %s on %s timed out after %llums (is the NFS server "
				"dead?)",
				m->device_mount_path, target->path,
				(unsigned long long)settings.op_timeout_ms);
		}
		goto out;
	}
	r = mount_nfs_at(&v, target, canon, err);
out:
	return nfs_volume_finish(&v, r, err);
}

static int nfs_tear_down_at(const char *volume_name, const char *pod_uid, const char *target,
			    struct error_info *err)
{
	char canon[PATH_MAX];
	int r = canonical_path(target, canon, sizeof(canon));

	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return err_set(err, r, "%s: %s", target, strerror(-r));
	r = unmount_escalating(canon, err);
	return r == -EINVAL ? 0 : r;
}

static int nfs_mount_device(const struct volume_spec *spec, const char *device_path, bool read_only,
			    const struct mount_target *target, struct error_info *err)
{
	struct nfs_volume v;
	char canon[PATH_MAX];
	int r = nfs_volume_load(spec, read_only, &v, err);

	if (r < 0)
		goto out;
	r = canonical_target(target, canon, sizeof(canon));
	if (r < 0) {
		err_set(err, r, "%s: %s", target->path, strerror(-r));
		goto out;
	}
	r = mount_nfs_at(&v, target, canon, err);
out:
	return nfs_volume_finish(&v, r, err);
}

static int nfs_unmount_device(const char *path, struct error_info *err)
{
	return nfs_tear_down_at(NULL, NULL, path, err);
}

static int nfs_check_health(const struct volume_spec *spec, const char *path,
			    struct error_info *err)
{
	uint64_t timeout = settings.op_timeout_ms;
	struct nfs_child c;
	int r = nfs_child_run(&c, statfs_job_run, (void *)path, timeout, err);

	switch (r) {
	case 0:
		return 0;
	case -ETIMEDOUT:
		return err_set(err, r, "the NFS server did not answer within %llums (statfs %s)",
			       (unsigned long long)timeout, path);
	case -ESTALE:
		return err_set(err, r,
			       "stale file handle at %s: the export was removed or recreated on "
			       "the server",
			       path);
	case -EIO:
	case -ENOTCONN:
		return err_set(err, r, "statfs %s: %s", path, strerror(-r));
	default:
		if (!err || !err->code)
			err_set(err, r, "statfs %s: %s", path, strerror(-r));
		return r;
	}
}

static const struct volume_ops nfs_ops = {
	.can_support = nfs_can_support,
	.validate = nfs_validate,
	.get_volume_name = nfs_get_volume_name,
	.set_up_at = nfs_set_up_at,
	.tear_down_at = nfs_tear_down_at,
	.check_set_up = nfs_check_set_up,
	.construct_spec = nfs_construct_spec,
	.check_health = nfs_check_health,
};

/* No attach: mount_device gets no device and mounts the export at the staging dir. */
static const struct device_mount_ops nfs_device_ops = {
	.uses_device = nfs_uses_device,
	.mount_device = nfs_mount_device,
	.unmount_device = nfs_unmount_device,
};

static int set_mode(const char *value, uint64_t ms, struct error_info *err)
{
	if (!streq(value, "shared") && !streq(value, "direct"))
		return err_set(err, -EINVAL, "\"%s\" is not shared or direct", value);
	settings.direct = streq(value, "direct");
	return 0;
}

static int set_op_timeout(const char *value, uint64_t ms, struct error_info *err)
{
	settings.op_timeout_ms = ms;
	return 0;
}

static int set_connect_timeout(const char *value, uint64_t ms, struct error_info *err)
{
	settings.connect_timeout_ms = ms;
	return 0;
}

static int set_unmount_escalate(const char *value, uint64_t ms, struct error_info *err)
{
	settings.unmount_escalate_ms = ms;
	return 0;
}

static int set_hung_after(const char *value, uint64_t ms, struct error_info *err)
{
	server_health_set_hung_after(ms);
	return 0;
}

/* The defaults here and in the settings' initializer above agree (test-config checks). */
static const struct plugin_option nfs_options[] = {
	{ "nfs-mode", PLUGIN_OPTION_STRING, "shared",
	  "shared: one NFS mount per export on the node, bound into pods; direct: one per pod",
	  set_mode },
	{ "nfs-timeout", PLUGIN_OPTION_DURATION, "30s",
	  "an NFS mount, unmount or statfs is given up after this", set_op_timeout },
	{ "nfs-connect-timeout", PLUGIN_OPTION_DURATION, "2s",
	  "the TCP reachability check of the NFS server before mounting", set_connect_timeout },
	{ "nfs-hung-after", PLUGIN_OPTION_DURATION, "5s",
	  "a mount to an NFS server in flight this long makes the server down: other mounts to "
	  "it fail at once (UNAVAILABLE) until it answers a probe; 0: only a timeout does",
	  set_hung_after },
	{ "nfs-unmount-escalate", PLUGIN_OPTION_DURATION, "10s",
	  "a stuck NFS unmount is retried with MNT_FORCE, then MNT_DETACH, after this",
	  set_unmount_escalate },
	{ 0 }
};

const struct volume_plugin nfs_plugin = {
	.name = "nfs",
	.ops = &nfs_ops,
	.device = &nfs_device_ops,
	.options = nfs_options,
};
