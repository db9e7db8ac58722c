/* pause.c - the sandbox ("pause") process of the test cluster's pods: it holds the pod's
 * namespaces, reaps the zombies the pod's containers leave when it is their PID 1, and exits
 * on SIGINT or SIGTERM.  Built static into an image with nothing else (tests/cluster/images/build),
 * because no registry can be reached to pull the upstream one.  Test infrastructure only. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
	stop = sig;
}

static void on_child(int sig __attribute__((unused)))
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	sigset_t none;

	if (argc > 1 && strcmp(argv[1], "-v") == 0) {
		puts("pause (volagent test cluster)");
		return 0;
	}
	if (getpid() != 1)
		fprintf(stderr,
			"pause: warning: not PID 1, children of the pod are not reaped here\n");
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_child;
	sa.sa_flags = SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);
	sigemptyset(&none);
	while (!stop)
		sigsuspend(&none);
	fprintf(stderr, "pause: shutting down on signal %d\n", (int)stop);
	return 0;
}
