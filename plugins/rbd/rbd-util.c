/* rbd-util.c - see rbd-util.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "file-util.h"
#include "macro.h"
#include "process.h"
#include "rbd-util.h"
#include "time-util.h"

int rbd_exec(const char *const argv[], uint64_t timeout_ms, char *out, size_t outlen)
{
	/* Its own process group: a timeout stops whatever it started too; a daemon it leaves
	 * behind (rbd-nbd) keeps the pipe, and the run ends when the helper itself exits. */
	return process_run(argv,
			   &(struct process_options){ .timeout_ms = timeout_ms,
						      .output_max = outlen ? outlen - 1 : 0 },
			   out, outlen);
}

int rbd_spawn_daemon(const char *const argv[], const char *log_path, pid_t *ret_pid)
{
	char *const *env = process_helper_env; /* nothing of ours: no CEPH_ARGS, CEPH_CONF */
	char prog[PATH_MAX];
	int p[2], status, r, child_err = 0;
	pid_t mid, daemon_pid = -1;
	ssize_t n;

	r = process_find_helper(argv[0], prog);
	if (r < 0)
		return r;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	mid = fork();
	if (mid < 0) {
		r = -errno;
		close(p[0]);
		close(p[1]);
		return r;
	}
	if (mid == 0) {
		/* Only async-signal-safe calls from here on: we may have forked a threaded agent.
		 */
		pid_t d;

		setsid();
		d = fork();
		if (d == 0) {
			int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
			int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
			int e;

			if (fd < 0 || nul < 0 || dup2(nul, 0) < 0 || dup2(fd, 1) < 0 ||
			    dup2(fd, 2) < 0)
				goto fail;
			sigset_t all;
			(void)close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
			sigemptyset(&all);
			sigprocmask(SIG_SETMASK, &all, NULL);
			execve(prog, (char *const *)argv, env);
fail:
			e = -errno;
			(void)!write(p[1], &e, sizeof(e));
			_exit(127);
		}
		(void)!write(p[1], &d, sizeof(d));
		_exit(d < 0 ? 1 : 0);
	}
	close(p[1]);
	while (waitpid(mid, &status, 0) < 0 && errno == EINTR)
		;
	n = read(p[0], &daemon_pid, sizeof(daemon_pid));
	if (n != sizeof(daemon_pid) || daemon_pid <= 0) {
		close(p[0]);
		return -ECHILD;
	}
	/* EOF when the exec succeeded (the pipe is close-on-exec); an errno when it failed. */
	n = read(p[0], &child_err, sizeof(child_err));
	close(p[0]);
	if (n == sizeof(child_err) && child_err < 0)
		return child_err;
	*ret_pid = daemon_pid;
	return 0;
}

bool rbd_pid_is(pid_t pid, const char *exe, const char *arg)
{
	char path[64], buf[PATH_MAX], state = 0;
	_cleanup_free_ char *cmdline = NULL;
	FILE *f;
	ssize_t n;
	size_t len = 0;

	if (pid <= 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (fscanf(f, "%*d (%*[^)]) %c", &state) != 1)
		state = 0;
	fclose(f);
	if (!state || state == 'Z' || state == 'X')
		return false;
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, buf, sizeof(buf) - 1);
	if (n < 0)
		return false;
	buf[n] = '\0';
	if (endswith(buf, " (deleted)"))
		buf[n - strlen(" (deleted)")] = '\0';
	if (!streq(strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf, exe))
		return false;
	if (!arg)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	cmdline = calloc(1, 65536);
	if (cmdline)
		len = fread(cmdline, 1, 65535, f);
	fclose(f);
	for (size_t i = 0; i < len; i += strlen(cmdline + i) + 1)
		if (streq(cmdline + i, arg))
			return true;
	return false;
}

int rbd_pid_stop(pid_t pid, const char *exe, const char *arg, uint64_t grace_ms)
{
	uint64_t deadline;

	if (!rbd_pid_is(pid, exe, arg))
		return 0;
	kill(pid, SIGTERM);
	deadline = now_ms() + grace_ms;
	while (now_ms() < deadline) {
		if (!rbd_pid_is(pid, exe, arg))
			return 0;
		usleep(20 * 1000);
	}
	kill(pid, SIGKILL);
	deadline = now_ms() + 2000;
	while (now_ms() < deadline) {
		if (!rbd_pid_is(pid, exe, arg))
			return 0;
		usleep(20 * 1000);
	}
	return -ETIMEDOUT;
}

static int probe_now(enum rbd_probe what, const char *path)
{
	struct stat st;
	struct statfs sfs;
	void *buf;
	int fd;

	switch (what) {
	case RBD_PROBE_STAT:
		return stat(path, &st) < 0 ? -errno : 0;
	case RBD_PROBE_STATFS:
		return statfs(path, &sfs) < 0 ? -errno : 0;
	case RBD_PROBE_READ:
		fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		if (posix_memalign(&buf, 4096, 4096) != 0)
			return -ENOMEM;
		if (pread(fd, buf, 4096, 0) < 0)
			return -errno;
		return 0;
	}
	return -EINVAL;
}

struct probe_job {
	enum rbd_probe what;
	const char *path;
};

static int probe_job_run(void *arg, void *result, struct error_info *err)
{
	const struct probe_job *job = arg;

	return probe_now(job->what, job->path);
}

