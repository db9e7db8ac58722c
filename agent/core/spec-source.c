/* spec-source.c - see spec-source.h. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "hashmap.h"
#include "log.h"
#include "macro.h"
#include "spec-source.h"

struct spec_file {
	char *name;
	char *uid;     /* the pod this file declares in the desired state, or NULL */
	bool rejected; /* its current content was rejected */
	bool conflict; /* rejected because another file has its uid: retried */
};

struct spec_source {
	char *dir;
	int fd;
	int wd;
	struct desired_state *dsw;
	struct hashmap *files;	/* name -> spec_file */
	struct hashmap *owners; /* uid -> spec_file */
};

bool spec_source_wants_name(const char *name)
{
	return name[0] != '.' && endswith(name, ".json") && strlen(name) > strlen(".json");
}

static void file_free(void *p)
{
	struct spec_file *f = p;

	free(f->name);
	free(f->uid);
	free(f);
}

int spec_source_new(const char *pods_dir, struct desired_state *dsw, struct spec_source **ret,
		    struct error_info *err)
{
	struct spec_source *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->fd = -1;
	s->dsw = dsw;
	s->dir = strdup(pods_dir);
	s->files = hashmap_new();
	s->owners = hashmap_new();
	if (!s->dir || !s->files || !s->owners) {
		spec_source_free(s);
		return -ENOMEM;
	}
	s->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (s->fd < 0) {
		int r = -errno;
		spec_source_free(s);
		return err_set(err, r, "inotify: %s", strerror(-r));
	}
	s->wd = inotify_add_watch(s->fd, pods_dir,
				  IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE |
					  IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR);
	if (s->wd < 0) {
		int r = -errno;
		spec_source_free(s);
		return err_set(err, r, "watching pods dir %s: %s", pods_dir, strerror(-r));
	}
	*ret = s;
	return 0;
}

struct spec_source *spec_source_free(struct spec_source *s)
{
	if (!s)
		return NULL;
	hashmap_free_values(s->files, file_free);
	hashmap_free(s->owners);
	if (s->fd >= 0)
		close(s->fd);
	free(s->dir);
	free(s);
	return NULL;
}

int spec_source_get_fd(const struct spec_source *s)
{
	return s->fd;
}

static struct spec_file *get_file(struct spec_source *s, const char *name)
{
	struct spec_file *f = hashmap_get(s->files, name);

	if (f)
		return f;
	f = calloc(1, sizeof(*f));
	if (!f || !(f->name = strdup(name)) || hashmap_put(s->files, f->name, f) < 0) {
		if (f)
			file_free(f);
		return NULL;
	}
	return f;
}

/* Logs a rejection: the file, the field and the reason, split at the first ": ". */
static void log_rejected(const char *path, const char *msg, bool kept)
{
	char field[128] = "";
	const char *reason = msg, *sep = strstr(msg, ": ");

	if (sep && (size_t)(sep - msg) < sizeof(field)) {
		memcpy(field, msg, (size_t)(sep - msg));
		field[sep - msg] = '\0';
		reason = sep + 2;
	}
	log_error("rejected pod spec file", "file", path, "field", field, "reason", reason,
		  "previous", kept ? "kept" : "none");
}

/* Drops what file f declared from the desired state. */
static bool forget_pod(struct spec_source *s, struct spec_file *f)
{
	if (!f->uid)
		return false;
	hashmap_remove(s->owners, f->uid);
	dsw_remove_pod(s->dsw, f->uid);
	log_info("pod spec removed", "file", f->name, "pod", f->uid);
	free(f->uid);
	f->uid = NULL;
	return true;
}

