/* test-metrics-server.c - the Prometheus endpoint (agent/metrics-server.c) started in this
 * process and read with curl, a real HTTP client, and with plain sockets where a client must
 * misbehave: GET and HEAD of /metrics (the text is metrics_render()'s), 404 for another path,
 * 405 for another method, the unix socket's mode and group, loopback TCP addresses, refused
 * addresses naming the field, network addresses only with metrics-network (and still only
 * /metrics served), clients that send nothing or never read not holding up the next
 * scrape, and a stop that closes every connection and removes the socket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "metrics-server.h"
#include "metrics.h"
#include "testlib.h"

struct fixture {
	char *dir;
	char sock[600];
	char url_base[128]; /* "http://agent" for the unix socket, else http://host:port */
};

static int time_scale(void)
{
	const char *s = getenv("TEST_TIME_SCALE");

	return s && atoi(s) > 1 ? atoi(s) : 1;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	f->dir = test_mkdtemp("metrics");
	snprintf(f->sock, sizeof(f->sock), "%s/metrics.sock", f->dir);
	snprintf(f->url_base, sizeof(f->url_base), "http://agent");
	metrics_reset();
	metrics_op_started("local", "set_up");
	metrics_op_finished("local", "set_up", true, 0.002);
	metrics_set_volume_gauges(3, 2, 1, 0, 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	test_rm_rf(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

struct reply {
	int code;
	char *headers;
	char *body;
};

static void reply_free(struct reply *r)
{
	free(r->headers);
	free(r->body);
	memset(r, 0, sizeof(*r));
}

/* One request with curl: method ("HEAD" uses -I), path, on the unix socket when sock is set,
 * else on url_base.  Returns curl's exit code; the status, headers and body in ret. */
static int curl_request(const char *sock, const char *url_base, const char *method,
			const char *path, struct reply *ret)
{
	char url[256], hdr[] = "/tmp/va-metrics-h-XXXXXX", body[] = "/tmp/va-metrics-b-XXXXXX";
	char max_time[16];
	const char *argv[24];
	char *out = NULL;
	int n = 0, rc;

	close(mkstemp(hdr));
	close(mkstemp(body));
	snprintf(url, sizeof(url), "%s%s", url_base, path);
	snprintf(max_time, sizeof(max_time), "%d", 10 * time_scale());
	argv[n++] = "curl";
	argv[n++] = "-sg"; /* -g: [::1] is an address, not a glob */
	argv[n++] = "--max-time";
	argv[n++] = max_time;
	if (sock) {
		argv[n++] = "--unix-socket";
		argv[n++] = sock;
	}
	if (!strcmp(method, "HEAD")) {
		argv[n++] = "-I";
	} else if (strcmp(method, "GET")) {
		argv[n++] = "-X";
		argv[n++] = method;
		argv[n++] = "--data";
		argv[n++] = "x=1";
	}
	argv[n++] = "-D";
	argv[n++] = hdr;
	argv[n++] = "-o";
	argv[n++] = body;
	argv[n++] = "-w";
	argv[n++] = "%{http_code}";
	argv[n++] = url;
	argv[n] = NULL;
	rc = test_run_capture(argv, &out);
	memset(ret, 0, sizeof(*ret));
	ret->code = out ? atoi(out) : 0;
	ret->headers = test_read_file(hdr);
	ret->body = test_read_file(body);
	free(out);
	unlink(hdr);
	unlink(body);
	return rc;
}

/* A connected client socket to the unix socket path. */
static int unix_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Everything the server sends on fd until it closes, or NULL after timeout_ms. */
static char *read_to_eof(int fd, int timeout_ms, size_t *ret_len)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap + 1);

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, timeout_ms * time_scale()) <= 0) {
			free(buf);
			return NULL;
		}
		if (len == cap)
			buf = realloc(buf, (cap *= 2) + 1);
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == ECONNRESET)
			n = 0;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	*ret_len = len;
	return buf;
}

