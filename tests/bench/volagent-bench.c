/* volagent-bench.c - the benchmarks of `make bench` that need no gRPC: converge (floor, exec
 * baseline, volagent), steady state (idle CPU, forced full pass, RSS) and restart.
 *
 * Run by scripts/bench as root inside a private mount namespace, on a work dir the runner
 * mounted (tmpfs, with the volume sources on an ext4 loop device).  Each figure is printed as
 * "figure <name> <value> <unit> ..." on stdout, one line each, so the runner can summarize;
 * everything else (progress, per-repetition numbers) is free text.
 *
 * The three converge variants do the same kernel work on the same sources, back to back in
 * one run, so a noisy machine shifts them together:
 *   floor     a tight loop: mkdir + mount(2) MS_BIND per target; then umount2 + rmdir;
 *             (also, for information, the same with the four dir levels of a pod volume's
 *             target that the agent makes: 4 mkdir + mount, umount2 + 4 rmdir);
 *   exec      what kubelet's mount-utils and Go CSI node plugins do per volume: read
 *             /proc/self/mountinfo to check the target, then fork/exec `/bin/mount --bind`
 *             (and for removal: read mountinfo, `/bin/umount`, rmdir), on as many threads as
 *             the agent has workers;
 *   volagent  N pod spec files renamed into the pods dir at once, until every target is a
 *             mount root (statx STATX_ATTR_MOUNT_ROOT, checked in order, so the checker costs
 *             O(N) stat calls and never re-reads the table); then the files are removed, until
 *             every target is gone.  A final read of mountinfo checks the count.
 *
 *   volagent-bench converge --agent BIN --work DIR --n 100,1000,5000 --reps 5,3,1 [--jobs 8]
 *                           (--jobs 0: no exec baseline, for profiling the agent alone)
 *   volagent-bench steady   --agent BIN --work DIR --n 10000 [--idle 30] [--passes 5]
 *                           [--restarts 3] [--csi-bench BIN] [--resync-interval S]
 *                           [--events 200]
 *   common: [--agent-arg ARG]... (passed to `volagent run`, e.g. --mount-events off for the
 *           fallback path) [--prefix P] (prepended to every figure name, e.g. "fallback.")
 *
 * With --csi-bench (an agent that serves CSI), the restart figure is the time to Probe ready
 * (csi-bench --wait-ready polls Probe); without it, the time to READY=1 on NOTIFY_SOCKET. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench-util.h"
extern char **environ;

#define MAX_N 20000
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static const char *agent_bin;
static const char *work;
static const char *csi_bench_bin;
static const char *agent_args[16];
static int n_agent_args;
static const char *figure_prefix = "";
static int resync_interval_s; /* 0: the agent's default, no alignment of the idle window */
static char src_root[PATH_MAX];
/* The agent this process started, stopped by die() so that a failed run leaves none. */
static pid_t running_agent;

static double ms_since(uint64_t t0)
{
	return (double)(bench_now_ns() - t0) / 1e6;
}

/* bench_init's on_die: a failed run leaves no agent behind. */
static void stop_running_agent(void)
{
	if (running_agent > 0) {
		kill(running_agent, SIGTERM);
		waitpid(running_agent, NULL, 0);
	}
}

/* "figure <name> <value> <unit> [reps: a b c]": the line the runner's summary reads. */
static void figure(const char *name, double value, const char *unit, const double *reps, int n)
{
	printf("figure %s%s %.3f %s", figure_prefix, name, value, unit);
	if (reps && n > 1) {
		printf(" (median of %d:", n);
		for (int i = 0; i < n; i++)
			printf(" %.3f", reps[i]);
		printf(")");
	}
	printf("\n");
	fflush(stdout);
}

static void write_file(const char *path, const char *content)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	size_t len = strlen(content);

	if (fd < 0 || write(fd, content, len) != (ssize_t)len)
		die("write %s: %s", path, strerror(errno));
	close(fd);
}

static void mkdir_or_die(const char *path)
{
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		die("mkdir %s: %s", path, strerror(errno));
}

