/* holders.c - see holders.h.  The scan itself (scan_child) runs in a forked child by
 * process_run_fn(), and hands back its struct holders whole. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libmount.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "holders.h"
#include "time-util.h"
#include "macro.h"
#include "path-util.h"
#include "process.h"

/* Mounts at the target itself, stacked on each other: their IDs are what an open file holds. */
#define MAX_IDS 16
/* Of a process's memory map, this much is read at most. */
#define MAPS_MAX_BYTES (1 << 20)

struct scan_arg {
	char target[PATH_MAX]; /* "" when only a device is asked about */
	char device[PATH_MAX]; /* "" when none */
	uint64_t budget_ms;    /* the scan's own deadline, within the caller's */
};

/* What the scan matches against, from the mount table. */
struct scan_ctx {
	const struct scan_arg *a;
	int ids[MAX_IDS];
	size_t n_ids;
	dev_t devno;
	char self_ns[64];
	uint64_t deadline;
};

/* readlink into buf (size bytes), terminated; "" on failure. */
static const char *read_link(const char *path, char *buf, size_t size)
{
	ssize_t n = readlink(path, buf, size - 1);

	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

/* Reads at most size - 1 bytes of a small /proc file into buf, terminated.  Returns the
 * length, or -errno. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	do
		n = read(fd, buf, size - 1);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return n;
}

static bool under_target(const struct scan_ctx *c, const char *path)
{
	return c->a->target[0] && path[0] == '/' && path_is_under(path, c->a->target);
}

/* Appends "what" to uses, "; "-separated, while it fits. */
static void add_use(char *uses, size_t size, const char *what)
{
	size_t len = strlen(uses);

	if (len + 2 + strlen(what) + 1 > size) {
		if (len + 5 <= size && !endswith(uses, " ..."))
			strcat(uses, " ...");
		return;
	}
	snprintf(uses + len, size - len, "%s%s", len ? "; " : "", what);
}

/* path as it is shown: "." or "./x/y" below the target, else whole. */
static const char *shown(const struct scan_ctx *c, const char *path)
{
	size_t n = strlen(c->a->target);

	if (!under_target(c, path))
		return path;
	if (!path[n])
		return ".";
	return path + n; /* "/rest": the caller puts the "." before it */
}

static void use_path(char *uses, size_t size, const struct scan_ctx *c, const char *what,
		     const char *path)
{
	char buf[PATH_MAX + 64];
	const char *p = shown(c, path);

	snprintf(buf, sizeof(buf), "%s %s%s", what, p != path && p[0] == '/' ? "." : "", p);
	add_use(uses, size, buf);
}

static bool id_held(const struct scan_ctx *c, int id)
{
	for (size_t i = 0; i < c->n_ids; i++)
		if (c->ids[i] == id)
			return true;
	return false;
}

static void scan_mounts(struct scan_ctx *c, struct holders *h, struct libmnt_table *tb)
{
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct libmnt_fs *fs;
	bool first = true;

	while (it && mnt_table_next_fs(tb, it, &fs) == 0) {
		const char *tgt = mnt_fs_get_target(fs), *src = mnt_fs_get_source(fs);
		const char *why = NULL;

		if (!tgt)
			continue;
		if (c->a->target[0] && streq(tgt, c->a->target)) {
			if (c->n_ids < MAX_IDS)
				c->ids[c->n_ids++] = mnt_fs_get_id(fs);
			c->devno = mnt_fs_get_devno(fs);
			if (!first)
				why = "stacked on it";
			first = false;
		} else if (under_target(c, tgt)) {
			why = "mounted below it";
		} else if (c->a->device[0] && src && streq(src, c->a->device)) {
			why = "the same device";
		}
		if (!why)
			continue;
		if (h->n_mounts == HOLDERS_MAX_MOUNTS) {
			h->more_mounts = true;
			continue;
		}
		{
			const char *p = shown(c, tgt);

			snprintf(h->mounts[h->n_mounts++], sizeof(h->mounts[0]), "%s on %s%s (%s)",
				 src ? src : "none", p != tgt && p[0] == '/' ? "." : "", p, why);
		}
	}
	mnt_free_iter(it);
}

/* The pod of a process from its cgroup path: kubelet names the pod's cgroup "pod<uid>"
 * (cgroupfs driver) or "...-pod<uid with _ for ->.slice" (systemd driver). */
static void pod_of(pid_t pid, char *ret, size_t size)
{
	char path[64], buf[4096];
	const char *p;

	ret[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if (read_small(path, buf, sizeof(buf)) <= 0)
		return;
	for (p = buf; (p = strstr(p, "pod")); p += 3) {
		size_t n = 0;

		if (p > buf && isalnum((unsigned char)p[-1]))
			continue;
		while (n + 1 < size &&
		       (isxdigit((unsigned char)p[3 + n]) || p[3 + n] == '-' || p[3 + n] == '_')) {
			ret[n] = p[3 + n] == '_' ? '-' : p[3 + n];
			n++;
		}
		ret[n] = '\0';
		if (n == 36)
			return;
	}
	ret[0] = '\0';
}

static void scan_fds(const struct scan_ctx *c, pid_t pid, char *uses, size_t size)
{
	char dir[64], path[96], buf[512], link[PATH_MAX], what[32];
	struct dirent *de;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/fdinfo", (int)pid);
	d = opendir(dir);
	if (!d)
		return;
	while ((de = readdir(d)) && now_ms() < c->deadline) {
		const char *m;
		bool held = false;
		int fd;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		fd = atoi(de->d_name);
		snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", (int)pid, fd);
		if (c->n_ids && read_small(path, buf, sizeof(buf)) > 0 &&
		    (m = strstr(buf, "mnt_id:")))
			held = id_held(c, atoi(m + strlen("mnt_id:")));
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
		if (!held && !c->a->device[0])
			continue;
		read_link(path, link, sizeof(link));
		if (!held && !streq(link, c->a->device))
			continue;
		snprintf(what, sizeof(what), "fd %d", fd);
		use_path(uses, size, c, what, link);
	}
	closedir(d);
}

static void scan_maps(const struct scan_ctx *c, pid_t pid, char *uses, size_t size)
{
	char path[64], line[PATH_MAX + 128], last[PATH_MAX] = "";
	size_t total = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (total < MAPS_MAX_BYTES && fgets(line, sizeof(line), f)) {
		unsigned maj, min;
		int off = 0;
		char *file;

		total += strlen(line);
		if (sscanf(line, "%*x-%*x %*s %*x %x:%x %*u %n", &maj, &min, &off) != 2 || !off)
			continue;
		file = line + off;
		file[strcspn(file, "\n")] = '\0';
		if (makedev(maj, min) != c->devno || !under_target(c, file) || streq(file, last))
			continue;
		snprintf(last, sizeof(last), "%s", file);
		use_path(uses, size, c, "mmap", file);
	}
	fclose(f);
}

static void scan_proc(struct scan_ctx *c, pid_t pid, struct holders *h)
{
	char path[64], link[PATH_MAX], uses[sizeof(h->procs[0].uses)] = "";
	bool same_ns;

	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
	same_ns = streq(read_link(path, link, sizeof(link)), c->self_ns);
	if (same_ns) {
		static const char *const links[] = { "cwd", "root" };

		for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
			snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, links[i]);
			if (under_target(c, read_link(path, link, sizeof(link))))
				use_path(uses, sizeof(uses), c, links[i], link);
		}
	}
	scan_fds(c, pid, uses, sizeof(uses));
	if (same_ns && c->devno)
		scan_maps(c, pid, uses, sizeof(uses));
	if (!uses[0])
		return;
	if (h->n_procs == HOLDERS_MAX_PROCS) {
		h->more_procs = true;
		return;
	}
	{
		struct holder_proc *p = &h->procs[h->n_procs++];

		p->pid = pid;
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		if (read_small(path, p->comm, sizeof(p->comm)) > 0)
			p->comm[strcspn(p->comm, "\n")] = '\0';
		pod_of(pid, p->pod, sizeof(p->pod));
		snprintf(p->uses, sizeof(p->uses), "%s", uses);
	}
}