/* A free loopback TCP port (bound once by the kernel's choice, then released). */
static int free_port(int family)
{
	struct sockaddr_storage ss = { .ss_family = (sa_family_t)family };
	socklen_t len = family == AF_INET6 ? sizeof(struct sockaddr_in6)
					   : sizeof(struct sockaddr_in);
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0), port;

	if (fd < 0)
		return -1;
	if (family == AF_INET6)
		((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;
	else
		((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		close(fd);
		return -1;
	}
	port = ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
					: ((struct sockaddr_in *)&ss)->sin_port);
	close(fd);
	return port;
}

static void check_get_head_404_405(const char *sock, const char *url_base)
{
	struct reply r;
	char *text = metrics_render(), want_len[64];

	/* GET: the text metrics_render() makes, as Prometheus' text format. */
	assert_int_equal(curl_request(sock, url_base, "GET", "/metrics", &r), 0);
	assert_int_equal(r.code, 200);
	assert_non_null(strcasestr(r.headers, "Content-Type: text/plain; version=0.0.4"));
	assert_string_equal(r.body, text);
	assert_non_null(strstr(r.body, "volagent_operations_succeeded_total{plugin=\"local\","
				       "operation=\"set_up\"} 1"));
	assert_non_null(strstr(r.body, "volagent_volumes_desired 3"));
	reply_free(&r);
	/* A query string does not change the path. */
	assert_int_equal(curl_request(sock, url_base, "GET", "/metrics?x=1", &r), 0);
	assert_int_equal(r.code, 200);
	assert_string_equal(r.body, text);
	reply_free(&r);

	/* HEAD: the same status and headers, with GET's length, and no body. */
	assert_int_equal(curl_request(sock, url_base, "HEAD", "/metrics", &r), 0);
	assert_int_equal(r.code, 200);
	assert_non_null(strcasestr(r.headers, "Content-Type: text/plain; version=0.0.4"));
	snprintf(want_len, sizeof(want_len), "Content-Length: %zu\r\n", strlen(text));
	assert_non_null(strcasestr(r.headers, want_len));
	/* (curl -I writes the headers where the body would go: test_unix_socket checks on a
	 * raw socket that no body is sent.) */
	assert_null(strstr(r.body, "# TYPE"));
	reply_free(&r);

	/* Another path: 404, saying where the metrics are. */
	assert_int_equal(curl_request(sock, url_base, "GET", "/other", &r), 0);
	assert_int_equal(r.code, 404);
	assert_non_null(strstr(r.body, "/metrics"));
	reply_free(&r);
	assert_int_equal(curl_request(sock, url_base, "GET", "/metrics/x", &r), 0);
	assert_int_equal(r.code, 404);
	reply_free(&r);

	/* Another method: 405 with the methods that are allowed. */
	for (size_t i = 0; i < 3; i++) {
		const char *m = (const char *[]){ "POST", "PUT", "DELETE" }[i];
		assert_int_equal(curl_request(sock, url_base, m, "/metrics", &r), 0);
		assert_int_equal(r.code, 405);
		assert_non_null(strcasestr(r.headers, "Allow: GET, HEAD\r\n"));
		reply_free(&r);
	}
	free(text);
}

static void test_unix_socket(void **state)
{
	struct fixture *f = *state;
	struct metrics_server *s = NULL;
	struct error_info err = { 0 };
	char addr[640];
	struct stat st;

	/* "unix:" + path, as the agent's default; the socket is root-only. */
	snprintf(addr, sizeof(addr), "unix:%s", f->sock);
	assert_int_equal(metrics_server_start(addr, NULL, false, &s, &err), 0);
	assert_int_equal(stat(f->sock, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);
	check_get_head_404_405(f->sock, f->url_base);

	/* A raw HEAD over HTTP/1.0: the server sends the headers, not one byte of body. */
	{
		static const char req[] = "HEAD /metrics HTTP/1.0\r\n\r\n";
		int fd = unix_connect(f->sock);
		size_t len;
		char *resp, *end;

		assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
		resp = read_to_eof(fd, 10000, &len);
		assert_non_null(resp);
		assert_true(strncmp(resp, "HTTP/1.1 200 ", 13) == 0 ||
			    strncmp(resp, "HTTP/1.0 200 ", 13) == 0);
		end = strstr(resp, "\r\n\r\n");
		assert_non_null(end);
		assert_int_equal(len, (size_t)(end + 4 - resp));
		free(resp);
		close(fd);
	}
	s = metrics_server_free(s);
	assert_null(s);
	/* Stopped: the socket file is gone. */
	assert_int_equal(access(f->sock, F_OK), -1);

	/* A bare path, and unix:/// form. */
	assert_int_equal(metrics_server_start(f->sock, NULL, false, &s, &err), 0);
	assert_int_equal(access(f->sock, F_OK), 0);
	s = metrics_server_free(s);
	snprintf(addr, sizeof(addr), "unix://%s", f->sock);
	assert_int_equal(metrics_server_start(addr, NULL, false, &s, &err), 0);
	assert_int_equal(access(f->sock, F_OK), 0);
	s = metrics_server_free(s);
}

static void test_unix_socket_group(void **state)
{
	struct fixture *f = *state;
	struct metrics_server *s = NULL;
	struct error_info err = { 0 };
	struct stat st;

	if (!test_have_root()) {
		fprintf(stderr, "not root: the socket's group cannot be set, skipped\n");
		skip();
	}
	/* With a group: 0660 and that group (as for the admin socket). */
	assert_int_equal(metrics_server_start(f->sock, "65534", false, &s, &err), 0);
	assert_int_equal(stat(f->sock, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0660);
	assert_int_equal(st.st_gid, 65534);
	s = metrics_server_free(s);
	/* A group that does not exist is an error that names it; nothing is left behind. */
	assert_int_not_equal(metrics_server_start(f->sock, "no-such-group-volagent", false, &s,
						  &err),
			     0);
	assert_null(s);
	assert_non_null(strstr(err_msg(&err), "no-such-group-volagent"));
	assert_int_equal(access(f->sock, F_OK), -1);
}

static void test_tcp_loopback(void **state)
{
	struct fixture *f = *state;
	struct metrics_server *s = NULL, *s2 = NULL;
	struct error_info err = { 0 };
	char addr[64];
	int port = free_port(AF_INET);

	assert_true(port > 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	assert_int_equal(metrics_server_start(addr, NULL, false, &s, &err), 0);
	snprintf(f->url_base, sizeof(f->url_base), "http://127.0.0.1:%d", port);
	check_get_head_404_405(NULL, f->url_base);

	/* The port is taken: an error naming the field and the address. */
	assert_int_equal(metrics_server_start(addr, NULL, false, &s2, &err), -EADDRINUSE);
	assert_null(s2);
	assert_non_null(strstr(err_msg(&err), "metrics-address"));
	assert_non_null(strstr(err_msg(&err), addr));
	s = metrics_server_free(s);

	/* localhost means 127.0.0.1. */
	port = free_port(AF_INET);
	snprintf(addr, sizeof(addr), "localhost:%d", port);
	assert_int_equal(metrics_server_start(addr, NULL, false, &s, &err), 0);
	snprintf(f->url_base, sizeof(f->url_base), "http://127.0.0.1:%d", port);
	{
		struct reply r;
		assert_int_equal(curl_request(NULL, f->url_base, "GET", "/metrics", &r), 0);
		assert_int_equal(r.code, 200);
		reply_free(&r);
	}
	s = metrics_server_free(s);

	/* [::1], where the kernel has IPv6. */
	port = free_port(AF_INET6);
	if (port < 0) {
		fprintf(stderr, "no IPv6 loopback here: [::1] not checked\n");
		return;
	}
	snprintf(addr, sizeof(addr), "[::1]:%d", port);
	assert_int_equal(metrics_server_start(addr, NULL, false, &s, &err), 0);
	snprintf(f->url_base, sizeof(f->url_base), "http://[::1]:%d", port);
	check_get_head_404_405(NULL, f->url_base);
	s = metrics_server_free(s);
}

static void test_refused_addresses(void **state)
{
	static const char *const bad[] = {
		"0.0.0.0:9100",	  "10.1.2.3:9100",  "192.168.0.1:80", "[::]:9100",
		"example.com:80", "127.0.0.1",	    "127.0.0.1:0",    "127.0.0.1:70000",
		"127.0.0.1:http", "127.0.0.2:9100", ":9100",	      "",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct metrics_server *s = NULL;
		struct error_info err = { 0 };

		assert_int_equal(metrics_server_start(bad[i], NULL, false, &s, &err), -EINVAL);
		assert_null(s);
		assert_non_null(strstr(err_msg(&err), "metrics-address"));
		assert_non_null(strstr(err_msg(&err), "is not unix:/path or a loopback"));
		if (bad[i][0])
			assert_non_null(strstr(err_msg(&err), bad[i]));
	}
}

/* With network (metrics-network: true) any IP literal of the node is taken, 0.0.0.0 too, and
 * the endpoint still serves /metrics alone; names are still not resolved. */
static void test_network_only_when_asked(void **state)
{
	static const char *const bad[] = { "example.com:80", "0.0.0.0",	    "0.0.0.0:0", "[::]",
					   "::1:9100",	     "[nohost]:80", "" };
	struct fixture *f = *state;
	struct metrics_server *s = NULL;
	struct error_info err = { 0 };
	char addr[64];
	int port = free_port(AF_INET);

	assert_true(port > 0);
	snprintf(addr, sizeof(addr), "0.0.0.0:%d", port);
	assert_int_equal(metrics_server_start(addr, NULL, false, &s, &err), -EINVAL);
	assert_non_null(strstr(err_msg(&err), "needs metrics-network: true"));
	assert_int_equal(metrics_server_start(addr, NULL, true, &s, &err), 0);
	snprintf(f->url_base, sizeof(f->url_base), "http://127.0.0.1:%d", port);
	check_get_head_404_405(NULL, f->url_base);
	s = metrics_server_free(s);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(metrics_server_start(bad[i], NULL, true, &s, &err), -EINVAL);
		assert_null(s);
		assert_non_null(strstr(err_msg(&err), "is not unix:/path or an IP address:port"));
	}

	port = free_port(AF_INET6);
	if (port < 0) {
		fprintf(stderr, "no IPv6 here: [::] not checked\n");
		return;
	}
	snprintf(addr, sizeof(addr), "[::]:%d", port);
	assert_int_equal(metrics_server_start(addr, NULL, true, &s, &err), 0);
	snprintf(f->url_base, sizeof(f->url_base), "http://[::1]:%d", port);
	check_get_head_404_405(NULL, f->url_base);
	s = metrics_server_free(s);
}

/* Whether fd was closed by the server (EOF or reset), waiting up to timeout_ms. */
static bool closed_by_server(int fd, int timeout_ms)
{
	char buf[65536];

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, timeout_ms * time_scale()) <= 0)
			return false;
		n = read(fd, buf, sizeof(buf));
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return true;
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return false;
	}
}

