/* nfs-server.c - see nfs-server.h. */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "time-util.h"
#include "nfs-probe.h"
#include "nfs-server.h"
#include "nfs-settings.h"

/* A TCP connect to the server's NFS port within timeout ms.  ret_fd (may be NULL: closed)
 * gets the connected socket. */
static int connect_within(const struct nfs_volume *v, uint64_t timeout, int *ret_fd,
			  struct error_info *err)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char port[8], hp[NFS_SERVER_MAX + 16];
	struct timespec t0, t1;
	int r, last = ETIMEDOUT;

	nfs_volume_host_port(v, hp, sizeof(hp));
	snprintf(port, sizeof(port), "%u", v->port);
	r = getaddrinfo(v->server, port, &hints, &res);
	if (r != 0)
		return err_set(err, -EHOSTUNREACH, "nfs server %s is unreachable: %s", hp,
			       r == EAI_SYSTEM ? strerror(errno) : gai_strerror(r));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		_cleanup_close_ int fd =
			socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		uint64_t spent;
		socklen_t len = sizeof(int);
		int so = 0;

		if (fd < 0) {
			last = errno;
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			if (ret_fd)
				*ret_fd = TAKE_FD(fd);
			goto ok;
		}
		if (errno != EINPROGRESS) {
			last = errno;
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		spent = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000 +
			(uint64_t)((t1.tv_nsec - t0.tv_nsec) / 1000000);
		if (spent >= timeout) {
			last = ETIMEDOUT;
			break;
		}
		r = poll(&p, 1, (int)(timeout - spent));
		if (r == 0) {
			last = ETIMEDOUT;
			continue;
		}
		if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &len) < 0) {
			last = errno;
			continue;
		}
		if (so == 0) {
			if (ret_fd)
				*ret_fd = TAKE_FD(fd);
			goto ok;
		}
		last = so;
	}
	freeaddrinfo(res);
	if (last == ETIMEDOUT)
		return err_set(err, -ETIMEDOUT,
			       "nfs server %s is unreachable: no answer to a TCP connect within "
			       "%llums",
			       hp, (unsigned long long)timeout);
	if (last != ECONNREFUSED && last != EHOSTUNREACH && last != ENETUNREACH)
		return err_set(err, -EHOSTUNREACH, "nfs server %s is unreachable: %s", hp,
			       strerror(last));
	return err_set(err, -last, "nfs server %s is unreachable: %s", hp, strerror(last));
ok:
	freeaddrinfo(res);
	return 0;
}

int nfs_server_check_reachable(const struct nfs_volume *v, int *ret_fd, struct error_info *err)
{
	return connect_within(v, nfs_settings.connect_timeout_ms, ret_fd, err);
}

/* The probe of a server that is down: TCP connect, then the NFS NULL call (nfs-probe.h),
 * both within one deadline (NFS_SERVER_PROBE_MS, or the connect timeout if shorter). */
static int probe_server(void *arg, struct error_info *err)
{
	const struct nfs_volume *v = arg;
	uint64_t deadline = nfs_settings.connect_timeout_ms < NFS_SERVER_PROBE_MS
				    ? nfs_settings.connect_timeout_ms
				    : NFS_SERVER_PROBE_MS;
	uint64_t t0 = now_ms(), spent;
	int fd = -1, r = connect_within(v, deadline, &fd, err);

	if (r < 0)
		return r;
	spent = now_ms() - t0;
	return nfs_probe_null(fd, spent < deadline ? deadline - spent : 1, err);
}

/* The server's gate (server-health.h): begins op on v's server, running the probe when the
 * server is down and one is due.  Returns 0 (end op with server_health_end), or -errno with
 * err set: -EHOSTUNREACH while the server is down. */
int nfs_server_gate(const struct nfs_volume *v, struct server_health_op *op, struct error_info *err)
{
	char key[NFS_SERVER_MAX + 32], hp[NFS_SERVER_MAX + 16];

	nfs_volume_host_port(v, hp, sizeof(hp));
	snprintf(key, sizeof(key), "nfs server %s", hp);
	return server_health_gate(key, op, probe_server, (void *)v, err);
}