int rbd_probe_path(enum rbd_probe what, const char *path, uint64_t timeout_ms)
{
	/* A killed FUSE wait ends at once: SIGKILL without a SIGTERM first. */
	return process_run_fn(probe_job_run, &(struct probe_job){ what, path }, NULL, 0,
			      &(struct process_options){ .timeout_ms = timeout_ms,
							 .kill_at_once = true },
			      NULL, NULL, 0);
}

int rbd_key_file_write(const char *dir, const char *value, char **ret_path)
{
	_cleanup_free_ char *path = strdup_printf("%s/key.XXXXXX", dir);
	size_t len = strlen(value);
	int fd, r = 0;

	if (!path)
		return -ENOMEM;
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, 0600) < 0 || write(fd, value, len) != (ssize_t)len ||
	    write(fd, "\n", 1) != 1)
		r = errno ? -errno : -EIO;
	close(fd);
	if (r < 0) {
		unlink(path);
		return r;
	}
	*ret_path = TAKE_PTR(path);
	return 0;
}

void rbd_key_file_remove(const char *path)
{
	struct stat st;
	int fd;

	if (!path)
		return;
	fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
			char zeros[256] = { 0 };
			for (off_t left = st.st_size; left > 0; left -= (off_t)sizeof(zeros))
				if (write(fd, zeros,
					  left < (off_t)sizeof(zeros) ? (size_t)left
								      : sizeof(zeros)) < 0)
					break;
			(void)fsync(fd);
		}
		close(fd);
	}
	unlink(path);
}

/* Opens "<path>.tmp" to write path's new content in; tmp_commit() puts it in place. */
static int tmp_open(const char *path, char **ret_tmp, FILE **ret_f)
{
	_cleanup_free_ char *tmp = strdup_printf("%s.tmp", path);
	FILE *f;

	if (!tmp)
		return -ENOMEM;
	f = fopen(tmp, "we");
	if (!f)
		return -errno;
	*ret_tmp = TAKE_PTR(tmp);
	*ret_f = f;
	return 0;
}

/* Closes f and, when r is 0 and closing worked, renames tmp over path; removes tmp otherwise.
 * Returns r, or the first error. */
static int tmp_commit(FILE *f, const char *tmp, const char *path, int r)
{
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	/* The rename itself made durable: a power cut must not bring back the record it
	 * replaced (one without the device, say). */
	if (r == 0)
		r = file_fsync_parent(path);
	if (r < 0)
		unlink(tmp);
	return r;
}

int rbd_record_write(const char *path, const struct device_attachment *att)
{
	_cleanup_free_ char *tmp = NULL;
	FILE *f = NULL;
	int r = tmp_open(path, &tmp, &f);

	if (r < 0)
		return r;
	fchmod(fileno(f), 0600);
	if (att->device_path)
		fprintf(f, "device=%s\n", att->device_path);
	for (size_t i = 0; i < att->n_meta; i++)
		fprintf(f, "%s=%s\n", att->meta[i].key, att->meta[i].value);
	if (fflush(f) != 0 || fsync(fileno(f)) < 0)
		r = -errno;
	return tmp_commit(f, tmp, path, r);
}

int rbd_record_read(const char *path, struct device_attachment *ret)
{
	char line[1024];
	FILE *f = fopen(path, "re");
	int r = 0;

	if (!f)
		return -errno;
	memset(ret, 0, sizeof(*ret));
	while (r == 0 && fgets(line, sizeof(line), f)) {
		char *eq = strchr(line, '=');
		line[strcspn(line, "\n")] = '\0';
		if (!eq)
			continue;
		*eq = '\0';
		if (streq(line, "device")) {
			free(ret->device_path);
			ret->device_path = strdup(eq + 1);
			if (!ret->device_path)
				r = -ENOMEM;
		} else {
			r = device_attachment_set_meta(ret, line, eq + 1);
		}
	}
	fclose(f);
	if (r < 0)
		device_attachment_clear(ret);
	return r;
}

/* Rewrites path keeping the lines younger than max_age_s, plus extra (may be NULL). */
static int released_rewrite(const char *path, const char *extra, unsigned max_age_s)
{
	_cleanup_free_ char *tmp = NULL;
	long now = (long)time(NULL);
	char line[256];
	FILE *in, *out = NULL;
	int r = tmp_open(path, &tmp, &out);

	if (r < 0)
		return r;
	in = fopen(path, "re");
	while (in && fgets(line, sizeof(line), in)) {
		char addr[200];
		long t;
		if (sscanf(line, "%199s %ld", addr, &t) == 2 && now - t <= (long)max_age_s &&
		    !streq_ptr(addr, extra))
			fprintf(out, "%s %ld\n", addr, t);
	}
	if (in)
		fclose(in);
	if (extra)
		fprintf(out, "%s %ld\n", extra, now);
	return tmp_commit(out, tmp, path, 0);
}

int rbd_released_add(const char *path, const char *addr, unsigned max_age_s)
{
	return released_rewrite(path, addr, max_age_s);
}

bool rbd_released_has(const char *path, const char *addr, unsigned max_age_s)
{
	long now = (long)time(NULL);
	char line[256];
	bool found = false;
	FILE *f = fopen(path, "re");

	while (f && !found && fgets(line, sizeof(line), f)) {
		char a[200];
		long t;
		found = sscanf(line, "%199s %ld", a, &t) == 2 && now - t <= (long)max_age_s &&
			streq(a, addr);
	}
	if (f)
		fclose(f);
	return found;
}