static void test_stuck_clients_do_not_block_a_scrape(void **state)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: agent\r\n\r\n";
	struct fixture *f = *state;
	struct metrics_server *s = NULL;
	struct error_info err = { 0 };
	struct timespec t0, t1;
	struct reply r;
	int silent, partial, greedy;
	size_t sent = 0;

	assert_int_equal(metrics_server_start(f->sock, NULL, false, &s, &err), 0);
	/* One connects and sends nothing, one sends half a request line ... */
	silent = unix_connect(f->sock);
	partial = unix_connect(f->sock);
	assert_int_equal(write(partial, "GET /metr", 9), 9);
	/* ... and one pipelines requests and never reads an answer, until its socket is full
	 * both ways (bounded: at most 20000 requests). */
	greedy = unix_connect(f->sock);
	assert_int_equal(fcntl(greedy, F_SETFL, O_NONBLOCK), 0);
	for (int i = 0; i < 20000; i++) {
		ssize_t n = write(greedy, req, strlen(req));
		if (n < 0) {
			struct pollfd p = { .fd = greedy, .events = POLLOUT };
			assert_int_equal(errno, EAGAIN);
			/* Full for 200 ms: the server has stopped reading it. */
			if (poll(&p, 1, 200) == 0)
				break;
			continue;
		}
		sent += (size_t)n;
	}
	assert_true(sent > 0);

	/* The next scrape is answered, and promptly. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(curl_request(f->sock, f->url_base, "GET", "/metrics", &r), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_int_equal(r.code, 200);
	assert_non_null(strstr(r.body, "volagent_volumes_desired 3"));
	reply_free(&r);
	assert_true((t1.tv_sec - t0.tv_sec) < 5 * time_scale());

	/* Stopping closes every connection, whatever state it is in, and removes the socket. */
	s = metrics_server_free(s);
	assert_true(closed_by_server(silent, 5000));
	assert_true(closed_by_server(partial, 5000));
	assert_true(closed_by_server(greedy, 5000));
	assert_int_equal(access(f->sock, F_OK), -1);
	close(silent);
	close(partial);
	close(greedy);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_unix_socket, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unix_socket_group, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tcp_loopback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_addresses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_network_only_when_asked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stuck_clients_do_not_block_a_scrape, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
