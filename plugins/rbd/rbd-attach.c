/* rbd-attach.c - see rbd-attach.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <linux/nbd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "helper-scope.h"
#include "macro.h"
#include "mount-util.h"
#include "path-util.h"
#include "rbd-attach.h"
#include "loop-device.h"
#include "rbd-util.h"
#include "time-util.h"

#define HELPER_OUT 4096
#define ARGV_MAX 32

static const char *const method_names[] = {
	[RBD_METHOD_KRBD] = "krbd",
	[RBD_METHOD_NBD] = "nbd",
	[RBD_METHOD_FUSE] = "fuse",
};

int rbd_method_from_name(const char *name, enum rbd_method *ret)
{
	for (size_t i = 0; i < ARRAY_SIZE(method_names); i++)
		if (streq(name, method_names[i])) {
			*ret = (enum rbd_method)i;
			return 0;
		}
	return -EINVAL;
}

/* The arguments every ceph helper gets: no config file of the host's, our monitors, user and
 * key file, and deadlines for connecting.  key_file is the file to pass (may be a temporary
 * one). */
struct helper_args {
	const char *argv[ARGV_MAX];
	size_t n;
	char secs[32];
	char pool_image[512];
};

static void add(struct helper_args *a, const char *s)
{
	if (a->n < ARGV_MAX - 1)
		a->argv[a->n++] = s;
	a->argv[a->n] = NULL;
}

static void add_common(struct helper_args *a, const struct rbd_params *p, const char *key_file,
		       bool op_timeouts)
{
	snprintf(a->secs, sizeof(a->secs), "%llu",
		 (unsigned long long)((p->timeout_ms + 999) / 1000));
	add(a, "-c");
	add(a, "/dev/null");
	add(a, "-m");
	add(a, p->monitors);
	add(a, "--id");
	add(a, p->user);
	if (key_file) {
		add(a, "--keyfile");
		add(a, key_file);
	} else if (p->keyring) {
		add(a, "--keyring");
		add(a, p->keyring);
	}
	add(a, "--client_mount_timeout");
	add(a, a->secs);
	if (op_timeouts) {
		add(a, "--rados_mon_op_timeout");
		add(a, a->secs);
	}
}

/* The key file to hand a helper: the secretFile, or a temporary one written from the key into
 * the secret dir, never the state dir (*ret_tmp is then set, for rbd_key_file_remove), or NULL
 * when a keyring is used. */
static int key_file_for(const struct rbd_params *p, const char **ret, char **ret_tmp)
{
	*ret = NULL;
	*ret_tmp = NULL;
	if (p->key) {
		int r = path_mkdir_p(p->secret_dir, 0700);
		if (r < 0)
			return r;
		r = rbd_key_file_write(p->secret_dir, p->key, ret_tmp);
		if (r < 0)
			return r;
		*ret = *ret_tmp;
	} else if (p->secret_file) {
		*ret = p->secret_file;
	}
	return 0;
}

/* What a failed helper said, shortened to the lines that explain it: those starting with
 * "rbd:", "rbd-nbd:" or "rbd-fuse:", else the last non-empty line. */
static void summarize(const char *out, char *buf, size_t len)
{
	_cleanup_free_ char *copy = strdup(out ? out : "");
	char *line, *save = NULL, *last = NULL;
	size_t used = 0;

	buf[0] = '\0';
	if (!copy)
		return;
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		while (*line == ' ' || *line == '\t')
			line++;
		if (!*line)
			continue;
		last = line;
		if (startswith(line, "rbd:") || startswith(line, "rbd-nbd:") ||
		    startswith(line, "rbd-fuse:") || strstr(line, "error") ||
		    strstr(line, "failed")) {
			if (strstr(line, "_handle_peer_banner"))
				continue; /* msgr2 probing a v1 port: noise */
			used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s%s",
						 used ? "; " : "", line);
		}
	}
	if (!used && last)
		snprintf(buf, len, "%s", last);
	if (!buf[0])
		snprintf(buf, len, "no output");
}