/* Reads file name and applies it.  Returns true when the desired state changed. */
static bool load_file(struct spec_source *s, const char *name)
{
	struct spec_file *f = get_file(s, name), *owner;
	struct error_info err = { 0 };
	struct pod_spec *p = NULL;
	char path[PATH_MAX];
	int r;

	if (!f)
		return false;
	snprintf(path, sizeof(path), "%s/%s", s->dir, name);
	f->conflict = false;
	r = pod_spec_parse_file(path, &p, &err);
	if (r == -ENOENT) /* gone again before we read it */
		return false;
	if (r < 0) {
		f->rejected = true;
		log_rejected(path, err_msg(&err), f->uid != NULL);
		return false;
	}
	owner = hashmap_get(s->owners, p->uid);
	if (owner && owner != f) {
		f->rejected = f->conflict = true;
		err_set(&err, -EEXIST, "pod.uid: %s is already declared by %s", p->uid,
			owner->name);
		log_rejected(path, err_msg(&err), f->uid != NULL);
		pod_spec_free(p);
		return false;
	}
	/* The file now declares another pod: the old one goes. */
	if (f->uid && !streq(f->uid, p->uid))
		forget_pod(s, f);
	r = dsw_set_pod(s->dsw, p, &err);
	if (r < 0) {
		f->rejected = true;
		log_rejected(path, err_msg(&err), f->uid != NULL);
		pod_spec_free(p);
		return false;
	}
	f->rejected = false;
	if (!f->uid) {
		f->uid = strdup(p->uid);
		if (f->uid)
			hashmap_put(s->owners, f->uid, f);
	}
	log_info("pod spec loaded", "file", path, "pod", p->uid, "volumes", LOG_INT(p->n_volumes));
	pod_spec_free(p);
	return true;
}

static bool remove_file(struct spec_source *s, const char *name)
{
	struct spec_file *f = hashmap_remove(s->files, name);
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	bool changed;
	void *v;

	if (!f)
		return false;
	changed = forget_pod(s, f);
	file_free(f);
	/* A file rejected for claiming this uid may be acceptable now. */
	while (changed && hashmap_iterate(s->files, &it, &v, NULL)) {
		struct spec_file *other = v;
		if (other->conflict)
			load_file(s, other->name);
	}
	return changed;
}

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int spec_source_scan(struct spec_source *s)
{
	DIR *d = opendir(s->dir);
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	int changed = 0;
	void *v;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (!spec_source_wants_name(de->d_name))
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof(char *));
			if (!nn)
				break;
			names = nn;
		}
		names[n] = strdup(de->d_name);
		if (names[n])
			n++;
	}
	closedir(d);
	/* Files that are gone. */
	while (hashmap_iterate(s->files, &it, &v, NULL)) {
		struct spec_file *f = v;
		bool present = false;
		for (size_t i = 0; i < n && !present; i++)
			present = streq(names[i], f->name);
		if (!present && remove_file(s, f->name))
			changed = 1;
	}
	/* In name order, so that which of two files claiming one uid wins is predictable. */
	if (n > 0)
		qsort(names, n, sizeof(char *), compare_names);
	for (size_t i = 0; i < n; i++) {
		if (load_file(s, names[i]))
			changed = 1;
		free(names[i]);
	}
	free(names);
	return changed;
}

int spec_source_dispatch(struct spec_source *s)
{
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	int changed = 0;

	for (;;) {
		ssize_t len = read(s->fd, buf, sizeof(buf));

		if (len < 0) {
			if (errno == EAGAIN)
				break;
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (char *p = buf; p < buf + len;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;

			p += sizeof(*ev) + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				log_warning("pods dir event queue overflowed, rescanning", "dir",
					    s->dir);
				if (spec_source_scan(s) > 0)
					changed = 1;
				continue;
			}
			if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
				log_error("pods dir was removed or moved; keeping the current "
					  "desired state",
					  "dir", s->dir);
				continue;
			}
			if (!ev->len || !spec_source_wants_name(ev->name))
				continue;
			if (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO)) {
				if (load_file(s, ev->name))
					changed = 1;
			} else if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) {
				if (remove_file(s, ev->name))
					changed = 1;
			}
		}
	}
	return changed;
}

unsigned spec_source_rejected_count(const struct spec_source *s)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	unsigned n = 0;
	void *v;

	while (hashmap_iterate(s->files, &it, &v, NULL))
		n += ((struct spec_file *)v)->rejected;
	return n;
}
