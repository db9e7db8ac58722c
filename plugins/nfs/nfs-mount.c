/* nfs-mount.c - see nfs-mount.h. */
#include <errno.h>
#include <fcntl.h>
#include <libmount.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "mount-options.h"
#include "mount-util.h"
#include "nfs-child.h"
#include "nfs-mount.h"
#include "nfs-mountinfo.h"
#include "nfs-server.h"
#include "nfs-settings.h"
#include "path-util.h"
#include "server-health.h"

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

	nfs_volume_options_text(v, opts, sizeof(opts));
	if (r == -ETIMEDOUT)
		return err_set(err, -ETIMEDOUT,
			       "mount %s on %s timed out after %llums: the server accepts "
			       "connections but does not answer (options %s)",
			       v->source, target, (unsigned long long)nfs_settings.op_timeout_ms,
			       opts);
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

int nfs_unmount(const char *path, struct error_info *err)
{
	static const int steps[] = { 0, MNT_FORCE, MNT_DETACH };
	static const char *const step_names[] = { "umount", "umount MNT_FORCE",
						  "umount MNT_DETACH" };
	bool any = false;
	int r;

	for (int round = 0; round < 8; round++) {
		bool gone = false;

		r = nfs_mountinfo_lookup(path, NULL);
		if (r < 0)
			return err_set(err, r, "reading the mount table: %s", strerror(-r));
		if (r == 0)
			return any ? 0 : -EINVAL;
		for (size_t i = 0; i < ARRAY_SIZE(steps) && !gone; i++) {
			struct umount_job job = { .target = path, .flags = steps[i] };
			uint64_t wait = i + 1 < ARRAY_SIZE(steps) ? nfs_settings.unmount_escalate_ms
								  : nfs_settings.op_timeout_ms;
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
			if (nfs_mountinfo_lookup(path, NULL) == 0)
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
				       path, (unsigned long long)nfs_settings.unmount_escalate_ms);
		any = true;
	}
	return err_set(err, -EBUSY, "%s: still mounted after 8 unmounts", path);
}

/* The mount itself, once the server's gate let it through. */
static int mount_nfs_now(const struct nfs_volume *v, const struct mount_target *t,
			 const char *canon, struct mount_job *job, struct error_info *err)
{
	struct nfs_child c;
	int r;

	r = nfs_server_check_reachable(v, NULL, err);
	if (r < 0)
		return r;
	if (log_debug_enabled("nfs")) {
		char o[256];
		nfs_volume_options_text(v, o, sizeof(o));
		log_debug("nfs", "mounting", "source", v->source, "target", t->path, "options", o);
	}
	memset(&c, 0, sizeof(c));
	r = nfs_child_run(&c, mount_job_run, job, nfs_settings.op_timeout_ms, err);
	if (r == 0)
		return 0;
	if (c.proc.pid <= 0)
		return r; /* never started: err says why */
	if (r == -ETIMEDOUT && nfs_mountinfo_lookup(canon, NULL) == 1) {
		/* The mount landed as the child was killed: do not leave it behind. */
		struct error_info ignored = { 0 };
		(void)nfs_unmount(canon, &ignored);
	}
	return mount_error(v, &c, r, t->path, err);
}

int nfs_mount_at(const struct nfs_volume *v, const struct mount_target *t, const char *canon,
		 struct error_info *err)
{
	_cleanup_free_ char **own = nfs_volume_mount_options(v);
	_cleanup_free_ char *opts = own ? mount_options_join(own) : NULL;
	struct mount_job job = { .source = v->source, .dir_fd = t->parent_fd, .name = t->name };
	struct server_health_op op;
	struct nfs_mount_entry e;
	int r;

	if (!opts)
		return -ENOMEM;
	job.options = opts;
	r = nfs_mountinfo_lookup(canon, &e);
	if (r < 0)
		return err_set(err, r, "reading the mount table: %s", strerror(-r));
	if (r == 1) {
		if (nfs_is_nfs_type(e.fstype) && streq(e.source, v->source))
			return 0;
		return err_set(err, -EBUSY,
			       "%s is already a mount point of something else (%s); refusing to "
			       "mount over it",
			       t->path, e.source);
	}
	r = nfs_server_gate(v, &op, err);
	if (r < 0)
		return r;
	r = mount_nfs_now(v, t, canon, &job, err);
	server_health_end(&op, r, err_msg(err));
	return r;
}

int nfs_bind_at(const char *source, const struct mount_target *t, const char *canon, bool read_only,
		struct error_info *err)
{
	struct bind_job job = {
		.source = source, .dir_fd = t->parent_fd, .name = t->name, .read_only = read_only
	};
	struct nfs_child c;
	int r = nfs_child_run(&c, bind_job_run, &job, nfs_settings.op_timeout_ms, err);

	if (r == -ETIMEDOUT) {
		struct error_info ignored = { 0 };
		if (nfs_mountinfo_lookup(canon, NULL) == 1)
			(void)nfs_unmount(canon, &ignored);
		err_set(err, r, "bind %s on %s timed out after %llums (is the NFS server dead?)",
			source, t->path, (unsigned long long)nfs_settings.op_timeout_ms);
	}
	return r;
}

int nfs_statfs(const char *path, struct error_info *err)
{
	uint64_t timeout = nfs_settings.op_timeout_ms;
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
