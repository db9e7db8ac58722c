/* testlib.c - see testlib.h. */
#include <blkid.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libmount.h>
#include <limits.h>
#include <linux/loop.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mount-notify.h"
#include "testlib.h"

#define MAX_LOOPS 64
#define ARRAY_LEN_GUARD 62

static struct {
	char dev[32];
	int fd;
} loops[MAX_LOOPS];
static bool atexit_done;

bool test_mount_events_on = true, test_mount_events_off = false;

bool test_no_mount_events(void)
{
	char reason[256];

	if (mount_notify_probe(reason, sizeof(reason)))
		return false;
	fprintf(stderr, "no mount events here (%s): the case is skipped\n", reason);
	return true;
}

bool test_have_root(void)
{
	return geteuid() == 0;
}

void test_enter_private_mountns(void)
{
	if (!test_have_root()) {
		fprintf(stderr, "skipped: needs root with CAP_SYS_ADMIN\n");
		exit(77);
	}
	if (unshare(CLONE_NEWNS) < 0) {
		perror("unshare(CLONE_NEWNS)");
		exit(77);
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		perror("make / private");
		exit(1);
	}
	/* libmount's utab (userspace options such as _netdev) of this namespace only: the
	 * test's mounts are not the host's. */
	if (mkdir("/run/mount", 0755) < 0 && errno != EEXIST) {
		perror("mkdir /run/mount");
		exit(1);
	}
	if (mount("tmpfs", "/run/mount", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0) {
		perror("tmpfs on /run/mount");
		exit(1);
	}
}

char *test_mkdtemp(const char *tag)
{
	const char *base = getenv("TMPDIR");
	char *path;

	if (!base || !*base)
		base = "/tmp";
	if (asprintf(&path, "%s/volagent-%s-XXXXXX", base, tag) < 0)
		abort();
	if (!mkdtemp(path)) {
		perror("mkdtemp");
		abort();
	}
	return path;
}

static int rm_rf_at(int parent_fd, const char *name, dev_t top_dev)
{
	struct stat st;
	int r = 0;

	if (fstatat(parent_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISDIR(st.st_mode)) {
		int fd;
		DIR *d;
		struct dirent *de;

		if (st.st_dev != top_dev)
			return -EBUSY; /* a mount point: never delete through it */
		fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		d = fdopendir(fd);
		if (!d) {
			close(fd);
			return -errno;
		}
		while ((de = readdir(d))) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			int k = rm_rf_at(dirfd(d), de->d_name, top_dev);
			if (k < 0 && r == 0)
				r = k;
		}
		closedir(d);
		if (r == 0 && unlinkat(parent_fd, name, AT_REMOVEDIR) < 0)
			r = -errno;
		return r;
	}
	return unlinkat(parent_fd, name, 0) < 0 ? -errno : 0;
}

int test_rm_rf(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	return rm_rf_at(AT_FDCWD, path, st.st_dev);
}

int test_make_sparse(const char *path, long long size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int r = 0;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, size) < 0)
		r = -errno;
	close(fd);
	return r;
}

int test_loop_attach(const char *file, char *ret_dev)
{
	int ctl, n, lfd = -1, ffd, slot = -1;
	struct loop_config cfg = { 0 };
	char dev[32];

	for (int i = 0; i < MAX_LOOPS; i++)
		if (!loops[i].dev[0]) {
			slot = i;
			break;
		}
	if (slot < 0)
		return -ENOSPC;
	if (!atexit_done) {
		atexit(test_loop_detach_all);
		atexit_done = true;
	}
	ffd = open(file, O_RDWR | O_CLOEXEC);
	if (ffd < 0)
		return -errno;
	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0) {
		close(ffd);
		return -errno;
	}
	for (int attempt = 0; attempt < 20; attempt++) {
		n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0)
			break;
		snprintf(dev, sizeof(dev), "/dev/loop%d", n);
		lfd = open(dev, O_RDWR | O_CLOEXEC);
		if (lfd < 0)
			continue;
		cfg.fd = (unsigned)ffd;
		cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
		snprintf((char *)cfg.info.lo_file_name, LO_NAME_SIZE, "%s", file);
		if (ioctl(lfd, LOOP_CONFIGURE, &cfg) == 0)
			break;
		close(lfd);
		lfd = -1;
		if (errno != EBUSY)
			break;
	}
	close(ctl);
	close(ffd);
	if (lfd < 0)
		return -EBUSY;
	snprintf(loops[slot].dev, sizeof(loops[slot].dev), "%s", dev);
	loops[slot].fd = lfd;
	snprintf(ret_dev, 32, "%s", dev);
	return 0;
}

