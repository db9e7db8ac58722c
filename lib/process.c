/* process.c - see process.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "file-util.h"
#include "process.h"
#include "time-util.h"

extern char **environ;

/* How long a SIGKILLed child may take to die before a reaper thread takes it over. */
#define STUCK_AFTER_MS 200

static atomic_uint stuck;

unsigned process_stuck_count(void)
{
	return atomic_load(&stuck);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* The full path of name, searched in PATH when it has no '/'.  -ENOENT when not found. */
static int find_program(const char *name, char *ret)
{
	const char *path = getenv("PATH");
	int last = -ENOENT;

	if (strchr(name, '/')) {
		if (access(name, X_OK) < 0)
			return -errno;
		snprintf(ret, PATH_MAX, "%s", name);
		return 0;
	}
	if (!path)
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	for (const char *s = path; *s;) {
		size_t len = strcspn(s, ":");
		struct stat st;

		if (len > 0 && len + strlen(name) + 2 <= PATH_MAX) {
			snprintf(ret, PATH_MAX, "%.*s/%s", (int)len, s, name);
			if (stat(ret, &st) == 0 && S_ISREG(st.st_mode)) {
				if (access(ret, X_OK) == 0)
					return 0;
				last = -EACCES;
			}
		}
		s += len;
		if (*s == ':')
			s++;
	}
	return last;
}

static void init(struct process *p, const struct process_options *opts)
{
	memset(p, 0, sizeof(*p));
	p->pid = -1;
	p->pidfd = p->output_fd = p->status_fd = p->stdin_fd = -1;
	if (opts)
		p->opts = *opts;
	if (!p->opts.kill_grace_ms)
		p->opts.kill_grace_ms = PROCESS_KILL_GRACE_MS;
	if (!p->opts.output_max)
		p->opts.output_max = PROCESS_OUTPUT_MAX;
}

/* Pipes for the child: 0 output, 1 status, 2 stdin (when there is stdin data). */
struct child_pipes {
	int out[2], status[2], in[2];
};

static void pipes_close(struct child_pipes *cp)
{
	for (int i = 0; i < 2; i++) {
		close_fd(&cp->out[i]);
		close_fd(&cp->status[i]);
		close_fd(&cp->in[i]);
	}
}

static int pipes_open(struct child_pipes *cp, bool want_stdin, struct error_info *err)
{
	cp->out[0] = cp->out[1] = cp->status[0] = cp->status[1] = cp->in[0] = cp->in[1] = -1;
	if (pipe2(cp->out, O_CLOEXEC) < 0 || pipe2(cp->status, O_CLOEXEC) < 0 ||
	    (want_stdin && pipe2(cp->in, O_CLOEXEC) < 0)) {
		int e = errno;
		pipes_close(cp);
		return err_set(err, -e, "pipe: %s", strerror(e));
	}
	return 0;
}

/* In the child, before exec or fn: only async-signal-safe calls (the agent is threaded). */
static void child_setup(const struct child_pipes *cp)
{
	sigset_t none;
	int fd;

	(void)setpgid(0, 0);
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	if (cp->in[0] >= 0) {
		(void)dup2(cp->in[0], 0);
	} else {
		fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			(void)dup2(fd, 0);
	}
	(void)dup2(cp->out[1], 1);
	(void)dup2(cp->out[1], 2);
}

/* The parent's half, after a successful fork. */
static int parent_setup(struct process *p, struct child_pipes *cp)
{
	(void)setpgid(p->pid, p->pid); /* also done by the child: whichever runs first */
	close_fd(&cp->out[1]);
	close_fd(&cp->status[1]);
	close_fd(&cp->in[0]);
	p->output_fd = TAKE_FD(cp->out[0]);
	p->status_fd = TAKE_FD(cp->status[0]);
	p->stdin_fd = TAKE_FD(cp->in[1]);
	(void)fcntl(p->output_fd, F_SETFL, O_NONBLOCK);
	(void)fcntl(p->status_fd, F_SETFL, O_NONBLOCK);
	if (p->stdin_fd >= 0)
		(void)fcntl(p->stdin_fd, F_SETFL, O_NONBLOCK);
	p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
	return 0;
}

static int prepare(struct process *p, struct child_pipes *cp, struct error_info *err)
{
	if (atomic_load(&stuck) >= PROCESS_MAX_STUCK)
		return err_set(err, -EAGAIN,
			       "%u helper processes are stuck in the kernel (the limit is %d); "
			       "refusing more until some finish",
			       atomic_load(&stuck), PROCESS_MAX_STUCK);
	p->output = malloc(p->opts.output_max + 1);
	p->status_buf = malloc(sizeof(p->result) + p->result_size);
	if (!p->output || !p->status_buf)
		return -ENOMEM;
	p->output[0] = '\0';
	return pipes_open(cp, p->opts.stdin_data != NULL, err);
}

/* prepare(), then fork: returns 0 in the child (p->pid == 0) and in the parent, or a negative
 * errno in the parent with err set and nothing left open. */
static int prepare_fork(struct process *p, struct child_pipes *cp, struct error_info *err)
{
	int r = prepare(p, cp, err);

	if (r < 0)
		return r;
	p->pid = fork();
	if (p->pid < 0) {
		int e = errno;
		pipes_close(cp);
		return err_set(err, -e, "fork: %s", strerror(e));
	}
	return 0;
}

int process_start(struct process *p, const char *const argv[], const struct process_options *opts,
		  struct error_info *err)
{
	char prog[PATH_MAX];
	struct child_pipes cp;
	char *const *envp;
	int r;

	init(p, opts);
	envp = p->opts.envp ? p->opts.envp : environ;
	r = find_program(argv[0], prog);
	if (r < 0)
		return err_set(err, r, "%s: %s", argv[0],
			       r == -ENOENT ? "not found in PATH" : strerror(-r));
	r = prepare_fork(p, &cp, err);
	if (r < 0)
		return r;
	if (p->pid == 0) {
		int e;
		child_setup(&cp);
		execve(prog, (char *const *)argv, envp);
		e = errno;
		(void)fd_write_all(cp.status[1], &e, sizeof(e));
		_exit(127);
	}
	return parent_setup(p, &cp);
}

int process_start_fn(struct process *p, process_fn fn, void *arg, void *result, size_t result_size,
		     const struct process_options *opts, struct error_info *err)
{
	pid_t parent = getpid();
	struct child_pipes cp;
	int r;

	init(p, opts);
	p->is_fn = true;
	p->result_data = result;
	p->result_size = result ? result_size : 0;
	r = prepare_fork(p, &cp, err);
	if (r < 0)
		return r;
	if (p->pid == 0) {
		struct error_info e = { 0 };
		child_setup(&cp);
		/* Die with the agent rather than outlive it holding a mount in flight. */
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		r = fn(arg, result, &e);
		if (r < 0 && !e.code)
			e.code = r;
		if (r >= 0)
			e.code = 0;
		(void)fd_write_all(cp.status[1], &e, sizeof(e));
		if (result && result_size)
			(void)fd_write_all(cp.status[1], result, result_size);
		_exit(0);
	}
	return parent_setup(p, &cp);
}

static void read_output(struct process *p)
{
	while (p->output_fd >= 0) {
		char buf[4096];
		ssize_t n = read(p->output_fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			close_fd(&p->output_fd);
			return;
		}
		if (n < 0)
			return; /* EAGAIN: nothing more now */
		if (p->output_len < p->opts.output_max) {
			size_t room = p->opts.output_max - p->output_len;
			size_t take = (size_t)n < room ? (size_t)n : room;
			memcpy(p->output + p->output_len, buf, take);
			p->output_len += take;
			p->output[p->output_len] = '\0';
			if (take < (size_t)n)
				p->output_truncated = true;
		} else {
			p->output_truncated = true;
		}
	}
}

static void read_status(struct process *p)
{
	size_t want = p->is_fn ? sizeof(p->result) + p->result_size : sizeof(int);

	while (p->status_fd >= 0 && p->status_got < want) {
		ssize_t n = read(p->status_fd, p->status_buf + p->status_got, want - p->status_got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			close_fd(&p->status_fd);
			return;
		}
		if (n < 0)
			return;
		p->status_got += (size_t)n;
	}
}

static void write_stdin(struct process *p)
{
	while (p->stdin_fd >= 0 && p->stdin_off < p->opts.stdin_len) {
		ssize_t n = write(p->stdin_fd, p->opts.stdin_data + p->stdin_off,
				  p->opts.stdin_len - p->stdin_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			if (errno != EAGAIN)
				close_fd(&p->stdin_fd); /* EPIPE: it does not read its stdin */
			return;
		}
		p->stdin_off += (size_t)n;
	}
	close_fd(&p->stdin_fd); /* all written: EOF */
}

static bool try_reap(struct process *p)
{
	pid_t w;

	if (p->exited)
		return true;
	do
		w = waitpid(p->pid, &p->wait_status, WNOHANG);
	while (w < 0 && errno == EINTR);
	if (w == p->pid || (w < 0 && errno == ECHILD))
		p->exited = true;
	return p->exited;
}

/* After the exit: collect what is left in the pipes and the outcome. */
static void finish(struct process *p)
{
	read_output(p);
	read_status(p);
	close_fd(&p->output_fd); /* a daemon it left behind may hold the pipe: stop reading */
	close_fd(&p->status_fd);
	close_fd(&p->stdin_fd);
	close_fd(&p->pidfd);
	if (p->is_fn) {
		if (p->status_got == sizeof(p->result) + p->result_size) {
			memcpy(&p->result, p->status_buf, sizeof(p->result));
			p->result.msg[sizeof(p->result.msg) - 1] = '\0';
			if (p->result_size)
				memcpy(p->result_data, p->status_buf + sizeof(p->result),
				       p->result_size);
			p->has_result = true;
		} else if (WIFSIGNALED(p->wait_status)) {
			err_set(&p->result, -EIO, "the helper process was killed by signal %d",
				WTERMSIG(p->wait_status));
		} else {
			err_set(&p->result, -EIO, "the helper process exited without a result");
		}
	} else if (p->status_got == sizeof(int)) {
		memcpy(&p->exec_errno, p->status_buf, sizeof(int));
	}
	p->done = true;
}

int process_wait(struct process *p, uint64_t timeout_ms)
{
	uint64_t deadline = now_ms() + timeout_ms;

	if (p->done)
		return 1;
	for (;;) {
		struct pollfd pfd[4];
		nfds_t n = 0;
		uint64_t now;
		int wait_ms;

		read_output(p);
		read_status(p);
		if (p->stdin_fd >= 0)
			write_stdin(p);
		if (try_reap(p)) {
			finish(p);
			return 1;
		}
		now = now_ms();
		if (now >= deadline)
			return 0;
		wait_ms = deadline - now < (uint64_t)INT_MAX ? (int)(deadline - now) : INT_MAX;
		if (p->pidfd >= 0)
			pfd[n++] = (struct pollfd){ .fd = p->pidfd, .events = POLLIN };
		else
			wait_ms = wait_ms < 10 ? wait_ms : 10; /* no pidfd: look now and then */
		if (p->output_fd >= 0)
			pfd[n++] = (struct pollfd){ .fd = p->output_fd, .events = POLLIN };
		if (p->status_fd >= 0)
			pfd[n++] = (struct pollfd){ .fd = p->status_fd, .events = POLLIN };
		if (p->stdin_fd >= 0)
			pfd[n++] = (struct pollfd){ .fd = p->stdin_fd, .events = POLLOUT };
		if (poll(pfd, n, wait_ms) < 0 && errno != EINTR)
			return 0;
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

static void hand_to_reaper(pid_t pid)
{
	pthread_attr_t attr;
	pthread_t t;

	atomic_fetch_add(&stuck, 1);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	if (pthread_create(&t, &attr, reaper_main, (void *)(intptr_t)pid) != 0) {
		/* Left as a zombie, still counted: the limit keeps holding. */
	}
	pthread_attr_destroy(&attr);
}

void process_stop(struct process *p)
{
	if (p->pid <= 0 || p->done)
		return;
	if (!p->opts.kill_at_once) {
		(void)kill(-p->pid, SIGTERM);
		(void)kill(p->pid, SIGTERM);
		if (process_wait(p, p->opts.kill_grace_ms) == 1)
			return;
	}
	(void)kill(-p->pid, SIGKILL);
	(void)kill(p->pid, SIGKILL);
	if (process_wait(p, STUCK_AFTER_MS) == 1)
		return;
	/* In uninterruptible sleep: a reaper thread waits for it, the caller goes on. */
	close_fd(&p->output_fd);
	close_fd(&p->status_fd);
	close_fd(&p->stdin_fd);
	close_fd(&p->pidfd);
	hand_to_reaper(p->pid);
	if (p->is_fn)
		err_set(&p->result, -ETIMEDOUT, "abandoned");
	p->done = true;
}

void process_done(struct process *p)
{
	if (p->pid > 0 && !p->done)
		process_stop(p);
	close_fd(&p->output_fd);
	close_fd(&p->status_fd);
	close_fd(&p->stdin_fd);
	close_fd(&p->pidfd);
	free(p->output);
	free(p->status_buf);
	p->output = p->status_buf = NULL;
}

int process_exit_code(const struct process *p)
{
	if (p->exec_errno)
		return -p->exec_errno;
	if (WIFEXITED(p->wait_status))
		return WEXITSTATUS(p->wait_status);
	if (WIFSIGNALED(p->wait_status))
		return 128 + WTERMSIG(p->wait_status);
	return -EIO;
}

static void copy_output(const struct process *p, char *out, size_t outlen)
{
	if (out && outlen)
		snprintf(out, outlen, "%s", p->output ? p->output : "");
}

int process_run(const char *const argv[], const struct process_options *opts, char *out,
		size_t outlen)
{
	struct process p;
	bool timed_out = false;
	int r;

	if (out && outlen)
		out[0] = '\0';
	r = process_start(&p, argv, opts, NULL);
	if (r < 0) {
		process_done(&p);
		return r;
	}
	if (process_wait(&p, p.opts.timeout_ms ? p.opts.timeout_ms : UINT64_MAX / 2) == 0) {
		timed_out = true;
		process_stop(&p);
	}
	copy_output(&p, out, outlen);
	r = timed_out ? -ETIMEDOUT : process_exit_code(&p);
	process_done(&p);
	return r;
}

int process_run_fn(process_fn fn, void *arg, void *result, size_t result_size,
		   const struct process_options *opts, struct error_info *err, char *out,
		   size_t outlen)
{
	struct process p;
	int r;

	if (out && outlen)
		out[0] = '\0';
	r = process_start_fn(&p, fn, arg, result, result_size, opts, err);
	if (r < 0) {
		process_done(&p);
		return r;
	}
	if (process_wait(&p, p.opts.timeout_ms ? p.opts.timeout_ms : UINT64_MAX / 2) == 0) {
		process_stop(&p);
		r = -ETIMEDOUT;
	} else {
		r = p.result.code;
		if (r < 0 && err)
			*err = p.result;
	}
	copy_output(&p, out, outlen);
	process_done(&p);
	return r;
}