/* The last line of out that looks like a device path. */
static const char *find_device(const char *out, const char *prefix, char *buf, size_t len)
{
	const char *p = out, *found = NULL;

	while ((p = strstr(p, prefix))) {
		found = p;
		p += strlen(prefix);
	}
	if (!found)
		return NULL;
	snprintf(buf, len, "%.*s", (int)strcspn(found, " \n\t"), found);
	return buf;
}

/* Turns how a map helper (rbd map, rbd-nbd map) ended into the device it printed, or into an
 * error naming the helper and what it said. */
static int map_outcome(const char *helper, const char *package, int r, const char *out,
		       const char *dev_prefix, char *dev, size_t dev_len, uint64_t timeout_ms,
		       struct error_info *err)
{
	char why[1024];

	if (r == -ENOENT)
		return err_set(err, -ENOENT, "%s is not installed", package);
	if (r == -ETIMEDOUT)
		return err_set(err, -ETIMEDOUT, "%s map did not finish within %llus", helper,
			       (unsigned long long)(timeout_ms / 1000));
	if (r != 0 || !find_device(out, dev_prefix, dev, dev_len)) {
		summarize(out, why, sizeof(why));
		return err_set(err, r < 0 ? r : -EIO, "%s map exited with %d: %s", helper, r, why);
	}
	return 0;
}

/* --- krbd --- */

/* Runs "<tool> map POOL/IMAGE [--read-only] <extra...> <common options>" (a: its argv, kept
 * for the caller) and reads the device it made, named prefix..., into dev.  package names what
 * to install when tool is missing.  Returns 0 or a negative errno with err set. */
static int map_image_out(const struct rbd_params *p, const char *tool, const char *package,
			 const char *const *extra, bool op_timeouts, const char *prefix,
			 struct helper_args *a, char *dev, size_t dev_size, char *out,
			 struct error_info *err)
{
	_cleanup_free_ char *tmp_key = NULL;
	const char *key_file;
	int r;

	r = key_file_for(p, &key_file, &tmp_key);
	if (r < 0)
		return err_set(err, r, "cannot write a key file under %s: %s", p->secret_dir,
			       strerror(-r));
	snprintf(a->pool_image, sizeof(a->pool_image), "%s/%s", p->pool, p->image);
	add(a, tool);
	add(a, "map");
	if (p->read_only)
		add(a, "--read-only");
	for (size_t i = 0; extra[i]; i++)
		add(a, extra[i]);
	add_common(a, p, key_file, op_timeouts);
	/* The options end before the positional pool/image where the tool allows it: rbd does
	 * (boost program_options), rbd-nbd does not ("unknown args" after a "--"), so there a
	 * name relies on the validation (rbd.c valid_name: never a leading '-'). */
	if (streq(tool, "rbd"))
		add(a, "--");
	add(a, a->pool_image);
	r = rbd_exec(a->argv, p->timeout_ms, out, HELPER_OUT);
	rbd_key_file_remove(tmp_key);
	return map_outcome(tool, package, r, out, prefix, dev, dev_size, p->timeout_ms, err);
}

/* map_image_out with the helper's output dropped. */
static int map_image(const struct rbd_params *p, const char *tool, const char *package,
		     const char *const *extra, bool op_timeouts, const char *prefix,
		     struct helper_args *a, char *dev, size_t dev_size, struct error_info *err)
{
	_cleanup_free_ char *out = calloc(1, HELPER_OUT);

	if (!out)
		return -ENOMEM;
	return map_image_out(p, tool, package, extra, op_timeouts, prefix, a, dev, dev_size, out,
			     err);
}

static int attach_krbd(const struct rbd_params *p, struct device_attachment *ret,
		       struct error_info *err)
{
	/* Do not wait for udev to process the new device: a node (or container) without udevd
	 * would hang here until the timeout.  The kernel's devtmpfs has made /dev/rbdN by the
	 * time the map returns, and nothing here uses udev's /dev/rbd/POOL/IMAGE links. */
	static const char *const noudev[] = { "-o", "noudev", NULL };
	struct helper_args a = { .n = 0 };
	char dev[64];
	int r = map_image(p, "rbd", "rbd (ceph-common)", noudev, true, "/dev/rbd", &a, dev,
			  sizeof(dev), err);

