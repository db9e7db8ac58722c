/* secret-watch.c - see secret-watch.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "secret-watch.h"

#define MAX_SEEN 4096

struct secret_watch {
	char *dir;
	char *secret;
	int fan_fd;
	int stop_pipe[2];
	pthread_t thread;
	pthread_mutex_t lock;
	/* Paths that held the secret, and every path read (for the counts). */
	char *found[16];
	unsigned found_mode[16]; /* st_mode & 07777 of each */
	size_t n_found;
	char *seen[MAX_SEEN];
	size_t n_seen;
};

/* Whether the file behind fd holds the secret anywhere (read from 0, whatever its size). */
static bool fd_holds(int fd, const char *secret)
{
	size_t slen = strlen(secret), have = 0, cap = 1 << 16;
	char *buf = malloc(cap);
	bool hit = false;
	ssize_t n;

	if (!buf)
		return false;
	for (off_t off = 0;; off += n) {
		if (have + 65536 > cap) {
			char *b = realloc(buf, cap * 2);
			if (!b)
				break;
			buf = b;
			cap *= 2;
		}
		n = pread(fd, buf + have, 65536, off);
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	hit = have >= slen && memmem(buf, have, secret, slen);
	free(buf);
	return hit;
}

static void note(struct secret_watch *w, int fd)
{
	char link[64], path[4096];
	ssize_t n;
	bool hit = fd_holds(fd, w->secret);

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n < 0)
		return;
	path[n] = '\0';
	pthread_mutex_lock(&w->lock);
	if (hit && w->n_found < sizeof(w->found) / sizeof(w->found[0])) {
		struct stat st;
		w->found_mode[w->n_found] = fstat(fd, &st) == 0 ? st.st_mode & 07777 : 0;
		w->found[w->n_found++] = strdup(path);
	}
	if (w->n_seen < MAX_SEEN)
		w->seen[w->n_seen++] = strdup(path);
	pthread_mutex_unlock(&w->lock);
}

static void *watch_thread(void *arg)
{
	struct secret_watch *w = arg;
	char buf[8192] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));

	for (;;) {
		struct pollfd p[2] = { { w->fan_fd, POLLIN, 0 }, { w->stop_pipe[0], POLLIN, 0 } };
		ssize_t len;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		len = read(w->fan_fd, buf, sizeof(buf));
		if (len <= 0)
			continue;
		for (struct fanotify_event_metadata *m = (void *)buf; FAN_EVENT_OK(m, len);
		     m = FAN_EVENT_NEXT(m, len)) {
			if (m->fd < 0)
				continue;
			note(w, m->fd);
			if (m->mask & FAN_OPEN_PERM) {
				struct fanotify_response r = { .fd = m->fd, .response = FAN_ALLOW };
				if (write(w->fan_fd, &r, sizeof(r)) < 0)
					perror("secret-watch: fanotify response");
			}
			close(m->fd);
		}
	}
	return NULL;
}

struct secret_watch *secret_watch_start(const char *dir, const char *secret)
{
	struct secret_watch *w = calloc(1, sizeof(*w));
	int e;

	if (!w)
		return NULL;
	w->fan_fd = -1;
	w->stop_pipe[0] = w->stop_pipe[1] = -1;
	pthread_mutex_init(&w->lock, NULL);
	w->dir = strdup(dir);
	w->secret = strdup(secret);
	if (!w->dir || !w->secret || mount(dir, dir, NULL, MS_BIND, NULL) < 0)
		goto fail;
	w->fan_fd = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC, O_RDONLY | O_LARGEFILE);
	if (w->fan_fd < 0 || pipe2(w->stop_pipe, O_CLOEXEC) < 0 ||
	    fanotify_mark(w->fan_fd, FAN_MARK_ADD | FAN_MARK_MOUNT, FAN_CLOSE_WRITE | FAN_OPEN_PERM,
			  AT_FDCWD, dir) < 0)
		goto fail_mounted;
	e = pthread_create(&w->thread, NULL, watch_thread, w);
	if (e) {
		errno = e;
		goto fail_mounted;
	}
	return w;
fail_mounted:
	e = errno;
	umount2(dir, MNT_DETACH);
	w->dir[0] = '\0';
	errno = e;
fail:
	e = errno;
	secret_watch_stop(w);
	errno = e;
	return NULL;
}

void secret_watch_stop(struct secret_watch *w)
{
	if (!w)
		return;
	if (w->stop_pipe[1] >= 0) {
		if (write(w->stop_pipe[1], "x", 1) == 1)
			pthread_join(w->thread, NULL);
	}
	/* Closing the group answers every pending permission event with "allow". */
	if (w->fan_fd >= 0)
		close(w->fan_fd);
	for (int i = 0; i < 2; i++)
		if (w->stop_pipe[i] >= 0)
			close(w->stop_pipe[i]);
	if (w->dir && w->dir[0])
		umount2(w->dir, MNT_DETACH);
	for (size_t i = 0; i < w->n_found; i++)
		free(w->found[i]);
	for (size_t i = 0; i < w->n_seen; i++)
		free(w->seen[i]);
	pthread_mutex_destroy(&w->lock);
	free(w->dir);
	free(w->secret);
	free(w);
}

static bool under(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);

	return !strncmp(path, prefix, n) && (path[n] == '/' || path[n] == '\0');
}

const char *secret_watch_found(struct secret_watch *w, const char *prefix, char *buf, size_t len,
			       unsigned *n_files, unsigned *ret_mode)
{
	const char *ret = NULL;
	unsigned n = 0;

	pthread_mutex_lock(&w->lock);
	for (size_t i = 0; i < w->n_found && !ret; i++)
		if (w->found[i] && under(w->found[i], prefix)) {
			snprintf(buf, len, "%s", w->found[i]);
			if (ret_mode)
				*ret_mode = w->found_mode[i];
			ret = buf;
		}
	for (size_t i = 0; i < w->n_seen; i++)
		n += w->seen[i] && under(w->seen[i], prefix);
	pthread_mutex_unlock(&w->lock);
	if (n_files)
		*n_files = n;
	return ret;
}