/* In the child: the whole scan. */
static int scan_child(void *arg, void *result, struct error_info *err)
{
	struct scan_ctx c = { .a = arg };
	struct holders *h = result;
	struct libmnt_table *tb = mnt_new_table();
	struct dirent *de;
	pid_t self = getpid();
	DIR *d;

	c.deadline = now_ms() + c.a->budget_ms;
	memset(h, 0, sizeof(*h));
	if (!tb)
		return -ENOMEM;
	if (mnt_table_parse_file(tb, "/proc/self/mountinfo") < 0) {
		mnt_unref_table(tb);
		return err_set(err, -EIO, "cannot read /proc/self/mountinfo");
	}
	scan_mounts(&c, h, tb);
	mnt_unref_table(tb);
	if (!c.n_ids && !c.a->device[0])
		return -ENOENT;
	read_link("/proc/self/ns/mnt", c.self_ns, sizeof(c.self_ns));
	d = opendir("/proc");
	if (!d)
		return err_set(err, -errno, "/proc: %s", strerror(errno));
	while ((de = readdir(d))) {
		pid_t pid = (pid_t)atoi(de->d_name);

		if (pid <= 0 || pid == self)
			continue;
		if (now_ms() >= c.deadline) {
			h->incomplete = true;
			break;
		}
		scan_proc(&c, pid, h);
	}
	closedir(d);
	return 0;
}