int test_loop_detach(const char *dev)
{
	for (int i = 0; i < MAX_LOOPS; i++) {
		if (!loops[i].dev[0] || strcmp(loops[i].dev, dev))
			continue;
		/* Clears now, or (if still mounted) as soon as the last user lets go. */
		(void)ioctl(loops[i].fd, LOOP_CLR_FD, 0);
		close(loops[i].fd);
		loops[i].dev[0] = '\0';
		return 0;
	}
	return -ENOENT;
}

bool test_loop_unbound(void *dev)
{
	const char *name = strrchr(dev, '/');
	char path[128];

	snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file",
		 name ? name + 1 : (char *)dev);
	return access(path, F_OK) < 0 && errno == ENOENT;
}

void test_loop_detach_all(void)
{
	for (int i = 0; i < MAX_LOOPS; i++)
		if (loops[i].dev[0])
			test_loop_detach(loops[i].dev);
}

int test_cleanup_loops_and_dir(char *dir)
{
	test_loop_detach_all();
	if (dir)
		test_rm_rf(dir);
	free(dir);
	return 0;
}

static int run_child(const char *const argv[], int out_fd, int err_fd)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		bool verbose = getenv("VERBOSE") != NULL;

		dup2(null, 0);
		dup2(out_fd >= 0 ? out_fd : (verbose ? 2 : null), 1);
		if (err_fd >= 0)
			dup2(err_fd, 2);
		else if (!verbose)
			dup2(null, 2);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int test_run(const char *const argv[])
{
	return run_child(argv, -1, -1);
}

static int capture_fd(void)
{
	char path[] = "/tmp/volagent-capture-XXXXXX";
	int fd = mkstemp(path);

	if (fd >= 0)
		unlink(path);
	return fd;
}

static char *slurp_fd(int fd)
{
	off_t size = lseek(fd, 0, SEEK_END);
	char *buf = malloc((size_t)(size > 0 ? size : 0) + 1);

	if (buf) {
		ssize_t n = size > 0 ? pread(fd, buf, (size_t)size, 0) : 0;
		buf[n > 0 ? n : 0] = '\0';
	}
	close(fd);
	return buf;
}

char *test_csi_client(const char *sock, const char *stubs_dir, const char *dir, const char *calls)
{
	char input[700], *out = NULL, *err = NULL;
	int r;
	const char *argv[] = { "/usr/bin/python3",
			       "tests/csi/csi_client.py",
			       "--socket",
			       sock,
			       "--stub-dir",
			       stubs_dir,
			       "--timeout",
			       "30",
			       "--input",
			       input,
			       NULL };

	/* One input file per thread: tests run calls from several threads at once. */
	snprintf(input, sizeof(input), "%s/calls-%d.txt", dir, (int)gettid());
	if (test_write_file(input, calls) < 0)
		return NULL;
	r = test_run_capture2(argv, &out, &err);
	/* The client's own failure (not a call's: those are answer lines) says why on stderr. */
	if (r != 0)
		fprintf(stderr, "csi_client.py exited %d: %s\n", r, err ? err : "");
	free(err);
	if (r != 0) {
		free(out);
		return NULL;
	}
	return out;
}

int test_run_capture2(const char *const argv[], char **ret_out, char **ret_err)
{
	int out = capture_fd(), err = ret_err ? capture_fd() : -1, r;

	if (out < 0)
		return -1;
	r = run_child(argv, out, err);
	if (ret_out)
		*ret_out = slurp_fd(out);
	else
		close(out);
	if (ret_err)
		*ret_err = err >= 0 ? slurp_fd(err) : NULL;
	return r;
}

int test_run_capture(const char *const argv[], char **ret_out)
{
	return test_run_capture2(argv, ret_out, NULL);
}