	if (r < 0)
		return r;
	if (device_attachment_set_meta(ret, "method", "krbd") < 0 ||
	    !(ret->device_path = strdup(dev)))
		return -ENOMEM;
	return 0;
}

/* The kernel's view of /dev/rbdN: its pool and image, from sysfs. */
static bool krbd_device_is(const char *dev, const char *pool, const char *image)
{
	char path[128], buf[512];
	const char *id = dev + strlen("/dev/rbd");
	FILE *f;
	bool ok = true;

	for (int i = 0; i < 2 && ok; i++) {
		snprintf(path, sizeof(path), "/sys/bus/rbd/devices/%s/%s", id, i ? "name" : "pool");
		f = fopen(path, "re");
		if (!f || !fgets(buf, sizeof(buf), f))
			ok = false;
		if (f)
			fclose(f);
		buf[strcspn(buf, "\n")] = '\0';
		if (ok && pool && image)
			ok = streq(buf, i ? image : pool);
	}
	return ok;
}

static int release_krbd(const struct device_attachment *att, uint64_t timeout_ms,
			struct error_info *err)
{
	/* noudev: see attach_krbd; without udevd, unmap would wait for the "remove" event. */
	const char *dev = att->device_path,
		   *argv[] = { "rbd", "unmap", "-o", "noudev", "--", dev, NULL };
	char out[1024], why[512];
	int r;

	if (!dev || !startswith(dev, "/dev/rbd") ||
	    !krbd_device_is(dev, device_attachment_get_meta(att, "pool"),
			    device_attachment_get_meta(att, "image")))
		return 0; /* not mapped (any more) */
	r = rbd_exec(argv, timeout_ms, out, sizeof(out));
	if (r == 0)
		return 0;
	summarize(out, why, sizeof(why));
	return err_set(err, r < 0 ? r : -EIO, "rbd unmap %s: %s", dev, r < 0 ? strerror(-r) : why);
}

/* --- nbd --- */

static pid_t nbd_device_pid(const char *dev)
{
	char path[128];
	long pid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/block/%s/pid", strrchr(dev, '/') + 1);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%ld", &pid) != 1)
		pid = 0;
	fclose(f);
	return (pid_t)pid;
}

/* Whether the rbd-nbd process pid serves dev: the one that mapped it (the kernel's pid
 * attribute names the mapping process, and keeps naming it after a reattach), or one attached
 * to it since (`rbd-nbd attach --device dev` in its command line). */
static bool nbd_served_by(const char *dev, pid_t pid)
{
	return rbd_pid_is(pid, "rbd-nbd", NULL) &&
	       (nbd_device_pid(dev) == pid || rbd_pid_is(pid, "rbd-nbd", dev));
}

static int release_nbd(const struct device_attachment *att, uint64_t timeout_ms,
		       struct error_info *err);

/* The cookie rbd-nbd map --show-cookie printed after the device ("/dev/nbd0 <cookie>"), into
 * buf; "" when there is none (a kernel without the backend attribute). */
static void nbd_cookie(const char *out, const char *dev, char *buf, size_t len)
{
	const char *p = strstr(out, dev);

	buf[0] = '\0';
	if (!p)
		return;
	p += strlen(dev);
	p += strspn(p, " \t");
	snprintf(buf, len, "%.*s", (int)strcspn(p, " \t\n"), p);
}

static int attach_nbd(const struct rbd_params *p, struct device_attachment *ret,
		      struct error_info *err)
{
	/* Mapped through netlink with a reattach timeout: when rbd-nbd dies (a container
	 * restart kills it with the agent), the kernel holds the device's I/O for that long
	 * instead of failing it, and a new rbd-nbd attached to the same device (the health
	 * check's rbd_attach_reattach) carries on; the filesystem on it never notices. */
	char secs[32];
	const char *const extra[] = { "--try-netlink", "--reattach-timeout", secs, "--show-cookie",
				      NULL };
	struct helper_args a = { .n = 0 };
	char dev[64], pid[32], cookie[128];
	_cleanup_free_ char *out = calloc(1, HELPER_OUT);
	int r;