static void nap_us(long us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

/* The mountinfo target field, unescaped (\040 etc.), into out. */
static void unescape(const char *s, size_t len, char *out, size_t size)
{
	size_t o = 0;

	for (size_t i = 0; i < len && o + 1 < size; i++) {
		if (s[i] == '\\' && i + 3 < len && s[i + 1] >= '0' && s[i + 1] <= '3') {
			out[o++] = (char)((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 +
					  (s[i + 3] - '0'));
			i += 3;
		} else {
			out[o++] = s[i];
		}
	}
	out[o] = '\0';
}

/* Reads the whole of /proc/self/mountinfo and calls fn for each target; what a Go plugin's
 * mount.List()/IsNotMountPoint() does per check.  Returns how many targets matched prefix
 * (fn may be NULL) or, with exact, 1 when target is mounted. */
static long mountinfo_scan(const char *target, bool exact)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL, mp[PATH_MAX];
	size_t cap = 0, tlen = strlen(target);
	long n = 0;

	if (!f)
		die("open /proc/self/mountinfo: %s", strerror(errno));
	while (getline(&line, &cap, f) > 0) {
		/* id parent major:minor root mount-point ... */
		char *p = line;
		for (int field = 0; field < 4 && p; field++) {
			p = strchr(p, ' ');
			if (p)
				p++;
		}
		if (!p)
			continue;
		unescape(p, strcspn(p, " "), mp, sizeof(mp));
		if (exact ? strcmp(mp, target) == 0
			  : strncmp(mp, target, tlen) == 0 && mp[tlen] == '/')
			n++;
	}
	free(line);
	fclose(f);
	return n;
}

/* --- the sources ------------------------------------------------------------------------ */

static void src_path(int i, char *buf, size_t size)
{
	snprintf(buf, size, "%s/%d", src_root, i);
}

static void make_sources(int n)
{
	char p[PATH_MAX];

	for (int i = 0; i < n; i++) {
		src_path(i, p, sizeof(p));
		mkdir_or_die(p);
	}
}

/* --- floor ------------------------------------------------------------------------------ */

static void floor_run(int n, double *ret_up, double *ret_down)
{
	char dir[PATH_MAX], t[PATH_MAX], s[PATH_MAX];
	uint64_t t0;

	snprintf(dir, sizeof(dir), "%s/floor", work);
	mkdir_or_die(dir);
	t0 = bench_now_ns();
	for (int i = 0; i < n; i++) {
		snprintf(t, sizeof(t), "%s/%d", dir, i);
		src_path(i, s, sizeof(s));
		if (mkdir(t, 0750) < 0 || mount(s, t, NULL, MS_BIND, NULL) < 0)
			die("floor: mount %s: %s", t, strerror(errno));
	}
	*ret_up = ms_since(t0);
	if (mountinfo_scan(dir, false) != n)
		die("floor: expected %d mounts under %s", n, dir);
	t0 = bench_now_ns();
	for (int i = 0; i < n; i++) {
		snprintf(t, sizeof(t), "%s/%d", dir, i);
		if (umount2(t, UMOUNT_NOFOLLOW) < 0 || rmdir(t) < 0)
			die("floor: umount %s: %s", t, strerror(errno));
	}
	*ret_down = ms_since(t0);
}

/* The floor of the same tree the agent makes: per target the four levels of a pod's volume dir
 * (pods/<uid>/volumes/kubernetes.io~local/v), each made by mkdir, and the bind; then umount2
 * and the four rmdirs.  Informational: the target is set against the flat floor above. */
static void floor_tree_run(int n, double *ret_up, double *ret_down)
{
	static const char *const levels[] = { "", "/volumes", "/volumes/kubernetes.io~local",
					      "/volumes/kubernetes.io~local/v" };
	char dir[PATH_MAX], t[PATH_MAX], s[PATH_MAX];
	uint64_t t0;

	snprintf(dir, sizeof(dir), "%s/floor-tree", work);
	mkdir_or_die(dir);
	t0 = bench_now_ns();
	for (int i = 0; i < n; i++) {
		for (size_t l = 0; l < 4; l++) {
			snprintf(t, sizeof(t), "%s/bench-%d%s", dir, i, levels[l]);
			if (mkdir(t, 0750) < 0)
				die("floor-tree: mkdir %s: %s", t, strerror(errno));
		}
		src_path(i, s, sizeof(s));
		if (mount(s, t, NULL, MS_BIND, NULL) < 0)
			die("floor-tree: mount %s: %s", t, strerror(errno));
	}
	*ret_up = ms_since(t0);
	if (mountinfo_scan(dir, false) != n)
		die("floor-tree: expected %d mounts under %s", n, dir);
	t0 = bench_now_ns();
	for (int i = 0; i < n; i++) {
		snprintf(t, sizeof(t), "%s/bench-%d%s", dir, i, levels[3]);
		if (umount2(t, UMOUNT_NOFOLLOW) < 0)
			die("floor-tree: umount %s: %s", t, strerror(errno));
		for (int l = 3; l >= 0; l--) {
			snprintf(t, sizeof(t), "%s/bench-%d%s", dir, i, levels[l]);
			if (rmdir(t) < 0)
				die("floor-tree: rmdir %s: %s", t, strerror(errno));
		}
	}
	*ret_down = ms_since(t0);
}

/* An openat2(2) that refuses every symlink, as the agent's walk makes it (bench: no error text). */
static int open_no_symlinks(int dir_fd, const char *path)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC | O_DIRECTORY | O_NOFOLLOW,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};

	return (int)syscall(SYS_openat2, dir_fd, path, &how, sizeof(how));
}

/* mkdirat + an O_NOFOLLOW open of what it made: one level of the agent's walk. */
static int make_and_open(int dir_fd, const char *name, const char *what)
{
	int fd;

	if (mkdirat(dir_fd, name, 0750) < 0 && errno != EEXIST)
		die("floor-walk: mkdir %s: %s", what, strerror(errno));
	fd = openat(dir_fd, name, O_PATH | O_CLOEXEC | O_DIRECTORY | O_NOFOLLOW);
	if (fd < 0)
		die("floor-walk: open %s: %s", what, strerror(errno));
	return fd;
}

/* The system calls a worker of the agent makes for one new pod's directory volume, and no
 * more, in one thread: the whole parent tried in one openat2 (ENOENT for a new pod), the root
 * opened, each missing level made and opened without following symlinks (the walk that keeps a
 * symlink swapped in from leading the bind elsewhere), the source opened the same way, the
 * bind by open_tree + move_mount onto the opened parent, the mount ID read back (statx); and
 * for removal: the look at the target (lstat), umount2 and the four rmdirs.  Informational: it
 * says how much of volagent's time is the kernel work its safety rules take, as against the
 * agent's own (events, parsing, the reconciler, the hand-offs between threads). */
