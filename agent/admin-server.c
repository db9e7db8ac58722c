/* admin-server.c - see admin-server.h.  One thread accepts; the snapshot is built by the
 * reconciler thread (reconciler_request) and written here, so a slow reader never holds up
 * the reconciler. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "admin-server.h"
#include "file-util.h"
#include "log.h"
#include "macro.h"
#include "server-thread.h"
#include "unix-socket.h"

struct admin_server {
	int listen_fd;
	struct server_thread thread;
	char *path;
	bool grouped;
	gid_t gid;
	struct reconciler *r;
};

/* Root, or the socket's group: the file mode already says so, the credentials confirm it. */
static bool peer_allowed(const struct admin_server *s, int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return false;
	return cred.uid == 0 || (s->grouped && cred.gid == s->gid);
}

static void serve(struct admin_server *s, int fd)
{
	struct volume_request *req = volume_request_new(VOLUME_REQUEST_STATUS);
	struct volume_request_result res = { 0 };
	struct timeval tv = { 5, 0 };

	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (!peer_allowed(s, fd)) {
		static const char refused[] = "{\"error\": \"permission denied: root or the admin "
					      "socket's group only\"}\n";
		(void)fd_write_all(fd, refused, strlen(refused));
		volume_request_free(req);
		return;
	}
	if (!req || reconciler_request(s->r, req, 5000, &res) < 0 || !res.status_json) {
		static const char busy[] =
			"{\"error\": \"the reconciler did not answer in 5 s\"}\n";
		(void)fd_write_all(fd, busy, strlen(busy));
		return;
	}
	(void)fd_write_all(fd, res.status_json, strlen(res.status_json));
	(void)fd_write_all(fd, "\n", 1);
	free(res.status_json);
}

static void *admin_main(void *arg)
{
	struct admin_server *s = arg;

	(void)pthread_setname_np(pthread_self(), "admin");
	for (;;) {
		struct pollfd p[2] = { { s->listen_fd, POLLIN, 0 },
				       { s->thread.stop_fd, POLLIN, 0 } };
		int fd;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		serve(s, fd);
		close(fd);
	}
	return NULL;
}

int admin_server_start(const char *path, const char *group, struct reconciler *r,
		       struct admin_server **ret, struct error_info *err)
{
	struct admin_server *s = calloc(1, sizeof(*s));
	int k;

	if (!s)
		return -ENOMEM;
	s->listen_fd = -1;
	s->r = r;
	s->path = strdup(path);
	s->grouped = group && *group;
	if (!s->path || (s->grouped && unix_socket_group_gid(group, &s->gid) < 0)) {
		admin_server_free(s);
		return err_set(err, -EINVAL, "admin socket group \"%s\": no such group",
			       group ? group : "");
	}
	s->listen_fd = unix_socket_listen(path, group, err);
	if (s->listen_fd < 0) {
		k = s->listen_fd;
		admin_server_free(s);
		err_prefix(err, "admin socket");
		return k;
	}
	k = server_thread_open(&s->thread, 0);
	if (k == 0)
		k = server_thread_start(&s->thread, admin_main, s);
	if (k < 0) {
		admin_server_free(s);
		return err_set(err, k, "admin socket: %s", strerror(-k));
	}
	*ret = s;
	return 0;
}

struct admin_server *admin_server_free(struct admin_server *s)
{
	if (!s)
		return NULL;
	server_thread_close(&s->thread);
	if (s->listen_fd >= 0) {
		close(s->listen_fd);
		unlink(s->path);
	}
	free(s->path);
	free(s);
	return NULL;
}