int holders_find(const char *target, const char *device, uint64_t timeout_ms, struct holders *ret,
		 struct error_info *err)
{
	struct scan_arg a = { .budget_ms = timeout_ms * 3 / 4 };
	int r;

	if (target)
		snprintf(a.target, sizeof(a.target), "%s", target);
	if (device)
		snprintf(a.device, sizeof(a.device), "%s", device);
	r = process_run_fn(scan_child, &a, ret, sizeof(*ret),
			   &(struct process_options){ .timeout_ms = timeout_ms,
						      .kill_at_once = true },
			   err, NULL, 0);
	if (r == -ETIMEDOUT)
		return err_set(err, r, "no answer from /proc in %" PRIu64 " ms", timeout_ms);
	return r;
}

char *holders_format(const struct holders *h, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
#define PUT(...)                                                                     \
	do {                                                                         \
		if (len < size)                                                      \
			len += (size_t)snprintf(buf + len, size - len, __VA_ARGS__); \
	} while (0)
	for (unsigned i = 0; i < h->n_procs; i++) {
		const struct holder_proc *p = &h->procs[i];

		PUT("%spid %d (%s%s%s): %s", len ? ", " : "", (int)p->pid, p->comm,
		    p->pod[0] ? ", pod " : "", p->pod, p->uses);
	}
	if (h->more_procs)
		PUT(", more processes");
	for (unsigned i = 0; i < h->n_mounts; i++)
		PUT("%smount %s", len ? ", " : "", h->mounts[i]);
	if (h->more_mounts)
		PUT(", more mounts");
	if (h->incomplete && len)
		PUT(" (not every process was read in time)");
#undef PUT
	if (len >= size && size > 4)
		strcpy(buf + size - 4, "...");
	return buf;
}

int holders_explain(const char *target, const char *device, uint64_t timeout_ms,
		    struct error_info *err)
{
	struct error_info ferr = { 0 };
	struct holders h;
	char text[1024], msg[sizeof(err->msg)];
	int code = err->code;

	snprintf(msg, sizeof(msg), "%s", err_msg(err));
	if (holders_find(target, device, timeout_ms, &h, &ferr) < 0)
		return err_set(err, code, "%s; holders not found: %s", msg, err_msg(&ferr));
	holders_format(&h, text, sizeof(text));
	if (!text[0])
		return err_set(err, code, "%s; no process or other mount found holding it%s", msg,
			       h.incomplete ? " (not every process was read in time)" : "");
	return err_set(err, code, "%s; held by: %s", msg, text);
}
