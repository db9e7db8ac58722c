/* nfs-child.c - see nfs-child.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "nfs-child.h"

/* How long a killed child may take to die before a reaper thread takes it over. */
#define KILL_GRACE_MS 200

static atomic_uint stuck;

unsigned nfs_child_stuck_count(void)
{
	return atomic_load(&stuck);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		p += n;
		len -= (size_t)n;
	}
}

static _Noreturn void child_main(nfs_child_fn fn, void *arg, pid_t parent, int result_fd,
				 int output_fd)
{
	struct error_info e = { 0 };
	sigset_t none;
	int null_fd, r;

	(void)setpgid(0, 0);
	/* Die with the agent rather than outlive it holding a mount in flight. */
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null_fd >= 0)
		(void)dup2(null_fd, 0);
	(void)dup2(output_fd, 1);
	(void)dup2(output_fd, 2);
	r = fn(arg, &e);
	if (r < 0 && !e.code)
		e.code = r;
	if (r == 0)
		e.code = 0;
	write_all(result_fd, &e, sizeof(e));
	_exit(0);
}

int nfs_child_start(struct nfs_child *c, nfs_child_fn fn, void *arg, struct error_info *err)
{
	int rp[2], op[2];
	pid_t parent = getpid();

	memset(c, 0, sizeof(*c));
	c->pid = -1;
	c->result_fd = c->output_fd = -1;
	if (atomic_load(&stuck) >= NFS_CHILD_MAX_STUCK)
		return err_set(err, -EAGAIN,
			       "%u NFS operations are stuck in the kernel (the limit is %d); "
			       "refusing more until some finish",
			       atomic_load(&stuck), NFS_CHILD_MAX_STUCK);
	if (pipe2(rp, O_CLOEXEC) < 0)
		return err_set(err, -errno, "pipe: %s", strerror(errno));
	if (pipe2(op, O_CLOEXEC) < 0) {
		int e = errno;
		close(rp[0]);
		close(rp[1]);
		return err_set(err, -e, "pipe: %s", strerror(e));
	}
	c->pid = fork();
	if (c->pid < 0) {
		int e = errno;
		close(rp[0]);
		close(rp[1]);
		close(op[0]);
		close(op[1]);
		return err_set(err, -e, "fork: %s", strerror(e));
	}
	if (c->pid == 0) {
		close(rp[0]);
		close(op[0]);
		child_main(fn, arg, parent, rp[1], op[1]);
	}
	(void)setpgid(c->pid, c->pid); /* also done by the child: whichever runs first */
	close(rp[1]);
	close(op[1]);
	c->result_fd = rp[0];
	c->output_fd = op[0];
	(void)fcntl(c->output_fd, F_SETFL, O_NONBLOCK);
	return 0;
}

static void read_output(struct nfs_child *c)
{
	for (;;) {
		char buf[512];
		ssize_t n = read(c->output_fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			close_fd(&c->output_fd);
			return;
		}
		if (n < 0)
			return; /* EAGAIN: nothing more now */
		if (c->output_len + 1 < sizeof(c->output)) {
			size_t room = sizeof(c->output) - 1 - c->output_len;
			size_t take = (size_t)n < room ? (size_t)n : room;
			memcpy(c->output + c->output_len, buf, take);
			c->output_len += take;
			c->output[c->output_len] = '\0';
		}
	}
}

static void *reaper_main(void *arg)
{
	pid_t pid = (pid_t)(intptr_t)arg;

	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	atomic_fetch_sub(&stuck, 1);
	return NULL;
}

/* Reaps pid, waiting at most KILL_GRACE_MS; then a detached thread waits for it. */
static void reap(pid_t pid)
{
	uint64_t deadline = mono_ms() + KILL_GRACE_MS;
	pthread_attr_t attr;
	pthread_t t;

	for (;;) {
		pid_t r = waitpid(pid, NULL, WNOHANG);
		if (r == pid || (r < 0 && errno != EINTR))
			return;
		if (mono_ms() >= deadline)
			break;
		usleep(5000);
	}
	atomic_fetch_add(&stuck, 1);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	if (pthread_create(&t, &attr, reaper_main, (void *)(intptr_t)pid) != 0) {
		/* Left as a zombie, still counted: the limit keeps holding. */
	}
	pthread_attr_destroy(&attr);
}

int nfs_child_wait(struct nfs_child *c, uint64_t timeout_ms)
{
	uint64_t deadline = mono_ms() + timeout_ms;
	size_t got = 0;
	char *res = (char *)&c->result;

	if (c->done)
		return 1;
	while (c->result_fd >= 0) {
		struct pollfd p[2] = {
			{ .fd = c->result_fd, .events = POLLIN },
			{ .fd = c->output_fd, .events = POLLIN },
		};
		uint64_t now = mono_ms();
		int n;

		if (now >= deadline)
			return 0;
		n = poll(p, 2, (int)(deadline - now));
		if (n < 0 && errno != EINTR)
			return 0;
		if (n <= 0)
			continue;
		if (p[1].revents)
			read_output(c);
		if (p[0].revents) {
			ssize_t r = read(c->result_fd, res + got, sizeof(c->result) - got);
			if (r < 0 && errno == EINTR)
				continue;
			if (r > 0) {
				got += (size_t)r;
				continue;
			}
			close_fd(&c->result_fd); /* EOF: the child has exited (or is exiting) */
		}
	}
	if (c->output_fd >= 0)
		read_output(c);
	close_fd(&c->output_fd);
	if (got != sizeof(c->result)) {
		int status = 0;
		/* No result: the child died (killed, or fn crashed). */
		memset(&c->result, 0, sizeof(c->result));
		if (waitpid(c->pid, &status, WNOHANG) == c->pid && WIFSIGNALED(status))
			err_set(&c->result, -EIO, "the helper process was killed by signal %d",
				WTERMSIG(status));
		else
			err_set(&c->result, -EIO, "the helper process exited without a result");
	}
	c->result.msg[sizeof(c->result.msg) - 1] = '\0';
	reap(c->pid);
	c->done = true;
	return 1;
}

void nfs_child_abandon(struct nfs_child *c)
{
	if (c->pid <= 0 || c->done)
		return;
	(void)kill(-c->pid, SIGKILL);
	(void)kill(c->pid, SIGKILL);
	close_fd(&c->result_fd);
	close_fd(&c->output_fd);
	reap(c->pid);
	c->done = true;
	err_set(&c->result, -ETIMEDOUT, "abandoned");
}

int nfs_child_run(struct nfs_child *c, nfs_child_fn fn, void *arg, uint64_t timeout_ms,
		  struct error_info *err)
{
	int r = nfs_child_start(c, fn, arg, err);

	if (r < 0)
		return r;
	if (nfs_child_wait(c, timeout_ms) == 0) {
		nfs_child_abandon(c);
		return -ETIMEDOUT;
	}
	if (c->result.code < 0 && err)
		*err = c->result;
	return c->result.code;
}