	if (!out)
		return -ENOMEM;
	snprintf(secs, sizeof(secs), "%llu", (unsigned long long)(p->nbd_reattach_ms / 1000));
	r = map_image_out(p, "rbd-nbd", "rbd-nbd", extra, false, "/dev/nbd", &a, dev, sizeof(dev),
			  out, err);
	if (r < 0)
		return r;
	nbd_cookie(out, dev, cookie, sizeof(cookie));
	snprintf(pid, sizeof(pid), "%d", (int)nbd_device_pid(dev));
	if (device_attachment_set_meta(ret, "method", "nbd") < 0 ||
	    device_attachment_set_meta(ret, "pid", pid) < 0 ||
	    (cookie[0] && device_attachment_set_meta(ret, "cookie", cookie) < 0) ||
	    !(ret->device_path = strdup(dev)))
		return -ENOMEM;
	/* Out of volagent.service's cgroup, or its restart kills the daemon (helper-scope.h). */
	r = nbd_device_pid(dev) > 0
		    ? helper_scope_move(nbd_device_pid(dev), "rbd-nbd", a.pool_image, NULL, 0, err)
		    : 0;
	if (r < 0)
		(void)release_nbd(ret, p->timeout_ms, NULL);
	return r < 0 ? r : 0;
}

static int release_nbd(const struct device_attachment *att, uint64_t timeout_ms,
		       struct error_info *err)
{
	const char *dev = att->device_path, *argv[] = { "rbd-nbd", "unmap", dev, NULL };
	const char *pid_s = device_attachment_get_meta(att, "pid");
	pid_t pid = pid_s ? (pid_t)atoi(pid_s) : 0;
	char out[1024];
	int fd;

