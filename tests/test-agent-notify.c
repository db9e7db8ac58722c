/* test-agent-notify.c - the systemd notify protocol, spoken to a real NOTIFY_SOCKET as systemd
 * would listen on it: READY=1 once reconstruction is done (not before the mounts found were
 * adopted), STATUS= with the counts, WATCHDOG=1 pings at half the WATCHDOG_USEC interval from
 * the reconciler loop, and STOPPING=1 on SIGTERM; with CSI on, READY=1 only once the CSI socket
 * listens too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "testlib.h"

struct listener {
	int fd;
	char path[108];
	char all[65536]; /* every message, each followed by '\n' */
};

static void listen_notify(struct listener *l, const char *dir)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	snprintf(l->path, sizeof(l->path), "%s/notify.sock", dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", l->path);
	l->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(l->fd >= 0);
	assert_int_equal(bind(l->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	l->all[0] = '\0';
}

/* A pod uid with one local volume of the source dir <f->dir>/src (made, its path in src), and
 * l listening where NOTIFY_SOCKET (set) tells the agent started next to write. */
static void pod_and_listener(struct agent_fixture *f, const char *uid, char src[600],
			     struct listener *l)
{
	snprintf(src, 600, "%s/src", f->dir);
	mkdir(src, 0755);
	assert_int_equal(fixture_write_local_pod(f, uid, "v", src), 0);
	listen_notify(l, f->dir);
	setenv("NOTIFY_SOCKET", l->path, 1);
}

/* Collects messages for ms milliseconds. */
static void collect(struct listener *l, int ms)
{
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		struct pollfd p = { .fd = l->fd, .events = POLLIN };
		char buf[4096];
		ssize_t n;
		long left;

		clock_gettime(CLOCK_MONOTONIC, &now);
		left = ms - ((now.tv_sec - start.tv_sec) * 1000 +
			     (now.tv_nsec - start.tv_nsec) / 1000000);
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return;
		n = recv(l->fd, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		strncat(l->all, buf, sizeof(l->all) - strlen(l->all) - 2);
		strcat(l->all, "\n");
	}
}

static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

FIXTURE_SETUP_TEARDOWN("notify")

/* Whether the last STATUS= received is want (for test_wait_until; collects for a moment). */
struct status_wait {
	struct listener *l;
	const char *want;
};

static bool last_status_is(void *arg)
{
	struct status_wait *w = arg;
	const char *last = NULL;
	size_t n = strlen(w->want);

	collect(w->l, 20);
	for (const char *p = w->l->all; (p = strstr(p, "STATUS=")); p++)
		last = p;
	return last && !strncmp(last, w->want, n) && last[n] == '\n';
}

/* Whether a STATUS= with text has come (for test_wait_until; collects for a moment). */
static bool status_came(void *arg)
{
	struct status_wait *w = arg;

	collect(w->l, 20);
	return strstr(w->l->all, w->want) != NULL;
}

static void test_ready_status_watchdog_stopping(void **state)
{
	struct agent_fixture *f = *state;
	struct listener l;
	char src[600], d[512];
	long adopted;
	int id;

	pod_and_listener(f, "n1", src, &l);
	setenv("WATCHDOG_USEC", "200000", 1); /* 200 ms: pings every 100 ms */
	assert_int_equal(fixture_start(f, NULL), 0);
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");

	collect(&l, 1200);
	assert_int_equal(count(l.all, "READY=1"), 1);
	assert_true(count(l.all, "WATCHDOG=1") >= 5);
	/* STATUS= at most once a second: the counts once mounted may come a second after the
	 * first. */
	assert_true(
		test_wait_until(status_came,
				&(struct status_wait){ &l, "STATUS=desired=1 mounted=1 failing=0" },
				5000));
	fixture_pod_dir(f, "n1", "v", d);
	assert_true(test_is_mountpoint(d));
	id = test_mount_id(d);
	/* SIGHUP forces a timed full resync, and changes nothing that is right. */
	kill(f->agent.pid, SIGHUP);
	assert_true(fixture_wait_log(f, "msg=\"forced resync\"", 5000));
	assert_true(fixture_log_find(f, "forced resync", "desired_pod_volumes=1") >= 0);
	assert_true(fixture_wait_pod_state(f, d, "mounted", 0, 5000));
	assert_int_equal(test_mount_id(d), id); /* not remounted */

	/* A restart with a mount to adopt: READY comes only after the adoption. */
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
	/* Forget what the first agent sent, including what is still queued on the socket. */
	for (char buf[4096]; recv(l.fd, buf, sizeof(buf), MSG_DONTWAIT) > 0;)
		;
	l.all[0] = '\0';
	setenv("NOTIFY_SOCKET", l.path, 1);
	assert_int_equal(fixture_start(f, NULL), 0);
	unsetenv("NOTIFY_SOCKET");
	collect(&l, 800);
	assert_int_equal(count(l.all, "READY=1"), 1);
	assert_int_equal(count(l.all, "WATCHDOG=1"), 0); /* no WATCHDOG_USEC this time */
	/* The adoption's summary line comes before the one that says ready. */
	adopted = fixture_log_find(f, "adopted existing mounts", "count=1");
	assert_true(adopted >= 0);
	assert_true(adopted <
		    fixture_log_find(f, "startup reconstruction complete", "pod_mounts=1"));
	kill(f->agent.pid, SIGTERM);
	collect(&l, 800);
	assert_non_null(strstr(l.all, "STOPPING=1"));
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
	close(l.fd);
}

/* Collects messages for a moment; true once READY=1 has come (for test_wait_until). */
static bool ready_came(void *arg)
{
	struct listener *l = arg;

	collect(l, 20);
	return strstr(l->all, "READY=1") != NULL;
}

/* The CSI server starts beside the reconciler's first pass; READY=1 waits for both, so a
 * client that connects as soon as systemd says the unit is up finds the socket listening. */
static void test_ready_waits_for_csi_socket(void **state)
{
	struct agent_fixture *f = *state;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct listener l;
	char src[600], kubelet[600], sock[700];
	const char *args[] = { "--csi", "--kubelet-root-dir",
			       kubelet, "--device-inventory",
			       "false", NULL };
	int fd;

	snprintf(kubelet, sizeof(kubelet), "%s/kubelet", fixture_short_dir(f));
	snprintf(sock, sizeof(sock), "%s/plugins/csi.volagent.io/csi.sock", kubelet);
	mkdir(kubelet, 0755);
	pod_and_listener(f, "n1", src, &l);
	assert_int_equal(fixture_start(f, args), 0);
	unsetenv("NOTIFY_SOCKET");

	assert_true(test_wait_until(ready_came, &l, 10000));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	collect(&l, 200);
	assert_int_equal(count(l.all, "READY=1"), 1);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
	close(l.fd);
}

/* STATUS= is rate-limited during a burst (at most one a second, the first at once), and the
 * counts the burst ends with go out by themselves once the interval is over: no event after
 * the burst is needed for systemd to see them. */
#define BURST 100
static void test_status_rate_limited_last_value_sent(void **state)
{
	struct agent_fixture *f = *state;
	struct status_wait w;
	struct listener l;
	struct timespec a, b;
	char src[600], uid[32], want[128];
	long ms;

	pod_and_listener(f, "n0", src, &l);
	assert_int_equal(fixture_start(f, NULL), 0);
	unsetenv("NOTIFY_SOCKET");
	w = (struct status_wait){ &l, "STATUS=desired=1 mounted=1 failing=0" };
	assert_true(test_wait_until(last_status_is, &w, 10000));

	l.all[0] = '\0';
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 1; i <= BURST; i++) {
		snprintf(uid, sizeof(uid), "n%d", i);
		assert_int_equal(fixture_write_local_pod(f, uid, "v", src), 0);
	}
	assert_true(fixture_wait_mount_count(f, BURST + 1, 10000));
	/* Nothing happens from here on but the loop's own timer. */
	snprintf(want, sizeof(want), "STATUS=desired=%d mounted=%d failing=0", BURST + 1,
		 BURST + 1);
	w.want = want;
	assert_true(test_wait_until(last_status_is, &w, 10000));
	clock_gettime(CLOCK_MONOTONIC, &b);
	ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
	/* One at the start of the burst, then at most one a second. */
	assert_true(count(l.all, "STATUS=") <= 1 + ms / 1000 + 1);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
	close(l.fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ready_status_watchdog_stopping, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ready_waits_for_csi_socket, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status_rate_limited_last_value_sent, setup,
						teardown),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