int test_mkfs(const char *fstype, const char *dev)
{
	if (!strcmp(fstype, "xfs"))
		return test_run((const char *const[]){ "mkfs.xfs", "-q", "-f", dev, NULL });
	return test_run((const char *const[]){ "mkfs.ext4", "-q", "-F", dev, NULL });
}

void test_blkid_value(const char *dev, const char *name, char *ret, size_t size)
{
	blkid_probe pr = blkid_new_probe_from_filename(dev);
	const char *v = NULL;

	ret[0] = '\0';
	if (!pr)
		return;
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_UUID | BLKID_SUBLKS_TYPE);
	if (blkid_do_safeprobe(pr) == 0 && blkid_probe_lookup_value(pr, name, &v, NULL) == 0)
		snprintf(ret, size, "%s", v);
	blkid_free_probe(pr);
}

int test_fill_fs(const char *path)
{
	static const char block[4096];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600), e;
	ssize_t n;

	if (fd < 0)
		return -errno;
	while ((n = write(fd, block, sizeof(block))) > 0)
		;
	e = n < 0 ? errno : EIO;
	close(fd);
	return e == ENOSPC ? 0 : -e;
}

int test_write_file(const char *path, const char *content)
{
	FILE *f = fopen(path, "we");
	int r = 0;

	if (!f)
		return -errno;
	if (fputs(content, f) < 0)
		r = -EIO;
	if (fflush(f) != 0 || fsync(fileno(f)) != 0)
		r = -errno;
	fclose(f);
	return r;
}

char *test_read_file(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t len = 0;

	if (!f)
		return NULL;
	if (getdelim(&buf, &len, '\0', f) < 0) {
		free(buf);
		buf = strdup("");
	}
	fclose(f);
	return buf;
}

bool test_golden_matches(const char *expected_path, const char *actual)
{
	char *expected;
	bool same;

	if (getenv("VOLAGENT_UPDATE_GOLDEN"))
		return test_write_file(expected_path, actual) == 0;
	expected = test_read_file(expected_path);
	if (!expected) {
		fprintf(stderr, "missing golden file %s (actual:\n%s)\n", expected_path, actual);
		return false;
	}
	same = strcmp(expected, actual) == 0;
	if (!same)
		fprintf(stderr, "%s differs.\nexpected:\n%s\nactual:\n%s\n", expected_path,
			expected, actual);
	free(expected);
	return same;
}

bool test_wait_until(bool (*pred)(void *arg), void *arg, int timeout_ms)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 }, now;
	const char *scale = getenv("TEST_TIME_SCALE");
	int64_t deadline_ms;

	/* A slow run (the agent under valgrind) stretches every wait, not the checks. */
	if (scale && atoi(scale) > 1)
		timeout_ms *= atoi(scale);
	/* The deadline is on the clock: a slow check (a `volagent status` under ASan) counts. */
	clock_gettime(CLOCK_MONOTONIC, &now);
	deadline_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 + timeout_ms;
	for (;;) {
		if (pred(arg))
			return true;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 >= deadline_ms)
			return false;
		nanosleep(&ts, NULL);
	}
}

struct file_text {
	const char *path;
	const char *text;
	bool present;
};

static bool file_text_is(void *arg)
{
	struct file_text *ft = arg;
	char *s = test_read_file(ft->path);
	bool has = s && strstr(s, ft->text);

	free(s);
	return has == ft->present;
}

bool test_wait_file_text(const char *path, const char *text, bool present, int timeout_ms)
{
	struct file_text ft = { path, text, present };

	return test_wait_until(file_text_is, &ft, timeout_ms);
}

static struct libmnt_table *read_table(void)
{
	struct libmnt_table *tb = mnt_new_table();

	if (tb && mnt_table_parse_file(tb, "/proc/self/mountinfo") != 0) {
		mnt_unref_table(tb);
		return NULL;
	}
	return tb;
}

static struct libmnt_fs *find_last_target(struct libmnt_table *tb, const char *path)
{
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_BACKWARD);
	struct libmnt_fs *fs, *found = NULL;

	while (it && mnt_table_next_fs(tb, it, &fs) == 0)
		if (!strcmp(mnt_fs_get_target(fs), path)) {
			found = fs;
			break;
		}
	mnt_free_iter(it);
	return found;
}