	if (!dev || !startswith(dev, "/dev/nbd"))
		return 0;
	if (pid > 0 && nbd_served_by(dev, pid) && rbd_exec(argv, timeout_ms, out, sizeof(out)) == 0)
		return 0;
	/* The daemon is gone (or would not unmap): disconnect the device in the kernel. */
	(void)rbd_pid_stop(pid, "rbd-nbd", NULL, 2000);
	fd = open(dev, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ENXIO
			       ? 0
			       : err_set(err, -errno, "%s: %s", dev, strerror(errno));
	(void)ioctl(fd, NBD_DISCONNECT);
	(void)ioctl(fd, NBD_CLEAR_SOCK);
	close(fd);
	return 0;
}

/* --- fuse --- */

/* The rbd-fuse serving dir: the recorded PID if it still is that, else a search of /proc
 * (a record written before the daemon started has none). */
static pid_t find_fuse_pid(const char *fuse_dir, const char *pid_s)
{
	pid_t pid = pid_s ? (pid_t)atoi(pid_s) : 0;
	struct dirent *de;
	DIR *d;

	if (pid > 0 && rbd_pid_is(pid, "rbd-fuse", fuse_dir))
		return pid;
	d = opendir("/proc");
	if (!d)
		return 0;
	pid = 0;
	while (!pid && (de = readdir(d))) {
		pid_t p = (pid_t)atoi(de->d_name);
		if (p > 0 && rbd_pid_is(p, "rbd-fuse", fuse_dir))
			pid = p;
	}
	closedir(d);
	return pid;
}

/* Clears every loop device backed by a file in dir. */
static void detach_loops_under(const char *dir)
{
	struct dirent *de;
	DIR *d = opendir("/sys/block");
	size_t n = strlen(dir);

	while (d && (de = readdir(d))) {
		char dev[300], back[4096];
		if (!startswith(de->d_name, "loop"))
			continue;
		snprintf(dev, sizeof(dev), "/dev/%s", de->d_name);
		if (rbd_loop_backing_file(dev, back, sizeof(back)) == 0 && !strncmp(back, dir, n) &&
		    back[n] == '/')
			(void)rbd_loop_detach(dev, NULL);
	}
	if (d)
		closedir(d);
}

static int release_fuse(const struct device_attachment *att, uint64_t timeout_ms,
			bool *ret_was_dead, struct error_info *err)
{
	const char *dir = device_attachment_get_meta(att, "fuse_dir");
	const char *file = device_attachment_get_meta(att, "image_file");
	const char *loop = device_attachment_get_meta(att, "loop");
	const char *pid_s = device_attachment_get_meta(att, "pid");
	pid_t pid;
	int r;

	if (!dir)
		return 0;
	if (loop) {
		r = rbd_loop_detach(loop, file);
		if (r < 0)
			return err_set(err, r, "cannot detach %s: %s", loop, strerror(-r));
	}
	detach_loops_under(dir);
	pid = find_fuse_pid(dir, pid_s);
	if (ret_was_dead)
		*ret_was_dead = pid_s && pid <= 0;
	/* SIGTERM lets it unmount its FUSE dir and close the image (its watcher goes away). */
	if (pid > 0 &&
	    rbd_pid_stop(pid, "rbd-fuse", dir, timeout_ms < 10000 ? timeout_ms : 10000) < 0)
		return err_set(err, -ETIMEDOUT, "rbd-fuse (pid %d) serving %s would not exit",
			       (int)pid, dir);
	/* A killed rbd-fuse leaves its mount behind (ENOTCONN). */
	r = mnt_util_umount(dir, 0, NULL);
	if (r < 0 && r != -EINVAL && r != -ENOENT)
		r = mnt_util_umount(dir, MNT_DETACH, NULL);
	if (r < 0 && r != -EINVAL && r != -ENOENT)
		return err_set(err, r, "cannot unmount the FUSE dir %s: %s", dir, strerror(-r));
	if (rmdir(dir) < 0 && errno != ENOENT)
		return err_set(err, -errno, "cannot remove %s: %s", dir, strerror(errno));
	return 0;
}

/* The last lines of the rbd-fuse log that explain a failure. */
static void log_tail(const char *log_path, char *buf, size_t len)
{
	_cleanup_free_ char *out = calloc(1, 16384);
	int fd = open(log_path, O_RDONLY | O_CLOEXEC);
	off_t size;
	ssize_t n = 0;

	buf[0] = '\0';
	if (fd < 0 || !out) {
		if (fd >= 0)
			close(fd);
		return;
	}
	size = lseek(fd, 0, SEEK_END);
	if (size > 16000)
		lseek(fd, size - 16000, SEEK_SET);
	else
		lseek(fd, 0, SEEK_SET);
	n = read(fd, out, 16000);
	close(fd);
	if (n > 0)
		out[n] = '\0';
	summarize(out, buf, len);
}

static int attach_fuse(const struct rbd_params *p, struct device_attachment *ret,
		       struct error_info *err)
{
	struct helper_args a = { .n = 0 };
	_cleanup_free_ char *dir = strdup_printf("%s.fuse", p->base);
	_cleanup_free_ char *log_path = strdup_printf("%s.log", p->base);
	_cleanup_free_ char *file = NULL, *tmp_key = NULL;
	struct device_attachment made = { 0 };
	const char *key_file;
	char loop[32], pid_s[32], why[1024];
	uint64_t deadline;
	pid_t pid = 0;
	int r, fd;

