/* unix-socket.c - see unix-socket.h. */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "macro.h"
#include "unix-socket.h"

int unix_socket_group_gid(const char *group, gid_t *ret)
{
	struct group gr, *res = NULL;
	char buf[4096], *end;
	unsigned long v;

	errno = 0;
	v = strtoul(group, &end, 10);
	if (*group && !*end && errno == 0) {
		*ret = (gid_t)v;
		return 0;
	}
	if (getgrnam_r(group, &gr, buf, sizeof(buf), &res) != 0 || !res)
		return -ENOENT;
	*ret = res->gr_gid;
	return 0;
}

int unix_socket_listen(const char *path, const char *group, struct error_info *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = -1;
	bool grouped = group && *group;
	gid_t gid = 0;
	struct stat st;
	mode_t old;
	int r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return err_set(err, -ENAMETOOLONG, "%s: longer than a unix socket path may be",
			       path);
	if (grouped && unix_socket_group_gid(group, &gid) < 0)
		return err_set(err, -ENOENT, "socket group \"%s\": no such group", group);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return err_set(err, -EEXIST,
				       "%s exists and is not a socket; not touching it", path);
		unlink(path); /* stale: the instance lock says no other agent runs */
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_set(err, -errno, "socket: %s", strerror(errno));
	old = umask(0177); /* never exists with looser permissions */
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0)
		return err_set(err, -errno, "bind %s: %s", path, strerror(errno));
	if (grouped && (chown(path, 0, gid) < 0 || chmod(path, 0660) < 0))
		return err_set(err, -errno, "%s: setting group %s: %s", path, group,
			       strerror(errno));
	if (listen(fd, 64) < 0)
		return err_set(err, -errno, "listen %s: %s", path, strerror(errno));
	return TAKE_FD(fd);
}
