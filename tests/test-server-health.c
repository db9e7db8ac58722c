/* test-server-health.c - a storage server that is down: the state kept per server
 * (lib/server-health.c) and the NFS probe (plugins/nfs/nfs-probe.c).
 *
 * The state is driven through its own API as the nfs plugin drives it, with real time: an
 * operation left in flight past the hung-after time makes its server down for the next
 * caller (refused at once, naming the server and since when), other servers are not
 * affected, one probe at a time is due at backoff, an answered probe or a finished operation
 * makes it up again.  The probe is sent to a real nfs-ganesha on this host
 * (scripts/nfs-server): it answers; SIGSTOPped (the kernel still accepts its connections) it
 * does not, and the probe gives up at its deadline; SIGCONTed it answers again.  The server is
 * stopped by the PID it recorded, also on failure.  The mount path itself (mount.nfs and the
 * kernel's NFS client, absent here) is in the VM test, tests/nfs/guest-server-down.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "nfs-probe.h"
#include "server-health.h"
#include "testlib.h"

static uint64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	usleep(ms * 1000);
}

static const struct server_health_info *info_of(const char *key)
{
	static struct server_health_info info[SERVER_HEALTH_MAX];
	size_t n = server_health_list(info, SERVER_HEALTH_MAX);

	for (size_t i = 0; i < n; i++)
		if (strcmp(info[i].key, key) == 0)
			return &info[i];
	return NULL;
}

static void test_down_up_and_probes(void **state)
{
	struct server_health_op hung, op, op2, probe;
	struct error_info err = { 0 };
	uint64_t t0;

	server_health_reset();
	server_health_set_hung_after(200);
	/* A mount that does not return. */
	assert_int_equal(server_health_begin("nfs server a:2049", &hung, &err), 0);
	/* Others to the same server meanwhile go ahead: it has not hung long enough.  This one
	 * fails for a reason of its own, which says nothing of the server (a success would: a
	 * mount started before it, the held one, would then prove nothing). */
	assert_int_equal(server_health_begin("nfs server a:2049", &op, &err), 0);
	server_health_end(&op, -EINVAL, NULL);
	sleep_ms(250);
	/* Status sees it down before any other operation asks. */
	assert_true(info_of("nfs server a:2049")->down);
	/* The next one is refused at once, naming the server and since when. */
	t0 = ms_now();
	assert_int_equal(server_health_begin("nfs server a:2049", &op, &err), -EHOSTUNREACH);
	assert_true(ms_now() - t0 < 1000); /* not waiting on the held one, which never returns */
	assert_non_null(strstr(err.msg, "nfs server a:2049 is down since 20"));
	assert_non_null(strstr(err.msg, "has not returned for"));
	assert_true(info_of("nfs server a:2049")->down);
	assert_int_equal(info_of("nfs server a:2049")->refused, 1);
	/* Another server is not affected. */
	assert_int_equal(server_health_begin("nfs server b:2049", &op2, &err), 0);
	server_health_end(&op2, 0, NULL);
	assert_false(info_of("nfs server b:2049")->down);

	/* A probe is due after the first backoff step (1 s), one at a time. */
	sleep_ms(1100);
	assert_int_equal(server_health_begin("nfs server a:2049", &probe, &err), 1);
	assert_int_equal(server_health_begin("nfs server a:2049", &op, &err), -EHOSTUNREACH);
	assert_non_null(strstr(err.msg, "a probe is running"));
	/* Unanswered: still down, the next probe later (2 s). */
	server_health_probe_end(&probe, false, "no answer");
	assert_int_equal(server_health_begin("nfs server a:2049", &op, &err), -EHOSTUNREACH);
	assert_true(info_of("nfs server a:2049")->next_probe_in_ms > 1500);
	/* The held mount completes: up at once, no probe needed. */
	server_health_end(&hung, 0, NULL);
	assert_false(info_of("nfs server a:2049")->down);
	assert_int_equal(server_health_begin("nfs server a:2049", &op, &err), 0);
	/* A timeout makes it down again, with the reason given. */
	server_health_end(&op, -ETIMEDOUT, "mount timed out after 4000ms");
	assert_int_equal(server_health_begin("nfs server a:2049", &op, &err), -EHOSTUNREACH);
	assert_non_null(strstr(err.msg, "mount timed out after 4000ms"));
	assert_int_equal(info_of("nfs server a:2049")->down_count, 2);

	/* An answered probe makes it up, though an older mount still hangs: a mount started
	 * before the answer proves nothing. */
	assert_int_equal(server_health_begin("nfs server c:2049", &hung, &err), 0);
	sleep_ms(250);
	assert_int_equal(server_health_begin("nfs server c:2049", &op, &err), -EHOSTUNREACH);
	sleep_ms(1100);
	assert_int_equal(server_health_begin("nfs server c:2049", &probe, &err), 1);
	server_health_probe_end(&probe, true, NULL);
	assert_int_equal(server_health_begin("nfs server c:2049", &op, &err), 0);
	server_health_end(&op, 0, NULL);
	server_health_end(&hung, -ETIMEDOUT, "timed out");
	assert_true(info_of("nfs server c:2049")->down);
	server_health_reset();
}

/* --- the probe against a real ganesha ------------------------------------------------------ */

struct nfs_server {
	char dir[64];
	int port;
	pid_t pid;
};