	if (!dir || !log_path || !(file = strdup_printf("%s/%s", dir, p->image)))
		return -ENOMEM;
	/* A dir left mounted by an rbd-fuse that died (ENOTCONN) is cleared first. */
	if (mnt_util_is_mount_root(dir) == 1 || mnt_util_is_mount_root(dir) == -ENOTCONN)
		(void)mnt_util_umount(dir, MNT_DETACH, NULL);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return err_set(err, -errno, "mkdir %s: %s", dir, strerror(errno));
	if (device_attachment_set_meta(&made, "method", "fuse") < 0 ||
	    device_attachment_set_meta(&made, "fuse_dir", dir) < 0 ||
	    device_attachment_set_meta(&made, "image_file", file) < 0) {
		r = -ENOMEM;
		goto out_release;
	}
	fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	r = key_file_for(p, &key_file, &tmp_key);
	if (r < 0) {
		err_set(err, r, "cannot write a key file under %s: %s", p->secret_dir,
			strerror(-r));
		goto out_release;
	}
	add(&a, "rbd-fuse");
	add(&a, "-f");
	add_common(&a, p, key_file, false);
	add(&a, "-p");
	add(&a, p->pool);
	add(&a, "-r");
	add(&a, p->image);
	add(&a, dir);
	r = rbd_spawn_daemon(a.argv, log_path, &pid);
	if (r < 0) {
		rbd_key_file_remove(tmp_key);
		err_set(err, r,
			r == -ENOENT ? "rbd-fuse is not installed" : "cannot start rbd-fuse: %s",
			strerror(-r));
		goto out_release;
	}
	snprintf(pid_s, sizeof(pid_s), "%d", (int)pid);
	(void)device_attachment_set_meta(&made, "pid", pid_s);
	/* Out of volagent.service's cgroup, or its restart kills the daemon (helper-scope.h). */
	snprintf(why, sizeof(why), "rbd-fuse for %s/%s", p->pool, p->image);
	r = helper_scope_move(pid, "rbd-fuse", why, NULL, 0, err);
	if (r < 0) {
		rbd_key_file_remove(tmp_key);
		goto out_release;
	}
	/* rbd-fuse mounts first and shows the image once it has connected and opened it. */
	deadline = now_ms() + p->timeout_ms;
	for (;;) {
		r = rbd_probe_path(RBD_PROBE_STAT, file, 2000);
		if (r == 0)
			break;
		if (!rbd_pid_is(pid, "rbd-fuse", dir)) {
			usleep(50 * 1000); /* let the log be complete */
			log_tail(log_path, why, sizeof(why));
			rbd_key_file_remove(tmp_key);
			r = err_set(err, -EIO, "rbd-fuse exited: %s", why);
			goto out_release;
		}
		if (now_ms() >= deadline) {
			rbd_key_file_remove(tmp_key);
			r = err_set(err, -ETIMEDOUT, "rbd-fuse did not show %s within %llus", file,
				    (unsigned long long)(p->timeout_ms / 1000));
			goto out_release;
		}
		usleep(50 * 1000);
	}
	/* It has connected: the key is in its memory now, the file can go. */
	rbd_key_file_remove(tmp_key);
	r = rbd_loop_attach(file, p->read_only, loop);
	if (r < 0) {
		err_set(err, r, "cannot attach a loop device to %s: %s", file, strerror(-r));
		goto out_release;
	}
	if (device_attachment_set_meta(&made, "loop", loop) < 0 ||
	    !(made.device_path = strdup(loop))) {
		r = -ENOMEM;
		goto out_release;
	}
	*ret = made;
	return 0;

out_release:
	(void)release_fuse(&made, p->timeout_ms, NULL, NULL);
	device_attachment_clear(&made);
	return r;
}

/* --- dispatch --- */

int rbd_attach_method(const struct rbd_params *p, enum rbd_method m, struct device_attachment *ret,
		      struct error_info *err)
{
	switch (m) {
	case RBD_METHOD_KRBD:
		return attach_krbd(p, ret, err);
	case RBD_METHOD_NBD:
		return attach_nbd(p, ret, err);
	case RBD_METHOD_FUSE:
		return attach_fuse(p, ret, err);
	}
	return -EINVAL;
}

int rbd_attach_release(const struct device_attachment *att, uint64_t timeout_ms, bool *ret_was_dead,
		       struct error_info *err)
{
	const char *m = device_attachment_get_meta(att, "method");