static void floor_walk_run(int n, double *ret_up, double *ret_down)
{
	static const char *const levels[] = { "volumes", "kubernetes.io~local" };
	char dir[PATH_MAX], t[PATH_MAX], s[PATH_MAX], uid[32];
	uint64_t t0;

	snprintf(dir, sizeof(dir), "%s/floor-walk", work);
	mkdir_or_die(dir);
	t0 = bench_now_ns();
	for (int i = 0; i < n; i++) {
		int root, fd, next, src, tree;
		struct statx stx;

		snprintf(uid, sizeof(uid), "bench-%d", i);
		snprintf(t, sizeof(t), "%s/%s/volumes/kubernetes.io~local", dir, uid);
		fd = open_no_symlinks(AT_FDCWD, t);
		if (fd >= 0 || errno != ENOENT)
			die("floor-walk: %s: expected no such dir", t);
		root = open_no_symlinks(AT_FDCWD, dir);
		if (root < 0)
			die("floor-walk: open %s: %s", dir, strerror(errno));
		fd = make_and_open(root, uid, t);
		for (size_t l = 0; l < ARRAY_SIZE(levels); l++) {
			next = make_and_open(fd, levels[l], t);
			close(fd);
			fd = next;
		}
		close(root);
		if (mkdirat(fd, "v", 0750) < 0)
			die("floor-walk: mkdir %s/v: %s", t, strerror(errno));
		src_path(i, s, sizeof(s));
		src = open_no_symlinks(AT_FDCWD, s);
		tree = src < 0 ? -1
			       : open_tree(src, "",
					   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
		if (tree < 0 || move_mount(tree, "", fd, "v", MOVE_MOUNT_F_EMPTY_PATH) < 0)
			die("floor-walk: bind %s: %s", s, strerror(errno));
		close(tree);
		close(src);
		if (statx(fd, "v", AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_MNT_ID, &stx) < 0)
			die("floor-walk: statx %s/v: %s", t, strerror(errno));
		close(fd);
	}
	*ret_up = ms_since(t0);
	if (mountinfo_scan(dir, false) != n)
		die("floor-walk: expected %d mounts under %s", n, dir);
	t0 = bench_now_ns();
	for (int i = 0; i < n; i++) {
		static const char *const up[] = { "/volumes/kubernetes.io~local/v",
						  "/volumes/kubernetes.io~local", "/volumes", "" };
		struct stat st;

		for (size_t l = 0; l < ARRAY_SIZE(up); l++) {
			snprintf(t, sizeof(t), "%s/bench-%d%s", dir, i, up[l]);
			if (l == 0 && (lstat(t, &st) < 0 || umount2(t, UMOUNT_NOFOLLOW) < 0))
				die("floor-walk: umount %s: %s", t, strerror(errno));
			if (rmdir(t) < 0)
				die("floor-walk: rmdir %s: %s", t, strerror(errno));
		}
	}
	*ret_down = ms_since(t0);
}

/* --- exec baseline ---------------------------------------------------------------------- */

struct exec_job {
	int n, jobs;
	bool down;
	int next;
	pthread_mutex_t lock;
	char dir[PATH_MAX];
};

static int run_prog(const char *const argv[])
{
	pid_t pid;
	int status, r;

	r = posix_spawn(&pid, argv[0], NULL, NULL, (char *const *)argv, environ);
	if (r != 0)
		die("exec %s: %s", argv[0], strerror(r));
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			die("waitpid: %s", strerror(errno));
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void *exec_worker(void *arg)
{
	struct exec_job *j = arg;
	char t[PATH_MAX], s[PATH_MAX];

	for (;;) {
		int i;

		pthread_mutex_lock(&j->lock);
		i = j->next++;
		pthread_mutex_unlock(&j->lock);
		if (i >= j->n)
			return NULL;
		snprintf(t, sizeof(t), "%s/%d", j->dir, i);
		if (!j->down) {
			src_path(i, s, sizeof(s));
			if (mkdir(t, 0750) < 0 && errno != EEXIST)
				die("exec: mkdir %s: %s", t, strerror(errno));
			if (mountinfo_scan(t, true) == 0 &&
			    run_prog((const char *const[]){ "/bin/mount", "--bind", s, t, NULL }) !=
				    0)
				die("exec: mount --bind %s %s failed", s, t);
		} else {
			if (mountinfo_scan(t, true) > 0 &&
			    run_prog((const char *const[]){ "/bin/umount", t, NULL }) != 0)
				die("exec: umount %s failed", t);
			if (rmdir(t) < 0)
				die("exec: rmdir %s: %s", t, strerror(errno));
		}
	}
}

static double exec_phase(struct exec_job *j, bool down)
{
	pthread_t th[64];
	uint64_t t0 = bench_now_ns();

	j->down = down;
	j->next = 0;
	for (int k = 0; k < j->jobs; k++)
		pthread_create(&th[k], NULL, exec_worker, j);
	for (int k = 0; k < j->jobs; k++)
		pthread_join(th[k], NULL);
	return ms_since(t0);
}

static void exec_run(int n, int jobs, double *ret_up, double *ret_down)
{
	struct exec_job j = { .n = n, .jobs = jobs, .lock = PTHREAD_MUTEX_INITIALIZER };

	snprintf(j.dir, sizeof(j.dir), "%s/exec", work);
	mkdir_or_die(j.dir);
	*ret_up = exec_phase(&j, false);
	if (mountinfo_scan(j.dir, false) != n)
		die("exec: expected %d mounts under %s", n, j.dir);
	*ret_down = exec_phase(&j, true);
}

/* --- the agent ------------------------------------------------------------------------- */

struct agent {
	pid_t pid;
	char root[PATH_MAX], state[PATH_MAX], pods[PATH_MAX], staging[PATH_MAX];
	char log[PATH_MAX], config[PATH_MAX], kubelet[PATH_MAX], csi_sock[PATH_MAX];
	int notify_fd;
	char notify_path[108];
	/* A thread reads the notify socket all the time, as systemd does: the agent's sd_notify()
	 * blocks once the socket's queue is full. */
	pthread_t notify_thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned long ready_count; /* READY=1 messages seen */
	bool stop_reader;
	uint64_t started_ns; /* when it was spawned: its periodic resyncs count from about here */
};

static void *notify_reader(void *arg)
{
	struct agent *a = arg;

	for (;;) {
		struct pollfd p = { .fd = a->notify_fd, .events = POLLIN };
		char buf[4096];
		ssize_t n;

		pthread_mutex_lock(&a->lock);
		if (a->stop_reader) {
			pthread_mutex_unlock(&a->lock);
			return NULL;
		}
		pthread_mutex_unlock(&a->lock);
		if (poll(&p, 1, 100) <= 0)
			continue;
		while ((n = recv(a->notify_fd, buf, sizeof(buf) - 1, 0)) > 0) {
			buf[n] = '\0';
			if (strstr(buf, "READY=1")) {
				pthread_mutex_lock(&a->lock);
				a->ready_count++;
				pthread_cond_broadcast(&a->cond);
				pthread_mutex_unlock(&a->lock);
			}
		}
	}
}

static void agent_init(struct agent *a, const char *name)
{
	char base[PATH_MAX];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	memset(a, 0, sizeof(*a));
	snprintf(base, sizeof(base), "%s/%s", work, name);
	mkdir_or_die(base);
	snprintf(a->root, sizeof(a->root), "%s/root", base);
	snprintf(a->state, sizeof(a->state), "%s/state", base);
	snprintf(a->pods, sizeof(a->pods), "%s/pods", base);
	snprintf(a->staging, sizeof(a->staging), "%s/staging", base);
	snprintf(a->log, sizeof(a->log), "%s/agent.log", base);
	snprintf(a->config, sizeof(a->config), "%s/config.json", base);
	snprintf(a->kubelet, sizeof(a->kubelet), "%s/kubelet", base);
	snprintf(a->csi_sock, sizeof(a->csi_sock), "%s/plugins/volagent/csi.sock", a->kubelet);
	mkdir_or_die(a->pods);
	mkdir_or_die(a->staging);
	mkdir_or_die(a->kubelet);
	/* An empty config of its own: the host's /etc/volagent is never read. */
	write_file(a->config, "{}\n");
	snprintf(a->notify_path, sizeof(a->notify_path), "%s/notify.sock", base);
	unlink(a->notify_path);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", a->notify_path);
	a->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (a->notify_fd < 0 || bind(a->notify_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("notify socket %s: %s", a->notify_path, strerror(errno));
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->cond, NULL);
	pthread_create(&a->notify_thread, NULL, notify_reader, a);
}

static void agent_start(struct agent *a)
{
	char notify_env[160];
	const char *argv[48];
	char *envp[64];
	int n = 0, ne = 0;
	posix_spawn_file_actions_t fa;
	int r;

	argv[n++] = agent_bin;
	argv[n++] = "run";
	argv[n++] = "--root-dir";
	argv[n++] = a->root;
	argv[n++] = "--state-dir";
	argv[n++] = a->state;
	argv[n++] = "--pods-dir";
	argv[n++] = a->pods;
	argv[n++] = "--config";
	argv[n++] = a->config;
	/* udev scanning is not part of any figure here. */
	argv[n++] = "--device-inventory";
	argv[n++] = "false";
	if (csi_bench_bin) {
		static char ep[PATH_MAX + 8];
		snprintf(ep, sizeof(ep), "unix://%s", a->csi_sock);
		argv[n++] = "--csi";
		argv[n++] = "--csi-endpoint";
		argv[n++] = ep;
		argv[n++] = "--kubelet-root-dir";
		argv[n++] = a->kubelet;
	}
	if (resync_interval_s) {
		static char ri[32];
		snprintf(ri, sizeof(ri), "%ds", resync_interval_s);
		argv[n++] = "--resync-interval";
		argv[n++] = ri;
	}
	for (int i = 0; i < n_agent_args; i++)
		argv[n++] = agent_args[i];
	argv[n] = NULL;
	a->started_ns = bench_now_ns();

	snprintf(notify_env, sizeof(notify_env), "NOTIFY_SOCKET=%s", a->notify_path);
	for (char **e = environ; *e && ne < 60; e++)
		if (strncmp(*e, "NOTIFY_SOCKET=", 14) && strncmp(*e, "WATCHDOG_", 9))
			envp[ne++] = *e;
	envp[ne++] = notify_env;
	envp[ne] = NULL;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, a->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	r = posix_spawn(&a->pid, agent_bin, &fa, NULL, (char *const *)argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0)
		die("start %s: %s", agent_bin, strerror(r));
	running_agent = a->pid;
	{
		/* For perf -p and for the runner's cleanup. */
		char p[PATH_MAX + 16], pid[32];
		snprintf(p, sizeof(p), "%s.pid", a->log);
		snprintf(pid, sizeof(pid), "%d\n", (int)a->pid);
		write_file(p, pid);
	}
}

static unsigned long agent_ready_count(struct agent *a)
{
	unsigned long n;

	pthread_mutex_lock(&a->lock);
	n = a->ready_count;
	pthread_mutex_unlock(&a->lock);
	return n;
}

/* Waits until more than seen READY=1 messages arrived; false after timeout_ms or when the
 * agent exited. */
static bool agent_wait_ready(struct agent *a, unsigned long seen, int timeout_ms)
{
	uint64_t t0 = bench_now_ns();
	bool ok;

	pthread_mutex_lock(&a->lock);
	while (!(ok = a->ready_count > seen)) {
		struct timespec ts;
		int left = timeout_ms - (int)ms_since(t0);

		if (left <= 0 || waitpid(a->pid, NULL, WNOHANG) == a->pid)
			break;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 20 * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&a->cond, &a->lock, &ts);
	}
	pthread_mutex_unlock(&a->lock);
	return ok;
}

static void agent_stop(struct agent *a)
{
	int status;

	if (a->pid <= 0)
		return;
	kill(a->pid, SIGTERM);
	while (waitpid(a->pid, &status, 0) < 0 && errno == EINTR)
		;
	a->pid = 0;
	running_agent = 0;
}

static void agent_fini(struct agent *a)
{
	agent_stop(a);
	pthread_mutex_lock(&a->lock);
	a->stop_reader = true;
	pthread_mutex_unlock(&a->lock);
	pthread_join(a->notify_thread, NULL);
	if (a->notify_fd >= 0)
		close(a->notify_fd);
	unlink(a->notify_path);
}

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t size = 0;

	if (!f)
		return NULL;
	{
		FILE *m = open_memstream(&buf, &size);
		char chunk[65536];
		size_t k;

		while ((k = fread(chunk, 1, sizeof(chunk), f)) > 0)
			fwrite(chunk, 1, k, m);
		fclose(m);
	}
	fclose(f);
	return buf;
}

static long count_str(const char *hay, const char *needle)
{
	long n = 0;

	for (const char *p = hay; p && (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static long log_count(const struct agent *a, const char *needle)
{
	char *s = read_all(a->log);
	long n = count_str(s, needle);

	free(s);
	return n;
}

static void target_path(const struct agent *a, int i, char *buf, size_t size)
{
	snprintf(buf, size, "%s/pods/bench-%d/volumes/kubernetes.io~local/v", a->root, i);
}

/* Writes pod spec files for pods [from, to) into the staging dir (not timed). */
static void stage_specs(const struct agent *a, int from, int to)
{
	char p[PATH_MAX], s[PATH_MAX], spec[PATH_MAX + 256];

	for (int i = from; i < to; i++) {
		src_path(i, s, sizeof(s));
		snprintf(spec, sizeof(spec),
			 "{\"pod\": {\"uid\": \"bench-%d\"}, \"volumes\": [{\"name\": \"v\", "
			 "\"local\": {\"path\": \"%s\"}}]}\n",
			 i, s);
		snprintf(p, sizeof(p), "%s/bench-%d.json", a->staging, i);
		write_file(p, spec);
	}
}

/* Renames the staged spec files into the pods dir: the drop. */
static void drop_specs(const struct agent *a, int from, int to)
{
	char x[PATH_MAX], y[PATH_MAX];

	for (int i = from; i < to; i++) {
		snprintf(x, sizeof(x), "%s/bench-%d.json", a->staging, i);
		snprintf(y, sizeof(y), "%s/bench-%d.json", a->pods, i);
		if (rename(x, y) < 0)
			die("rename %s: %s", x, strerror(errno));
	}
}

static void remove_specs(const struct agent *a, int from, int to)
{
	char y[PATH_MAX];

	for (int i = from; i < to; i++) {
		snprintf(y, sizeof(y), "%s/bench-%d.json", a->pods, i);
		if (unlink(y) < 0)
			die("unlink %s: %s", y, strerror(errno));
	}
}

/* Waits until every target [from, to) is (or, with !mounted, is no longer) a mount root. */
static bool wait_targets(const struct agent *a, int from, int to, bool mounted, int timeout_ms)
{
	uint64_t t0 = bench_now_ns();
	char t[PATH_MAX];

	for (int i = from; i < to; i++) {
		target_path(a, i, t, sizeof(t));
		while (bench_is_mount_root(t) != mounted) {
			if (ms_since(t0) > timeout_ms || waitpid(a->pid, NULL, WNOHANG) == a->pid) {
				fprintf(stderr, "volagent-bench: target %d of %d still %s: %s\n", i,
					to - from, mounted ? "not mounted" : "mounted", t);
				return false;
			}
			nap_us(200);
		}
	}
	return true;
}

static long mounts_under_root(const struct agent *a)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/pods", a->root);
	return mountinfo_scan(p, false);
}

/* One converge and teardown of n volumes by a running agent. */
static void agent_converge(struct agent *a, int n, double *ret_up, double *ret_down)
{
	uint64_t t0;
	long failed_before = log_count(a, "operation failed");

	stage_specs(a, 0, n);
	t0 = bench_now_ns();
	drop_specs(a, 0, n);
	if (!wait_targets(a, 0, n, true, 120000))
		die("volagent did not mount %d volumes in 120 s; see %s", n, a->log);
	*ret_up = ms_since(t0);
	if (mounts_under_root(a) != n)
		die("volagent: expected %d mounts under %s", n, a->root);
	t0 = bench_now_ns();
	remove_specs(a, 0, n);
	if (!wait_targets(a, 0, n, false, 120000))
		die("volagent did not unmount %d volumes in 120 s; see %s", n, a->log);
	*ret_down = ms_since(t0);
	if (log_count(a, "operation failed") != failed_before)
		die("volagent logged failed operations; see %s", a->log);
}

/* --- converge ------------------------------------------------------------------------- */

static int parse_list(const char *s, int *out, int max)
{
	int n = 0;
	char *end;

	while (*s && n < max) {
		long v = strtol(s, &end, 10);
		if (end == s || v <= 0 || v > MAX_N)
			die("bad number list: %s", s);
		out[n++] = (int)v;
		s = *end == ',' ? end + 1 : end;
	}
	return n;
}

static int cmd_converge(const char *ns, const char *reps_s, int jobs)
{
	int sizes[8], reps[8], nsz, nreps;
	struct agent a;

	nsz = parse_list(ns, sizes, 8);
	nreps = parse_list(reps_s, reps, 8);
	if (nreps != nsz)
		die("--reps needs one count per --n");
	{
		int max = 0;
		for (int k = 0; k < nsz; k++)
			max = sizes[k] > max ? sizes[k] : max;
		make_sources(max);
	}
	agent_init(&a, "converge");
	agent_start(&a);
	if (!agent_wait_ready(&a, 0, 30000))
		die("agent not ready in 30 s; see %s", a.log);

	for (int k = 0; k < nsz; k++) {
		int n = sizes[k], r = reps[k];
		double fu[8], fd[8], tu[8], td[8], wu[8], wd[8], eu[8], ed[8], vu[8], vd[8];
		char name[64];

		for (int i = 0; i < r; i++) {
			floor_run(n, &fu[i], &fd[i]);
			floor_tree_run(n, &tu[i], &td[i]);
			floor_walk_run(n, &wu[i], &wd[i]);
			if (jobs > 0)
				exec_run(n, jobs, &eu[i], &ed[i]);
			else
				eu[i] = ed[i] = 0;
			agent_converge(&a, n, &vu[i], &vd[i]);
			printf("converge N=%d rep %d: mount floor %.1f ms (with the pod dirs %.1f, the "
			       "agent's walk %.1f), exec %.1f ms, volagent %.1f ms; unmount floor %.1f ms "
			       "(%.1f, %.1f), exec %.1f ms, volagent %.1f ms\n",
			       n, i + 1, fu[i], tu[i], wu[i], eu[i], vu[i], fd[i], td[i], wd[i],
			       ed[i], vd[i]);
			fflush(stdout);
		}
		const struct {
			const char *phase, *variant;
			double *ms;
		} figs[] = {
			{ "converge", "floor", fu },	{ "converge", "floor_tree", tu },
			{ "remove", "floor_tree", td }, { "converge", "floor_walk", wu },
			{ "remove", "floor_walk", wd }, { "converge", "exec", eu },
			{ "converge", "volagent", vu }, { "remove", "floor", fd },
			{ "remove", "exec", ed },	{ "remove", "volagent", vd },
		};

		for (size_t f = 0; f < ARRAY_SIZE(figs); f++) {
			snprintf(name, sizeof(name), "%s.%d.%s", figs[f].phase, n, figs[f].variant);
			figure(name, bench_median(figs[f].ms, r), "ms", figs[f].ms, r);
		}
	}
	agent_fini(&a);
	return 0;
}

/* --- steady state, memory, restart ------------------------------------------------------ */

/* CPU time of every thread of pid, in ns (/proc/PID/task/TID/schedstat). */
static uint64_t proc_cpu_ns(pid_t pid)
{
	char dir[64], p[128];
	uint64_t total = 0;
	DIR *d;
	struct dirent *e;

	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	d = opendir(dir);
	if (!d)
		die("opendir %s: %s", dir, strerror(errno));
	while ((e = readdir(d))) {
		FILE *f;
		unsigned long long run = 0;

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s/schedstat", dir, e->d_name);
		f = fopen(p, "re");
		if (f && fscanf(f, "%llu", &run) == 1)
			total += run;
		if (f)
			fclose(f);
	}
	closedir(d);
	return total;
}

/* utime + stime of the whole process (/proc/PID/stat), in ns: a cross-check that counts
 * threads that have exited too. */
static uint64_t proc_stat_cpu_ns(pid_t pid)
{
	char p[64], *s, *q;
	unsigned long long ut = 0, st = 0;

	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	s = read_all(p);
	if (!s)
		die("read %s", p);
	q = strrchr(s, ')');
	/* after ") ": state(3) ... utime is field 14, stime 15 */
	if (!q ||
	    sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		die("parse %s", p);
	free(s);
	return (ut + st) * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));
}

/* A "Key:  N kB" field of /proc/PID/<file>, in KiB; -1 when unreadable. */
static long proc_kib(pid_t pid, const char *file, const char *key)
{
	char p[64], *s, *q;
	long v = -1;

	snprintf(p, sizeof(p), "/proc/%d/%s", (int)pid, file);
	s = read_all(p);
	if (s && (q = strstr(s, key)))
		v = strtol(q + strlen(key), NULL, 10); /* strtol skips the blanks after the key */
	free(s);
	return v;
}

/* VmRSS or VmHWM of pid, in KiB. */
static long proc_status_kib(pid_t pid, const char *key)
{
	return proc_kib(pid, "status", key);
}

/* A field of /proc/PID/smaps_rollup ("Anonymous:", "Rss:"), in KiB; -1 when unreadable. */
static long proc_rollup_kib(pid_t pid, const char *key)
{
	return proc_kib(pid, "smaps_rollup", key);
}

/* An agent with no volume, with or without CSI: its peak RSS after 5 idle seconds. */
static void idle_memory(bool csi, const char *fig)
{
	const char *saved = csi_bench_bin;
	struct agent a;
	long hwm;

	if (!csi)
		csi_bench_bin = NULL;
	agent_init(&a, csi ? "idle-csi" : "idle-nocsi");
	agent_start(&a);
	if (!agent_wait_ready(&a, 0, 30000))
		die("agent not ready in 30 s; see %s", a.log);
	sleep(5);
	hwm = proc_status_kib(a.pid, "VmHWM:");
	printf("idle agent %s CSI, no volumes: VmRSS %ld KiB (anon %ld, file %ld; smaps_rollup "
	       "Anonymous %ld), VmHWM %ld KiB\n",
	       csi ? "with" : "without", proc_status_kib(a.pid, "VmRSS:"),
	       proc_status_kib(a.pid, "RssAnon:"), proc_status_kib(a.pid, "RssFile:"),
	       proc_rollup_kib(a.pid, "Anonymous:"), hwm);
	figure(fig, (double)hwm / 1024, "MiB", NULL, 0);
	agent_fini(&a);
	csi_bench_bin = saved;
}

/* Sleeps until the agent's periodic resync clock (ticks at start + k * interval) is at
 * offset_s past a tick, so that a window of interval + 2 * offset_s or less holds exactly
 * one tick.  No-op without --resync-interval. */
static void align_to_resync(const struct agent *a, double offset_s)
{
	double since, into;

	if (!resync_interval_s)
		return;
	since = (double)(bench_now_ns() - a->started_ns) / 1e9;
	into = since - (double)resync_interval_s * (long)(since / resync_interval_s);
	if (into > offset_s)
		nap_us((long)((resync_interval_s - into + offset_s) * 1e6));
	else
		nap_us((long)((offset_s - into) * 1e6));
}

/* M mount events the agent has to look at: bind mounts outside its tree, then their
 * unmounts (2 * M events).  Returns the agent's CPU per event in us, net of its idle CPU
 * over the same time (idle_ns_per_s). */
static double event_cpu_us(const struct agent *a, int m, double idle_ns_per_s)
{
	char dir[PATH_MAX], t[PATH_MAX + 32];
	uint64_t c0, w0;
	double cpu_ns, wall_s;

	snprintf(dir, sizeof(dir), "%s/events", work);
	mkdir_or_die(dir);
	for (int i = 0; i < m; i++) {
		snprintf(t, sizeof(t), "%s/%d", dir, i);
		mkdir_or_die(t);
	}
	c0 = proc_cpu_ns(a->pid);
	w0 = bench_now_ns();
	for (int i = 0; i < m; i++) {
		snprintf(t, sizeof(t), "%s/%d", dir, i);
		if (mount(src_root, t, NULL, MS_BIND, NULL) < 0)
			die("bind mount %s: %s", t, strerror(errno));
	}
	for (int i = 0; i < m; i++) {
		snprintf(t, sizeof(t), "%s/%d", dir, i);
		if (umount2(t, 0) < 0)
			die("umount %s: %s", t, strerror(errno));
	}
	/* Until the agent is idle again: no CPU used over 200 ms, at most 10 s. */
	for (int i = 0; i < 50; i++) {
		uint64_t x = proc_cpu_ns(a->pid);
		nap_us(200000);
		if ((double)(proc_cpu_ns(a->pid) - x) < idle_ns_per_s * 0.2 + 1e6)
			break;
	}
	wall_s = (double)(bench_now_ns() - w0) / 1e9;
	cpu_ns = (double)(proc_cpu_ns(a->pid) - c0) - idle_ns_per_s * wall_s;
	printf("%d mount events (%d mounts + %d unmounts outside the agent's tree): agent CPU "
	       "%.1f ms over %.2f s, net of idle\n",
	       2 * m, m, m, cpu_ns / 1e6, wall_s);
	return cpu_ns / 1e3 / (2 * m);
}

/* Sends SIGHUP and returns the refresh_us and pass_us of the "forced resync" line it caused. */
static void forced_pass(struct agent *a, long *ret_table, long *ret_refresh_us, long *ret_pass_us)
{
	long before = log_count(a, "msg=\"forced resync\"");
	uint64_t t0 = bench_now_ns();
	char *s, *line = NULL;

	kill(a->pid, SIGHUP);
	for (;;) {
		if (log_count(a, "msg=\"forced resync\"") > before)
			break;
		if (ms_since(t0) > 30000)
			die("no forced resync logged in 30 s; see %s", a->log);
		nap_us(5000);
	}
	s = read_all(a->log);
	for (char *p = s; (p = strstr(p, "msg=\"forced resync\"")); p++)
		line = p;
	if (!line || !strstr(line, "refresh_us=") || !strstr(line, "pass_us="))
		die("cannot parse the forced resync line in %s", a->log);
	*ret_table = strstr(line, "table_entries=")
			     ? strtol(strstr(line, "table_entries=") + 14, NULL, 10)
			     : -1;
	*ret_refresh_us = strtol(strstr(line, "refresh_us=") + 11, NULL, 10);
	*ret_pass_us = strtol(strstr(line, "pass_us=") + 8, NULL, 10);
	free(s);
}

/* Mount IDs of the pod mounts, for checking that a restart remounted nothing. */
static unsigned long long mount_id_digest(const struct agent *a, long *ret_n)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL, prefix[PATH_MAX];
	size_t cap = 0;
	unsigned long long sum = 0;
	long n = 0;

	snprintf(prefix, sizeof(prefix), " %s/pods/", a->root);
	while (f && getline(&line, &cap, f) > 0)
		if (strstr(line, prefix)) {
			unsigned long long id = strtoull(line, NULL, 10);
			sum += id * 2654435761ull ^ (id << 17);
			n++;
		}
	free(line);
	if (f)
		fclose(f);
	*ret_n = n;
	return sum;
}

/* Starts csi-bench --wait-ready on the agent's socket, its output going to out. */
static pid_t spawn_probe_waiter(const struct agent *a, const char *out)
{
	char ep[PATH_MAX + 8];
	const char *argv[] = { csi_bench_bin, "--endpoint", ep, "--wait-ready", "30000", NULL };
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int r;

	snprintf(ep, sizeof(ep), "unix://%s", a->csi_sock);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	r = posix_spawn(&pid, csi_bench_bin, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0)
		die("start %s: %s", csi_bench_bin, strerror(r));
	return pid;
}

static int cmd_steady(int n, int idle_s, int passes, int restarts, int events)
{
	struct agent a;
	double cpu_idle_s, cpu_idle_stat_s, refresh[16], pass[16], rst[16], rst_ready[16];
	long rss_idle, hwm_idle, rss_full, hwm_full, table = 0, anon_idle;
	uint64_t c0, c1, s0, s1, t0;
	unsigned long long digest;
	long nmounts;
	double up, idle_cpu_empty;

	char probe_out[PATH_MAX];

	if (passes > 16 || restarts > 16)
		die("at most 16 passes and restarts");
	snprintf(probe_out, sizeof(probe_out), "%s/probe-waiter.out", work);
	make_sources(n);
	/* Idle memory without and with CSI (gRPC is loaded only when CSI runs). */
	idle_memory(false, "rss.idle.nocsi");
	if (csi_bench_bin)
		idle_memory(true, "rss.idle.csi");
	agent_init(&a, "steady");
	agent_start(&a);
	if (!agent_wait_ready(&a, 0, 30000))
		die("agent not ready in 30 s; see %s", a.log);
	/* Idle with nothing to do: memory, and CPU over 5 s as a reference. */
	c0 = proc_cpu_ns(a.pid);
	sleep(5);
	idle_cpu_empty = (double)(proc_cpu_ns(a.pid) - c0) / 1e9;
	rss_idle = proc_status_kib(a.pid, "VmRSS:");
	hwm_idle = proc_status_kib(a.pid, "VmHWM:");
	printf("idle agent, no volumes: CPU %.4f s over 5 s, VmRSS %ld KiB (anon %ld, file %ld), "
	       "VmHWM %ld KiB\n",
	       idle_cpu_empty, rss_idle, proc_status_kib(a.pid, "RssAnon:"),
	       proc_status_kib(a.pid, "RssFile:"), hwm_idle);
	anon_idle = proc_rollup_kib(a.pid, "Anonymous:");
	figure("rss.idle", (double)hwm_idle / 1024, "MiB", NULL, 0);

	/* n volumes. */
	stage_specs(&a, 0, n);
	t0 = bench_now_ns();
	drop_specs(&a, 0, n);
	if (!wait_targets(&a, 0, n, true, 300000))
		die("volagent did not mount %d volumes; see %s", n, a.log);
	up = ms_since(t0);
	if (mounts_under_root(&a) != n)
		die("expected %d mounts", n);
	printf("converged %d volumes in %.1f ms (not a target figure)\n", n, up);
	figure("steady.converge", up, "ms", NULL, 0);
	/* Let the burst settle (journal, last pass), then measure idle CPU over a window that
	 * holds exactly one periodic resync (with --resync-interval: the window starts 2 s
	 * after a tick, the interval is over (idle_s + 2) / 2 and at most idle_s + 2), in 1-s slices: the slice
	 * with the resync, less the median slice, is what the resync cost. */
	sleep(3);
	align_to_resync(&a, 2.0);
	{
		double slice[600], sorted[600], peak = 0;
		int ns = idle_s < 600 ? idle_s : 600;

		c0 = proc_cpu_ns(a.pid);
		s0 = proc_stat_cpu_ns(a.pid);
		for (int i = 0; i < ns; i++) {
			uint64_t x = proc_cpu_ns(a.pid), w = bench_now_ns();
			nap_us(1000000 - (long)((bench_now_ns() - w) / 1000));
			slice[i] = (double)(proc_cpu_ns(a.pid) - x) / 1e6;
			sorted[i] = slice[i];
			peak = slice[i] > peak ? slice[i] : peak;
		}
		c1 = proc_cpu_ns(a.pid);
		s1 = proc_stat_cpu_ns(a.pid);
		cpu_idle_s = (double)(c1 - c0) / 1e9;
		cpu_idle_stat_s = (double)(s1 - s0) / 1e9;
		printf("idle with %d volumes: CPU %.4f s over %d s (schedstat; utime+stime says "
		       "%.2f s)%s\n",
		       n, cpu_idle_s, ns, cpu_idle_stat_s,
		       resync_interval_s ? ", one periodic resync in the window" : "");
		figure("steady.cpu", cpu_idle_s * 30.0 / ns, "s/30s", NULL, 0);
		if (resync_interval_s) {
			double med = bench_median(sorted, ns);
			printf("periodic resync (--resync-interval %ds): its 1-s slice %.2f ms CPU, "
			       "the median slice %.2f ms\n",
			       resync_interval_s, peak, med);
			figure("steady.resync_cpu", peak - med, "ms", NULL, 0);
		}
		if (events > 0)
			figure("event.cpu", event_cpu_us(&a, events, cpu_idle_s * 1e9 / ns), "us",
			       NULL, 0);
	}

	for (int i = 0; i < passes; i++) {
		long r_us, p_us;
		forced_pass(&a, &table, &r_us, &p_us);
		refresh[i] = (double)r_us / 1000;
		pass[i] = (double)p_us / 1000;
		printf("forced resync %d: table_entries=%ld refresh %.2f ms, pass %.2f ms\n", i + 1,
		       table, refresh[i], pass[i]);
	}
	{
		double tot[16];
		for (int i = 0; i < passes; i++)
			tot[i] = refresh[i] + pass[i];
		figure("steady.refresh", bench_median(refresh, passes), "ms", refresh, passes);
		figure("steady.pass", bench_median(pass, passes), "ms", pass, passes);
		figure("steady.forced", bench_median(tot, passes), "ms", tot, passes);
	}
	rss_full = proc_status_kib(a.pid, "VmRSS:");
	hwm_full = proc_status_kib(a.pid, "VmHWM:");
	printf("with %d volumes: VmRSS %ld KiB (anon %ld, file %ld), VmHWM %ld KiB\n", n, rss_full,
	       proc_status_kib(a.pid, "RssAnon:"), proc_status_kib(a.pid, "RssFile:"), hwm_full);
	figure("rss.full", (double)hwm_full / 1024, "MiB", NULL, 0);
	{
		long anon = proc_rollup_kib(a.pid, "Anonymous:");
		printf("smaps_rollup Anonymous with %d volumes: %ld KiB; %.0f bytes per volume "
		       "(%.0f over the idle agent's)\n",
		       n, anon, anon * 1024.0 / n, (anon - anon_idle) * 1024.0 / n);
		figure("mem.anon_per_volume", anon * 1024.0 / n, "bytes", NULL, 0);
	}

	/* Restart: stop, start, time to ready; nothing may be remounted. */
	digest = mount_id_digest(&a, &nmounts);
	if (nmounts != n)
		die("expected %d pod mounts before restart, found %ld", n, nmounts);
	for (int i = 0; i < restarts; i++) {
		long mounted_before, n2;
		pid_t waiter = 0;
		int status;

		unsigned long seen;

		agent_stop(&a);
		seen = agent_ready_count(&a);
		mounted_before = log_count(&a, "msg=\"volume mounted\"");
		if (csi_bench_bin) {
			/* Started first, so its own start-up (grpc_init) is not counted. */
			waiter = spawn_probe_waiter(&a, probe_out);
			nap_us(100000);
		}
		t0 = bench_now_ns();
		agent_start(&a);
		if (!agent_wait_ready(&a, seen, 60000))
			die("restarted agent not ready in 60 s; see %s", a.log);
		rst_ready[i] = ms_since(t0);
		rst[i] = rst_ready[i];
		if (waiter) {
			char *o;
			while (waitpid(waiter, &status, 0) < 0 && errno == EINTR)
				;
			o = read_all(probe_out);
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !o ||
			    !strstr(o, "ready_at_ns "))
				die("csi-bench --wait-ready failed; see %s", a.log);
			rst[i] = (double)(strtoull(strstr(o, "ready_at_ns ") + 12, NULL, 10) - t0) /
				 1e6;
			free(o);
		}
		if (log_count(&a, "msg=\"volume mounted\"") != mounted_before)
			die("the restarted agent remounted volumes; see %s", a.log);
		if (mount_id_digest(&a, &n2) != digest || n2 != n)
			die("mount IDs changed across the restart (%ld mounts)", n2);
		if (waiter)
			printf("restart %d: READY=1 after %.1f ms, Probe ready after %.1f ms; 0 "
			       "remounts, mount IDs unchanged\n",
			       i + 1, rst_ready[i], rst[i]);
		else
			printf("restart %d: READY=1 after %.1f ms; 0 remounts, mount IDs unchanged\n",
			       i + 1, rst_ready[i]);
	}
	figure(csi_bench_bin ? "restart.probe" : "restart.ready", bench_median(rst, restarts), "ms",
	       rst, restarts);
	if (csi_bench_bin)
		figure("restart.ready", bench_median(rst_ready, restarts), "ms", rst_ready,
		       restarts);

	/* Tear down through the agent too, so the run leaves the namespace as it found it. */
	t0 = bench_now_ns();
	remove_specs(&a, 0, n);
	if (!wait_targets(&a, 0, n, false, 300000))
		die("volagent did not unmount %d volumes; see %s", n, a.log);
	printf("removed %d volumes in %.1f ms (not a target figure)\n", n, ms_since(t0));
	figure("steady.remove", ms_since(t0), "ms", NULL, 0);
	agent_fini(&a);
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: volagent-bench converge --agent BIN --work DIR --sources DIR [--n 100,1000,5000]\n"
		"                               [--reps 5,3,1] [--jobs 8]\n"
		"       volagent-bench steady --agent BIN --work DIR --sources DIR [--n 10000]\n"
		"                             [--idle 30] [--passes 5] [--restarts 3] [--csi-bench BIN]\n"
		"                             [--resync-interval S] [--events 200]\n"
		"       common: [--agent-arg ARG]... [--prefix P]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *ns = NULL, *reps = NULL, *sources = NULL;
	int jobs = 8, idle = 30, passes = 5, restarts = 3, n = 10000, events = 200;

	bench_init("volagent-bench", stop_running_agent);
	if (argc < 2)
		usage();
	for (int i = 2; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			usage();
		i++;
		if (!strcmp(o, "--agent"))
			agent_bin = v;
		else if (!strcmp(o, "--work"))
			work = v;
		else if (!strcmp(o, "--sources"))
			sources = v;
		else if (!strcmp(o, "--n"))
			ns = v;
		else if (!strcmp(o, "--reps"))
			reps = v;
		else if (!strcmp(o, "--jobs"))
			jobs = atoi(v);
		else if (!strcmp(o, "--idle"))
			idle = atoi(v);
		else if (!strcmp(o, "--passes"))
			passes = atoi(v);
		else if (!strcmp(o, "--restarts"))
			restarts = atoi(v);
		else if (!strcmp(o, "--csi-bench"))
			csi_bench_bin = v;
		else if (!strcmp(o, "--agent-arg") && n_agent_args < 16)
			agent_args[n_agent_args++] = v;
		else if (!strcmp(o, "--prefix"))
			figure_prefix = v;
		else if (!strcmp(o, "--resync-interval"))
			resync_interval_s = atoi(v);
		else if (!strcmp(o, "--events"))
			events = atoi(v);
		else
			usage();
	}
	if (!agent_bin || !work || !sources || jobs < 0 || jobs > 64 || idle < 1 || passes < 1 ||
	    restarts < 1)
		usage();
	snprintf(src_root, sizeof(src_root), "%s", sources);
	mkdir_or_die(src_root);
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(argv[1], "converge"))
		return cmd_converge(ns ? ns : "100,1000,5000", reps ? reps : "5,3,1", jobs);
	if (!strcmp(argv[1], "steady")) {
		if (ns)
			n = atoi(ns);
		if (n < 1 || n > MAX_N)
			usage();
		if (resync_interval_s &&
		    (2 * resync_interval_s <= idle + 2 || resync_interval_s > idle + 2))
			die("--resync-interval must be over (--idle + 2) / 2 and at most --idle + 2 "
			    "seconds, so that the idle window holds exactly one resync");
		return cmd_steady(n, idle, passes, restarts, events);
	}
	usage();
	return 2;
}
