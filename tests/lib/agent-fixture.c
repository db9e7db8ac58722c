/* agent-fixture.c - see agent-fixture.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libmount.h>
#include <linux/loop.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent-fixture.h"

/* The read-only loop devices the agent put over dev for read-only raw block binds
 * (plugins/block-map.c, named "volagent: read-only bind") outlive a test whose agent stopped
 * with its binds in place: the binds go with the test's mount namespace, loop devices do not.
 * Detached here, so that dev can be. */
static void detach_ro_loops_over(const char *dev)
{
	struct dirent *de;
	struct stat d;
	DIR *dir;

	if (stat(dev, &d) < 0 || !(dir = opendir("/sys/block")))
		return;
	while ((de = readdir(dir))) {
		struct loop_info64 info;
		char path[300];
		int fd;

		if (strncmp(de->d_name, "loop", 4) != 0)
			continue;
		snprintf(path, sizeof(path), "/dev/%s", de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			continue;
		if (ioctl(fd, LOOP_GET_STATUS64, &info) == 0 &&
		    strncmp((const char *)info.lo_file_name, "volagent: read-only bind",
			    LO_NAME_SIZE) == 0 &&
		    makedev(major(info.lo_rdevice), minor(info.lo_rdevice)) == d.st_rdev)
			(void)ioctl(fd, LOOP_CLR_FD, 0);
		close(fd);
	}
	closedir(dir);
}

struct agent_fixture *fixture_new(const char *tag)
{
	struct agent_fixture *f = calloc(1, sizeof(*f));

	/* The agent reads a spec file only when no one but root may write it (spec-trust.h):
	 * what the tests write is 0644 whatever umask they were started with. */
	umask(022);
	f->dir = test_mkdtemp(tag);
	snprintf(f->root, sizeof(f->root), "%s/root", f->dir);
	snprintf(f->state, sizeof(f->state), "%s/state", f->dir);
	snprintf(f->secrets, sizeof(f->secrets), "%s/secrets", f->dir);
	snprintf(f->pods, sizeof(f->pods), "%s/pods", f->dir);
	snprintf(f->config, sizeof(f->config), "%s/config.json", f->dir);
	snprintf(f->agent.log_path, sizeof(f->agent.log_path), "%s/agent.log", f->dir);
	mkdir(f->pods, 0755);
	/* An empty config file of its own: never the host's /etc/volagent. */
	test_write_file(f->config, "{}\n");
	return f;
}

/* Lazily detaches every mount below dir, deepest first. */
static void unmount_below(const char *dir)
{
	for (int round = 0; round < 8; round++) {
		struct libmnt_table *tb = mnt_new_table();
		struct libmnt_iter *it = mnt_new_iter(MNT_ITER_BACKWARD);
		struct libmnt_fs *fs;
		size_t len = strlen(dir);
		int n = 0;

		if (mnt_table_parse_file(tb, "/proc/self/mountinfo") == 0)
			while (mnt_table_next_fs(tb, it, &fs) == 0) {
				const char *t = mnt_fs_get_target(fs);
				if (!strncmp(t, dir, len) && t[len] == '/') {
					umount2(t, MNT_DETACH);
					n++;
				}
			}
		mnt_free_iter(it);
		mnt_unref_table(tb);
		if (!n)
			break;
	}
}

static void print_agent_log(const struct agent_fixture *f)
{
	char *log = test_read_file(f->agent.log_path);

	fprintf(stderr, "--- agent log ---\n%s--- end ---\n", log ? log : "");
	free(log);
}

void fixture_free(struct agent_fixture *f)
{
	if (!f)
		return;
	if (f->agent.pid > 0) {
		int status;

		/* An agent that died on its own (refused to start, crashed) explains the failed
		 * waits before this point: say so, with its log. */
		if (waitpid(f->agent.pid, &status, WNOHANG) == f->agent.pid) {
			f->agent.pid = 0;
			fprintf(stderr, "agent exited on its own (%s %d); its log:\n",
				WIFSIGNALED(status) ? "signal" : "status",
				WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
			print_agent_log(f);
		} else {
			test_agent_stop(&f->agent, SIGKILL);
		}
	}
	unmount_below(f->dir);
	if (f->short_dir[0]) {
		unmount_below(f->short_dir);
		test_rm_rf(f->short_dir);
	}
	for (int i = 0; i < f->n_loops; i++) {
		detach_ro_loops_over(f->loops[i]);
		test_loop_detach(f->loops[i]);
	}
	if (getenv("VERBOSE"))
		print_agent_log(f);
	test_rm_rf(f->dir);
	free(f->dir);
	free(f);
}

const char *fixture_short_dir(struct agent_fixture *f)
{
	if (!f->short_dir[0]) {
		snprintf(f->short_dir, sizeof(f->short_dir), "/tmp/va.XXXXXX");
		if (!mkdtemp(f->short_dir))
			abort();
	}
	return f->short_dir;
}

int fixture_start(struct agent_fixture *f, const char *const extra[])
{
	const char *args[48];
	size_t n = 0;

	args[n++] = "--root-dir";
	args[n++] = f->root;
	args[n++] = "--state-dir";
	args[n++] = f->state;
	args[n++] = "--secret-dir";
	args[n++] = f->secrets;
	args[n++] = "--pods-dir";
	args[n++] = f->pods;
	args[n++] = "--config";
	args[n++] = f->config;
	for (size_t i = 0; extra && extra[i] && n < 46; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	return test_agent_start(&f->agent, args);
}

int fixture_stop(struct agent_fixture *f, int sig)
{
	return test_agent_stop(&f->agent, sig);
}

int fixture_write_pod(struct agent_fixture *f, const char *name, const char *json)
{
	char tmp[1024], dst[1024];
	int r;

	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", f->pods, name);
	snprintf(dst, sizeof(dst), "%s/%s", f->pods, name);
	r = test_write_file(tmp, json);
	if (r < 0)
		return r;
	return rename(tmp, dst) < 0 ? -errno : 0;
}

int fixture_write_podf(struct agent_fixture *f, const char *name, const char *fmt, ...)
{
	char *json;
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&json, fmt, ap);
	va_end(ap);
	if (r < 0)
		return -ENOMEM;
	r = fixture_write_pod(f, name, json);
	free(json);
	return r;
}

int fixture_write_local_pod(struct agent_fixture *f, const char *uid, const char *volume,
			    const char *path)
{
	char name[256];

	snprintf(name, sizeof(name), "%s.json", uid);
	return fixture_write_podf(f, name,
				  "{\"pod\": {\"uid\": \"%s\"}, \"volumes\": [{\"name\": \"%s\", "
				  "\"local\": {\"path\": \"%s\"}}]}",
				  uid, volume, path);
}

const char *fixture_make_source(struct agent_fixture *f, const char *name, const char *content)
{
	static char dirs[8][512];
	static int next;
	char *d = dirs[next++ % 8], file[600];

	snprintf(d, 512, "%s/%s", f->dir, name);
	mkdir(d, 0755);
	snprintf(file, sizeof(file), "%s/hello", d);
	test_write_file(file, content);
	return d;
}

int fixture_remove_pod(struct agent_fixture *f, const char *name)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/%s", f->pods, name);
	return unlink(path) < 0 ? -errno : 0;
}

const char *fixture_pod_dir(const struct agent_fixture *f, const char *uid, const char *name,
			    char *buf)
{
	snprintf(buf, 512, "%s/pods/%s/volumes/kubernetes.io~local/%s", f->root, uid, name);
	return buf;
}

const char *fixture_add_loop(struct agent_fixture *f, long long size)
{
	char img[600];

	if (f->n_loops >= 4)
		return NULL;
	snprintf(img, sizeof(img), "%s/disk%d.img", f->dir, f->n_loops);
	if (test_make_sparse(img, size) < 0 || test_loop_attach(img, f->loops[f->n_loops]) < 0)
		return NULL;
	return f->loops[f->n_loops++];
}

void fixture_unmount_all(struct agent_fixture *f)
{
	unmount_below(f->root);
}

static bool is_mounted(void *arg)
{
	return test_is_mountpoint(arg);
}

static bool is_unmounted(void *arg)
{
	return !test_is_mountpoint(arg);
}

bool fixture_wait_mounted(const char *path, int timeout_ms)
{
	return test_wait_until(is_mounted, (void *)path, timeout_ms);
}

bool fixture_wait_unmounted(const char *path, int timeout_ms)
{
	return test_wait_until(is_unmounted, (void *)path, timeout_ms);
}

struct count_arg {
	const struct agent_fixture *f;
	int n;
};

static bool count_is(void *arg)
{
	struct count_arg *c = arg;

	return test_count_mounts_under(c->f->root) == c->n;
}

bool fixture_wait_mount_count(const struct agent_fixture *f, int n, int timeout_ms)
{
	struct count_arg c = { f, n };

	return test_wait_until(count_is, &c, timeout_ms);
}

struct log_arg {
	const struct agent_fixture *f;
	const char *text;
};

static bool log_has(void *arg)
{
	struct log_arg *l = arg;

	return test_agent_log_contains(&l->f->agent, l->text);
}

bool fixture_wait_log(const struct agent_fixture *f, const char *text, int timeout_ms)
{
	struct log_arg l = { f, text };

	return test_wait_until(log_has, &l, timeout_ms);
}

long fixture_log_size(const struct agent_fixture *f)
{
	struct stat st;

	return stat(f->agent.log_path, &st) == 0 ? (long)st.st_size : 0;
}

struct log_after_arg {
	const struct agent_fixture *f;
	long offset;
	const char *text;
};

static bool log_has_after(void *arg)
{
	struct log_after_arg *l = arg;
	char *log = test_read_file(l->f->agent.log_path);
	bool found = log && (long)strlen(log) > l->offset && strstr(log + l->offset, l->text);

	free(log);
	return found;
}

bool fixture_wait_log_after(const struct agent_fixture *f, long offset, const char *text,
			    int timeout_ms)
{
	struct log_after_arg l = { f, offset, text };

	return test_wait_until(log_has_after, &l, timeout_ms);
}

int fixture_log_count(const struct agent_fixture *f, const char *text)
{
	char *log = test_read_file(f->agent.log_path), *p = log;
	int n = 0;

	while (p && (p = strstr(p, text))) {
		n++;
		p += strlen(text);
	}
	free(log);
	return n;
}

long fixture_log_find(const struct agent_fixture *f, const char *a, const char *b)
{
	char *log = test_read_file(f->agent.log_path), *line, *save = NULL;
	long off = -1;

	for (line = log ? strtok_r(log, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save))
		if (strstr(line, a) && strstr(line, b)) {
			off = line - log;
			break;
		}
	free(log);
	return off;
}

struct log_pair_arg {
	const struct agent_fixture *f;
	const char *a, *b;
};

static bool log_has_pair(void *arg)
{
	struct log_pair_arg *l = arg;

	return fixture_log_find(l->f, l->a, l->b) >= 0;
}

bool fixture_wait_log_line(const struct agent_fixture *f, const char *a, const char *b,
			   int timeout_ms)
{
	struct log_pair_arg l = { f, a, b };

	return test_wait_until(log_has_pair, &l, timeout_ms);
}

/* --- status --- */

json_t *fixture_status_at(const char *socket)
{
	const char *args[] = { "status", "--json", "--socket", socket, NULL };
	char *out = NULL;
	json_t *st = NULL;

	if (test_volagent(args, &out) == 0 && out)
		st = json_loads(out, 0, NULL);
	free(out);
	return st;
}

json_t *fixture_status(const struct agent_fixture *f)
{
	char sock[600];

	snprintf(sock, sizeof(sock), "%s/admin.sock", f->state);
	return fixture_status_at(sock);
}

json_t *status_pod_volume(json_t *status, const char *target)
{
	json_t *v, *pod;
	size_t i, k;

	json_array_foreach(json_object_get(status, "volumes"), i, v)
		json_array_foreach(json_object_get(v, "pods"), k, pod)
	{
		const char *t = json_string_value(json_object_get(pod, "target"));
		if (t && !strcmp(t, target))
			return pod;
	}
	return NULL;
}

json_t *status_device(json_t *status, const char *name)
{
	json_t *d;
	size_t i;

	json_array_foreach(json_object_get(status, "devices"), i, d)
	{
		const char *vol = json_string_value(json_object_get(d, "volume"));
		const char *dev = json_string_value(json_object_get(d, "device"));
		if ((vol && !strcmp(vol, name)) || (dev && !strcmp(dev, name)))
			return d;
	}
	return NULL;
}

long long status_count(json_t *status, const char *key)
{
	json_t *v = json_object_get(json_object_get(status, "counts"), key);

	return json_is_integer(v) ? json_integer_value(v) : -1;
}

struct status_wait {
	const struct agent_fixture *f;
	const char *socket;
	bool (*pred)(json_t *status, const void *arg);
	const void *arg;
};

static bool status_holds(void *arg)
{
	struct status_wait *w = arg;
	json_t *st = w->socket ? fixture_status_at(w->socket) : fixture_status(w->f);
	bool ok = st && w->pred(st, w->arg);

	json_decref(st);
	return ok;
}

bool fixture_wait_status(const struct agent_fixture *f, const char *socket,
			 bool (*pred)(json_t *status, const void *arg), const void *arg,
			 int timeout_ms)
{
	struct status_wait w = { f, socket, pred, arg };

	return test_wait_until(status_holds, &w, timeout_ms);
}

static bool is_ready(json_t *st, const void *arg)
{
	return json_is_true(json_object_get(st, "ready"));
}

bool fixture_wait_ready(const struct agent_fixture *f, const char *socket, int timeout_ms)
{
	return fixture_wait_status(f, socket, is_ready, NULL, timeout_ms);
}

struct pod_state_arg {
	const char *target, *state, *error;
	int read_only;
};

static bool pod_in_state(json_t *st, const void *arg)
{
	const struct pod_state_arg *a = arg;
	json_t *pod = status_pod_volume(st, a->target);
	const char *s = pod ? json_string_value(json_object_get(pod, "state")) : NULL;

	return s && !strcmp(s, a->state) &&
	       (a->read_only < 0 ||
		json_is_true(json_object_get(pod, "read_only")) == (a->read_only == 1));
}

bool fixture_wait_pod_state(const struct agent_fixture *f, const char *target, const char *state,
			    int read_only, int timeout_ms)
{
	struct pod_state_arg a = { .target = target, .state = state, .read_only = read_only };

	return fixture_wait_status(f, NULL, pod_in_state, &a, timeout_ms);
}

static bool pod_has_error(json_t *st, const void *arg)
{
	const struct pod_state_arg *a = arg;
	json_t *pod = status_pod_volume(st, a->target);
	const char *e =
		json_string_value(json_object_get(json_object_get(pod, "backoff"), "last_error"));

	return e && strstr(e, a->error);
}

bool fixture_wait_pod_error(const struct agent_fixture *f, const char *target, const char *text,
			    int timeout_ms)
{
	struct pod_state_arg a = { .target = target, .error = text };

	return fixture_wait_status(f, NULL, pod_has_error, &a, timeout_ms);
}

struct status_count_arg {
	const char *key;
	long long n;
};

static bool status_count_is(json_t *st, const void *arg)
{
	const struct status_count_arg *a = arg;

	return status_count(st, a->key) == a->n;
}

bool fixture_wait_count(const struct agent_fixture *f, const char *key, long long n, int timeout_ms)
{
	struct status_count_arg a = { key, n };

	return fixture_wait_status(f, NULL, status_count_is, &a, timeout_ms);
}