	if (ret_was_dead)
		*ret_was_dead = false;
	if (!m)
		return 0;
	if (streq(m, "krbd"))
		return release_krbd(att, timeout_ms, err);
	if (streq(m, "nbd")) {
		const char *pid_s = device_attachment_get_meta(att, "pid");
		if (ret_was_dead)
			*ret_was_dead = pid_s && !rbd_pid_is((pid_t)atoi(pid_s), "rbd-nbd", NULL);
		return release_nbd(att, timeout_ms, err);
	}
	if (streq(m, "fuse"))
		return release_fuse(att, timeout_ms, ret_was_dead, err);
	return err_set(err, -EINVAL, "unknown attach method \"%s\" in the record", m);
}

/* The pid of the rbd-nbd serving dev, from `rbd-nbd list-mapped --format json` (after an
 * attach the kernel's pid attribute still names the dead mapper); 0 when none is listed. */
static pid_t nbd_listed_pid(const char *dev, uint64_t timeout_ms)
{
	const char *argv[] = { "rbd-nbd", "list-mapped", "--format", "json", NULL };
	_cleanup_free_ char *out = calloc(1, HELPER_OUT);
	json_t *list, *e;
	pid_t pid = 0;
	size_t i;

	if (!out || rbd_exec(argv, timeout_ms, out, HELPER_OUT) != 0)
		return 0;
	list = json_loads(out, 0, NULL);
	json_array_foreach(list, i, e)
	{
		if (streq_ptr(json_string_value(json_object_get(e, "device")), dev))
			pid = (pid_t)json_integer_value(json_object_get(e, "id"));
	}
	json_decref(list);
	return pid;
}

/* Sets key in att's meta to value, replacing the value it had (set_meta appends). */
static int meta_replace(struct device_attachment *att, const char *key, const char *value)
{
	for (size_t i = 0; i < att->n_meta; i++)
		if (streq(att->meta[i].key, key)) {
			char *v = strdup(value);
			if (!v)
				return -ENOMEM;
			free(att->meta[i].value);
			att->meta[i].value = v;
			return 0;
		}
	return device_attachment_set_meta(att, key, value);
}

int rbd_attach_reattach(const struct rbd_params *p, struct device_attachment *att,
			struct error_info *err)
{
	const char *dev = att->device_path, *cookie = device_attachment_get_meta(att, "cookie");
	const char *pid_s = device_attachment_get_meta(att, "pid");
	_cleanup_free_ char *tmp_key = NULL, *out = calloc(1, HELPER_OUT);
	struct helper_args a = { .n = 0 };
	const char *key_file;
	char why[1024], pid_now[32];
	pid_t pid;
	int r;

	if (!out)
		return -ENOMEM;
	if (!streq_ptr(device_attachment_get_meta(att, "method"), "nbd") || !dev ||
	    !startswith(dev, "/dev/nbd"))
		return -EOPNOTSUPP;
	if (pid_s && nbd_served_by(dev, (pid_t)atoi(pid_s)))
		return 0;
	/* The kernel's pid attribute exists while the device is configured: within the reattach
	 * timeout after its daemon died.  Once it is gone the device is disconnected for good. */
	if (nbd_device_pid(dev) <= 0)
		return err_set(err, -ENOTCONN, "%s is no longer connected: too late to reattach",
			       dev);
	r = key_file_for(p, &key_file, &tmp_key);
	if (r < 0)
		return err_set(err, r, "cannot write a key file under %s: %s", p->secret_dir,
			       strerror(-r));
	snprintf(a.pool_image, sizeof(a.pool_image), "%s/%s", p->pool, p->image);
	add(&a, "rbd-nbd");
	add(&a, "attach");
	add(&a, "--device");
	add(&a, dev);
	if (cookie) {
		add(&a, "--cookie");
		add(&a, cookie);
	}
	if (p->read_only)
		add(&a, "--read-only");
	add(&a, a.pool_image);
	add_common(&a, p, key_file, false);
	r = rbd_exec(a.argv, p->timeout_ms, out, HELPER_OUT);
	rbd_key_file_remove(tmp_key);
	if (r != 0) {
		summarize(out, why, sizeof(why));
		return err_set(err, r < 0 ? r : -EIO,
			       "rbd-nbd attach --device %s exited with %d: %s", dev, r, why);
	}
	pid = nbd_listed_pid(dev, p->timeout_ms);
	if (pid <= 0 || !nbd_served_by(dev, pid))
		return err_set(err, -EIO, "rbd-nbd attach --device %s: no rbd-nbd serves it after",
			       dev);
	snprintf(pid_now, sizeof(pid_now), "%d", (int)pid);
	if (meta_replace(att, "pid", pid_now) < 0)
		return -ENOMEM;
	/* Out of volagent.service's cgroup, as the mapping one was (helper-scope.h). */
	return helper_scope_move(pid, "rbd-nbd", a.pool_image, NULL, 0, err);
}

int rbd_attach_still_ours(const struct device_attachment *att, const char *dev,
			  struct error_info *err)
{
	const char *m = device_attachment_get_meta(att, "method");
	const char *pool = device_attachment_get_meta(att, "pool");
	const char *image = device_attachment_get_meta(att, "image");

