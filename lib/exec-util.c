/* exec-util.c - see exec-util.h. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec-util.h"
#include "macro.h"

extern char **environ;

int exec_capture(const char *const argv[], char *out, size_t outlen)
{
	posix_spawn_file_actions_t fa;
	int pipefd[2], status, r;
	size_t len = 0;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
	r = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (r != 0) {
		close(pipefd[0]);
		return -r;
	}
	for (;;) {
		char buf[512];
		ssize_t n = read(pipefd[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (out && len + 1 < outlen) {
			size_t take = (size_t)n < outlen - 1 - len ? (size_t)n : outlen - 1 - len;
			memcpy(out + len, buf, take);
			len += take;
		}
	}
	close(pipefd[0]);
	if (out && outlen)
		out[len] = '\0';
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (WIFEXITED(status)) {
		/* posix_spawnp reports a missing program as exit 127 from the child. */
		return WEXITSTATUS(status) == 127 ? -ENOENT : WEXITSTATUS(status);
	}
	return -EINTR;
}