int test_mount_id(const char *path)
{
	struct libmnt_table *tb = read_table();
	struct libmnt_fs *fs;
	int id = -1;

	if (!tb)
		return -1;
	fs = find_last_target(tb, path);
	if (fs)
		id = mnt_fs_get_id(fs);
	mnt_unref_table(tb);
	return id;
}

bool test_is_mountpoint(const char *path)
{
	return test_mount_id(path) >= 0;
}

bool test_mount_is_ro(const char *path)
{
	struct statvfs sv;

	return statvfs(path, &sv) == 0 && (sv.f_flag & ST_RDONLY);
}

int test_count_mounts_under(const char *prefix)
{
	struct libmnt_table *tb = read_table();
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct libmnt_fs *fs;
	size_t len = strlen(prefix);
	int n = 0;

	while (tb && it && mnt_table_next_fs(tb, it, &fs) == 0) {
		const char *t = mnt_fs_get_target(fs);
		if (!strncmp(t, prefix, len) && (t[len] == '/' || t[len] == '\0'))
			n++;
	}
	mnt_free_iter(it);
	mnt_unref_table(tb);
	return n;
}

const char *test_volagent_bin(void)
{
	const char *b = getenv("VOLAGENT_BIN");

	return b && *b ? b : "build/volagent";
}

const char *test_volagent_test_bin(void)
{
	static char path[4096];
	const char *b = getenv("VOLAGENT_TEST_BIN");

	if (b && *b)
		return b;
	snprintf(path, sizeof(path), "%s-test", test_volagent_bin());
	return path;
}

int test_agent_start(struct test_agent *agent, const char *const args[])
{
	const char *argv[64];
	size_t n = 0;
	int logfd;
	pid_t pid;

	if (!agent->log_path[0]) {
		char *dir = test_mkdtemp("agentlog");
		snprintf(agent->log_path, sizeof(agent->log_path), "%s/agent.log", dir);
		free(dir);
	}
	argv[n++] = test_volagent_bin();
	argv[n++] = "run";
	for (size_t i = 0; args[i] && n < ARRAY_LEN_GUARD; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	logfd = open(agent->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (logfd < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(logfd);
		return -errno;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		dup2(null, 0);
		dup2(logfd, 1);
		dup2(logfd, 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(logfd);
	agent->pid = pid;
	return 0;
}

int test_agent_stop(struct test_agent *agent, int sig)
{
	int status;

	if (agent->pid <= 0)
		return -1;
	kill(agent->pid, sig);
	while (waitpid(agent->pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	agent->pid = 0;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

bool test_agent_log_contains(const struct test_agent *agent, const char *text)
{
	char *log = test_read_file(agent->log_path);
	bool found = log && strstr(log, text);

	free(log);
	return found;
}

int test_volagent2(const char *const args[], char **ret_out, char **ret_err)
{
	const char *argv[64];
	size_t n = 0;

	argv[n++] = test_volagent_bin();
	for (size_t i = 0; args[i] && n < ARRAY_LEN_GUARD; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	return test_run_capture2(argv, ret_out, ret_err);
}

int test_volagent(const char *const args[], char **ret_out)
{
	return test_volagent2(args, ret_out, NULL);
}

char *test_utab_options(const char *target)
{
	const char *path = getenv("LIBMOUNT_UTAB") ? getenv("LIBMOUNT_UTAB") : "/run/mount/utab";
	char *text = access(path, F_OK) == 0 ? test_read_file(path) : strdup("");
	char *line, *save = NULL, *opts = NULL;
	char want[PATH_MAX + 16];

	if (!text)
		return NULL;
	snprintf(want, sizeof(want), " TARGET=%s ", target);
	for (line = strtok_r(text, "\n", &save); line && !opts;
	     line = strtok_r(NULL, "\n", &save)) {
		const char *o = strstr(line, " OPTS=");

		if (strstr(line, want))
			opts = o ? strndup(o + 6, strcspn(o + 6, " ")) : strdup("");
	}
	free(text);
	return opts;
}