	if (!m || !dev)
		return 0;
	if (streq(m, "krbd") && startswith(dev, "/dev/rbd") && !krbd_device_is(dev, pool, image))
		return err_set(err, -ESTALE, "%s no longer maps %s/%s", dev, pool ? pool : "?",
			       image ? image : "?");
	/* nbd: the daemon serving the device changes by design (a dead rbd-nbd of ours is
	 * replaced by a reattached one, whose pid the record learns later), so its pid says
	 * nothing of whose the device is; its release checks the daemon (nbd_served_by). */
	if (streq(m, "fuse")) {
		const char *loop = device_attachment_get_meta(att, "loop");
		const char *file = device_attachment_get_meta(att, "image_file");
		char back[4096];

		if (loop && file &&
		    (rbd_loop_backing_file(loop, back, sizeof(back)) < 0 || !streq(back, file)))
			return err_set(err, -ESTALE, "%s is no longer backed by %s", loop, file);
	}
	return 0;
}

int rbd_attach_check(const struct device_attachment *att, uint64_t timeout_ms,
		     struct error_info *err)
{
	const char *m = device_attachment_get_meta(att, "method");
	const char *pid_s = device_attachment_get_meta(att, "pid");
	const char *dev = att->device_path;
	pid_t pid = pid_s ? (pid_t)atoi(pid_s) : 0;
	int r;

	if (!m || !dev)
		return 0;
	if (streq(m, "fuse")) {
		const char *dir = device_attachment_get_meta(att, "fuse_dir");
		const char *file = device_attachment_get_meta(att, "image_file");
		char back[4096];

		if (!dir || !file || !rbd_pid_is(pid, "rbd-fuse", dir))
			return err_set(err, -ENOTCONN, "rbd-fuse (pid %d) serving %s has exited",
				       (int)pid, dev);
		r = rbd_probe_path(RBD_PROBE_STAT, file, timeout_ms);
		if (r < 0)
			return err_set(err, r == -ETIMEDOUT ? r : -ENOTCONN, "%s: %s", file,
				       strerror(-r));
		if (rbd_loop_backing_file(dev, back, sizeof(back)) < 0 || !streq(back, file))
			return err_set(err, -ENOTCONN, "%s is no longer backed by %s", dev, file);
	} else if (streq(m, "nbd")) {
		if (!nbd_served_by(dev, pid))
			return err_set(err, -ENOTCONN, "rbd-nbd (pid %d) serving %s has exited",
				       (int)pid, dev);
	} else if (streq(m, "krbd")) {
		/* By identity: a name reused for another image is not ours to adopt. */
		if (!krbd_device_is(dev, device_attachment_get_meta(att, "pool"),
				    device_attachment_get_meta(att, "image")))
			return err_set(err, -ENOTCONN,
				       "%s is no longer mapped, or maps another image", dev);
	}
	r = rbd_probe_path(RBD_PROBE_READ, dev, timeout_ms);
	if (r < 0)
		return err_set(err, r == -ETIMEDOUT ? r : -EIO, "reading %s: %s", dev,
			       strerror(-r));
	return 0;
}