static int server_setup(void **state)
{
	static struct nfs_server s;
	char *out = NULL, *p;

	if (access("/usr/bin/ganesha.nfsd", X_OK) != 0 || geteuid() != 0) {
		print_message("skipped: needs root and nfs-ganesha (scripts/deps/vm-test.txt)\n");
		*state = NULL;
		return 0;
	}
	snprintf(s.dir, sizeof(s.dir), "/tmp/va-health.XXXXXX");
	assert_non_null(mkdtemp(s.dir));
	assert_int_equal(test_run_capture((const char *const[]){ "scripts/nfs-server", "start",
								 s.dir, NULL },
					  &out),
			 0);
	p = strstr(out, "NFS_PORT=");
	assert_non_null(p);
	s.port = atoi(p + strlen("NFS_PORT="));
	p = strstr(out, "NFS_PID=");
	assert_non_null(p);
	s.pid = (pid_t)atoi(p + strlen("NFS_PID="));
	free(out);
	*state = &s;
	return 0;
}

static int server_teardown(void **state)
{
	struct nfs_server *s = *state;

	if (!s)
		return 0;
	kill(s->pid, SIGCONT);
	test_run((const char *const[]){ "scripts/nfs-server", "stop", s->dir, NULL });
	rmdir(s->dir);
	return 0;
}

static int connect_to(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* One probe of s, on a new connection, answered within 2 s. */
static bool probe_answers(void *arg)
{
	const struct nfs_server *s = arg;
	struct error_info err = { 0 };

	return nfs_probe_null(connect_to(s->port), 2000, &err) == 0;
}

static void test_probe_real_server(void **state)
{
	struct nfs_server *s = *state;
	struct error_info err = { 0 };
	uint64_t t0;

	if (!s)
		skip();
	assert_int_equal(nfs_probe_null(connect_to(s->port), 2000, &err), 0);
	/* Stopped: connections are still accepted (by the kernel), the call is not answered. */
	assert_int_equal(kill(s->pid, SIGSTOP), 0);
	t0 = ms_now();
	assert_int_equal(nfs_probe_null(connect_to(s->port), 500, &err), -ETIMEDOUT);
	assert_true(ms_now() - t0 >= 450 && ms_now() - t0 < 2000);
	assert_non_null(strstr(err.msg, "does not answer"));
	assert_int_equal(kill(s->pid, SIGCONT), 0);
	/* Continued, it answers again: once it has worked off what queued while it was stopped,
	 * which a busy 2-core machine stretches past one probe's 2 s (seen in CI). */
	assert_true(test_wait_until(probe_answers, s, 10000));
}

/* The probe of the gate: counts its runs, answers as *arg says. */
static int probe_runs;

static int fake_probe(void *arg, struct error_info *err)
{
	probe_runs++;
	return *(bool *)arg ? 0 : err_set(err, -ETIMEDOUT, "no banner");
}

/* A plugin's own hung-after for its keys (rbd's "rbd cluster "), the others keeping theirs;
 * the gate runs the probe when due, once, and lets the caller through when it answered.
 * (The probe here is a function of the test: this is the state's logic; the rbd probe runs
 * against a stopped ceph-mon in test-rbd-agent.) */
static void test_hung_after_for_and_gate(void **state)
{
	struct server_health_op hung, hung2, op;
	struct error_info err = { 0 };
	bool answers = false;

	server_health_reset();
	server_health_set_hung_after(60000);
	assert_int_equal(server_health_set_hung_after_for("rbd cluster ", 200), 0);
	assert_int_equal(server_health_set_hung_after_for("rbd cluster ", 200), 0);
	assert_int_equal(server_health_begin("rbd cluster m:6789", &hung, &err), 0);
	assert_int_equal(server_health_begin("nfs server a:2049", &hung2, &err), 0);
	sleep_ms(300);
	/* rbd's limit (200 ms) passed, NFS's (60 s) not. */
	assert_int_equal(server_health_gate("nfs server a:2049", &op, fake_probe, &answers, &err),
			 0);
	server_health_end(&op, 0, NULL);
	assert_int_equal(server_health_gate("rbd cluster m:6789", &op, fake_probe, &answers, &err),
			 -EHOSTUNREACH);
	assert_non_null(strstr(err.msg, "rbd cluster m:6789 is down since 20"));
	assert_int_equal(probe_runs, 0);
	sleep_ms(1100); /* the first probe is due after 1 s: it runs, not answered */
	assert_int_equal(server_health_gate("rbd cluster m:6789", &op, fake_probe, &answers, &err),
			 -EHOSTUNREACH);
	assert_int_equal(probe_runs, 1);
	assert_non_null(strstr(err.msg, "probe: no banner"));
	assert_int_equal(server_health_gate("rbd cluster m:6789", &op, fake_probe, &answers, &err),
			 -EHOSTUNREACH);
	assert_int_equal(probe_runs, 1); /* the next is due 2 s later */
	sleep_ms(2100);
	answers = true;
	assert_int_equal(server_health_gate("rbd cluster m:6789", &op, fake_probe, &answers, &err),
			 0);
	assert_int_equal(probe_runs, 2);
	assert_false(info_of("rbd cluster m:6789")->down);
	server_health_end(&op, 0, NULL);
	server_health_end(&hung, -ETIMEDOUT, "timed out");
	server_health_end(&hung2, 0, NULL);
	assert_true(info_of("rbd cluster m:6789")->down);
	for (int i = 0; i < 3; i++) {
		char p[16];
		snprintf(p, sizeof(p), "p%d ", i);
		assert_int_equal(server_health_set_hung_after_for(p, 1), 0);
	}
	assert_int_equal(server_health_set_hung_after_for("p3 ", 1), -ENOSPC);
	server_health_reset();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_down_up_and_probes),
		cmocka_unit_test(test_hung_after_for_and_gate),
		cmocka_unit_test_setup_teardown(test_probe_real_server, server_setup,
						server_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
