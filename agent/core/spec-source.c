/* spec-source.c - see spec-source.h.
 *
 * A scan (start-up, or an inotify queue overflow) parses the files on two threads at once,
 * the caller's and one helper, into one slot per file, and applies the results to the desired
 * state afterwards, on the caller's thread, in name order: parsing is independent of
 * everything else (spec_source_scan_begin() lets the caller read the mount table meanwhile),
 * the desired state is touched by one thread only. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "hashmap.h"
#include "log.h"
#include "macro.h"
#include "malloc-util.h"
#include "spec-source.h"
#include "spec-trust.h"

/* One file; its name lives in the same allocation. */
struct spec_file {
	char *uid;     /* the pod this file declares in the desired state, or NULL */
	bool rejected; /* its current content was rejected */
	bool conflict; /* rejected because another file has its uid: retried */
	char *error;   /* why it is rejected (NULL when it is not, or out of memory) */
	char name[];
};

/* One file of a scan: its name and what parsing it gave (small: there is one per file). */
struct scan_slot {
	char *name;
	struct pod_spec *spec;
	int r;
	bool untrusted; /* refused by spec-trust.h, not for its content */
	char *error;	/* the message when r < 0 (NULL: out of memory) */
};

/* A scan in progress: the slots are parsed by whoever takes the next index. */
struct spec_scan {
	struct scan_slot *slots;
	size_t n;
	atomic_size_t next;
	int dir_fd;
	const char *dir;
	bool insecure;	       /* --insecure-pods-dir: files are not checked */
	const char *dir_error; /* the pods dir is not trusted: every file is refused with it */
	pthread_t helper;
	bool helper_started;
};

struct spec_source {
	char *dir;
	int dir_fd; /* the pods dir (O_PATH): files are opened relative to it */
	bool insecure;
	/* Why the pods dir is not trusted, "" when it is: checked at each scan and each batch of
	 * events, so that a dir made unsafe later refuses what is written in it from then on. */
	char dir_error[sizeof(((struct error_info *)0)->msg)];
	int fd;
	int wd;
	struct spec_scan *scan;
	struct desired_state *dsw;
	struct hashmap *files; /* name -> spec_file */
	/* The file that declares each pod is the owner of its pod in the desired state
	 * (dsw_pod_owner): no map of its own. */
	size_t n_conflicts; /* files with conflict set */
};

bool spec_source_wants_name(const char *name)
{
	return name[0] != '.' && endswith(name, ".json") && strlen(name) > strlen(".json");
}

static void file_free(void *p)
{
	struct spec_file *f = p;

	free(f->uid);
	free(f->error);
	free(f);
}

/* Reads file name of the pods dir into ret when it is trusted (spec-trust.h).  *untrusted
 * tells a refusal for who could have written it from one for what it says. */
static int parse_trusted(int dir_fd, const char *dir, bool insecure, const char *dir_error,
			 const char *name, const char *path, struct pod_spec **ret, bool *untrusted,
			 struct error_info *err)
{
	_cleanup_close_ int fd = -1;

	*untrusted = false;
	if (insecure)
		return pod_spec_parse_at(dir_fd, name, path, ret, err);
	if (dir_error && *dir_error) {
		*untrusted = true;
		return err_set(err, -EPERM, "pods dir: %s", dir_error);
	}
	fd = spec_trust_open(dir_fd, dir, name, err);
	if (fd < 0) {
		*untrusted = fd == -EPERM;
		return fd;
	}
	return pod_spec_parse_fd(fd, path, ret, err);
}

static void scan_parse(struct spec_scan *sc)
{
	struct error_info err;

	for (;;) {
		size_t i = atomic_fetch_add(&sc->next, 1);
		struct scan_slot *sl;
		char path[PATH_MAX];

		if (i >= sc->n)
			return;
		sl = &sc->slots[i];
		snprintf(path, sizeof(path), "%s/%s", sc->dir, sl->name);
		err = (struct error_info){ 0 };
		sl->r = parse_trusted(sc->dir_fd, sc->dir, sc->insecure, sc->dir_error, sl->name,
				      path, &sl->spec, &sl->untrusted, &err);
		if (sl->r < 0) {
			sl->error = strdup(err_msg(&err));
			continue;
		}
		/* The stat the desired state would make per volume, made here in parallel. */
		for (size_t k = 0; k < sl->spec->n_volumes; k++) {
			struct pod_volume *v = &sl->spec->volumes[k];

			v->uses_device = plugin_uses_device(v->plugin, v->spec);
			v->uses_device_known = true;
		}
	}
}

/* What parsing allocates per spec file (the parsed spec and its strings: about 480 bytes for
 * a one-volume pod, measured at 10,000 files); a little less, as the reserved pages are
 * faulted in and what is left over would stay resident. */
#define SCAN_BYTES_PER_FILE 448

static void *scan_helper(void *arg)
{
	struct spec_scan *sc = arg;

	(void)pthread_setname_np(pthread_self(), "spec-scan");
	/* A new thread's arena, made room for in a few steps, not one mprotect per page. */
	malloc_reserve(sc->n * SCAN_BYTES_PER_FILE);
	scan_parse(sc);
	return NULL;
}

/* Waits for the helper (parsing what is left meanwhile) and frees the scan. */
static void scan_free(struct spec_scan *sc)
{
	if (!sc)
		return;
	scan_parse(sc);
	if (sc->helper_started)
		pthread_join(sc->helper, NULL);
	for (size_t i = 0; i < sc->n; i++) {
		free(sc->slots[i].name);
		free(sc->slots[i].error);
		pod_spec_free(sc->slots[i].spec);
	}
	free(sc->slots);
	free(sc);
}

/* Checks the pods dir again; logs when its trust changes. */
static void check_dir(struct spec_source *s)
{
	struct error_info err = { 0 };
	bool was = !s->dir_error[0];

	if (s->insecure)
		return;
	if (spec_trust_check_dir(s->dir, &err) == 0) {
		s->dir_error[0] = '\0';
		if (!was)
			log_info("pods dir is safe again: its spec files are read", "dir", s->dir);
		return;
	}
	if (!was && streq(s->dir_error, err_msg(&err)))
		return;
	snprintf(s->dir_error, sizeof(s->dir_error), "%s", err_msg(&err));
	log_error("pods dir is not safe: its spec files are refused until only root can write "
		  "it and the directories above it",
		  "dir", s->dir, "reason", s->dir_error);
}

int spec_source_new(const char *pods_dir, bool insecure, struct desired_state *dsw,
		    struct spec_source **ret, struct error_info *err)
{
	struct spec_source *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->fd = -1;
	s->dir_fd = -1;
	s->dsw = dsw;
	s->insecure = insecure;
	s->dir = strdup(pods_dir);
	s->files = hashmap_new();
	if (!s->dir || !s->files) {
		spec_source_free(s);
		return -ENOMEM;
	}
	s->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (s->fd < 0) {
		int r = -errno;
		spec_source_free(s);
		return err_set(err, r, "inotify: %s", strerror(-r));
	}
	s->dir_fd = open(pods_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (s->dir_fd < 0) {
		int r = -errno;
		spec_source_free(s);
		return err_set(err, r, "pods dir %s: %s", pods_dir, strerror(-r));
	}
	s->wd = inotify_add_watch(s->fd, pods_dir,
				  IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE |
					  IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR);
	if (s->wd < 0) {
		int r = -errno;
		spec_source_free(s);
		return err_set(err, r, "watching pods dir %s: %s", pods_dir, strerror(-r));
	}
	if (insecure)
		log_warning("--insecure-pods-dir: spec files are believed whoever wrote them (for "
			    "tests only)",
			    "dir", pods_dir);
	check_dir(s);
	*ret = s;
	return 0;
}

struct spec_source *spec_source_free(struct spec_source *s)
{
	if (!s)
		return NULL;
	scan_free(s->scan);
	hashmap_free_values(s->files, file_free);
	if (s->fd >= 0)
		close(s->fd);
	if (s->dir_fd >= 0)
		close(s->dir_fd);
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
	f = calloc(1, sizeof(*f) + strlen(name) + 1);
	if (!f)
		return NULL;
	strcpy(f->name, name);
	if (hashmap_put(s->files, f->name, f) < 0) {
		file_free(f);
		return NULL;
	}
	return f;
}

static void set_conflict(struct spec_source *s, struct spec_file *f, bool conflict)
{
	if (f->conflict != conflict)
		s->n_conflicts += conflict ? 1 : (size_t)-1;
	f->conflict = conflict;
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
	dsw_remove_pod(s->dsw, f->uid);
	log_info("pod spec removed", "file", f->name, "pod", f->uid);
	free(f->uid);
	f->uid = NULL;
	return true;
}

/* What a scan loaded, for its one summary line. */
struct load_stats {
	unsigned files, volumes, refused;
};

/* "<dir>/<name>" in path (PATH_MAX bytes), for a log line: made only when one is written. */
static const char *file_path(const struct spec_source *s, const char *name, char *path)
{
	snprintf(path, PATH_MAX, "%s/%s", s->dir, name);
	return path;
}

/* Applies what parsing file name gave (r, p, err): into the desired state, or logged as
 * rejected.  Takes p.  quiet logs a loaded file at debug only (a scan logs a summary).
 * Returns true when the desired state changed. */
static bool apply_file(struct spec_source *s, const char *name, int r, bool untrusted,
		       struct pod_spec *p, struct error_info *err, bool quiet,
		       struct load_stats *stats)
{
	_cleanup_(pod_spec_freep) struct pod_spec *spec = p;
	struct spec_file *f = get_file(s, name), *owner;
	char path[PATH_MAX];

	if (!f)
		return false;
	set_conflict(s, f, false);
	if (r == -ENOENT) /* gone again before we read it */
		return false;
	if (stats)
		stats->files++;
	if (r < 0)
		goto rejected;
	owner = dsw_pod_owner(s->dsw, spec->uid);
	if (owner && owner != f) {
		set_conflict(s, f, true);
		err_set(err, -EEXIST, "pod.uid: %s is already declared by %s", spec->uid,
			owner->name);
		goto rejected;
	}
	/* The file now declares another pod: the old one goes. */
	if (f->uid && !streq(f->uid, spec->uid))
		forget_pod(s, f);
	r = dsw_set_pod(s->dsw, spec, err);
	if (r < 0)
		goto rejected;
	f->rejected = false;
	free(f->error);
	f->error = NULL;
	if (!f->uid)
		f->uid = strdup(spec->uid);
	/* Out of memory: no owner, so that nothing points at f once it goes. */
	(void)dsw_pod_set_owner(s->dsw, spec->uid, f->uid ? f : NULL);
	if (stats)
		stats->volumes += spec->n_volumes;
	if (quiet)
		log_debug("specs", "pod spec loaded", "file", file_path(s, name, path), "pod",
			  spec->uid, "volumes", LOG_INT(spec->n_volumes));
	else
		log_info("pod spec loaded", "file", file_path(s, name, path), "pod", spec->uid,
			 "volumes", LOG_INT(spec->n_volumes));
	return true;
rejected:
	/* A file refused for who could have written it is logged once, not at every scan. */
	if (!(untrusted && f->rejected && f->error && streq(f->error, err_msg(err))))
		log_rejected(file_path(s, name, path), err_msg(err), f->uid != NULL);
	f->rejected = true;
	free(f->error);
	f->error = strdup(err_msg(err));
	if (stats)
		stats->refused++;
	return false;
}

/* Reads file name and applies it.  Returns true when the desired state changed. */
static bool load_file(struct spec_source *s, const char *name)
{
	struct error_info err = { 0 };
	struct pod_spec *p = NULL;
	char path[PATH_MAX];
	bool untrusted;
	int r;

	snprintf(path, sizeof(path), "%s/%s", s->dir, name);
	r = parse_trusted(s->dir_fd, s->dir, s->insecure, s->dir_error, name, path, &p, &untrusted,
			  &err);
	return apply_file(s, name, r, untrusted, p, &err, false, NULL);
}

static bool remove_file(struct spec_source *s, const char *name)
{
	struct spec_file *f = hashmap_remove(s->files, name);
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	bool changed;
	void *v;

	if (!f)
		return false;
	set_conflict(s, f, false);
	changed = forget_pod(s, f);
	file_free(f);
	/* A file rejected for claiming this uid may be acceptable now (looked for only when
	 * there is one: removing a burst of files is not quadratic). */
	while (changed && s->n_conflicts && hashmap_iterate(s->files, &it, &v, NULL)) {
		struct spec_file *other = v;
		if (other->conflict)
			load_file(s, other->name);
	}
	return changed;
}

static int compare_slots(const void *a, const void *b)
{
	return strcmp(((const struct scan_slot *)a)->name, ((const struct scan_slot *)b)->name);
}

static bool scan_has(const struct spec_scan *sc, const char *name)
{
	struct scan_slot key = { .name = (char *)name };

	return sc->n > 0 && bsearch(&key, sc->slots, sc->n, sizeof(*sc->slots), compare_slots);
}

/* Below this many files a helper thread costs more than it saves. */
#define SCAN_HELPER_MIN 64

int spec_source_scan_begin(struct spec_source *s)
{
	struct spec_scan *sc;
	struct dirent *de;
	size_t cap = 0;
	int dfd, r = 0;
	DIR *d;

	if (s->scan)
		return -EBUSY;
	dfd = openat(s->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	d = fdopendir(dfd);
	if (!d) {
		r = -errno;
		close(dfd);
		return r;
	}
	sc = calloc(1, sizeof(*sc));
	if (!sc) {
		closedir(d);
		return -ENOMEM;
	}
	check_dir(s);
	sc->dir_fd = s->dir_fd;
	sc->dir = s->dir;
	sc->insecure = s->insecure;
	sc->dir_error = s->dir_error;
	while ((de = readdir(d))) {
		if (!spec_source_wants_name(de->d_name))
			continue;
		if (sc->n == cap) {
			struct scan_slot *ns =
				realloc(sc->slots, (cap = cap ? cap * 2 : 64) * sizeof(*ns));
			if (!ns) {
				r = -ENOMEM;
				break;
			}
			sc->slots = ns;
		}
		sc->slots[sc->n] = (struct scan_slot){ .name = strdup(de->d_name) };
		if (!sc->slots[sc->n].name) {
			r = -ENOMEM;
			break;
		}
		sc->n++;
	}
	closedir(d);
	if (r < 0) {
		scan_free(sc);
		return r;
	}
	/* In name order, so that which of two files claiming one uid wins is predictable. */
	if (sc->n > 0)
		qsort(sc->slots, sc->n, sizeof(*sc->slots), compare_slots);
	s->scan = sc;
	/* Without the helper the caller parses everything in spec_source_scan_finish(). */
	if (sc->n >= SCAN_HELPER_MIN) {
		sigset_t all, old;

		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		sc->helper_started = pthread_create(&sc->helper, NULL, scan_helper, sc) == 0;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	return 0;
}

int spec_source_scan_finish(struct spec_source *s)
{
	struct spec_scan *sc = s->scan;
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	struct load_stats stats = { 0 };
	int changed = 0;
	void *v;

	if (!sc)
		return -EINVAL;
	scan_parse(sc); /* help the helper with what is left */
	if (sc->helper_started)
		pthread_join(sc->helper, NULL);
	sc->helper_started = false;
	/* Files that are gone. */
	while (hashmap_iterate(s->files, &it, &v, NULL)) {
		struct spec_file *f = v;
		if (!scan_has(sc, f->name) && remove_file(s, f->name))
			changed = 1;
	}
	/* The first scan: room for every file and what it declares, so that the indexes are
	 * not rebuilt over and over while they fill. */
	if (hashmap_size(s->files) == 0) {
		size_t n_volumes = 0;

		for (size_t i = 0; i < sc->n; i++)
			if (sc->slots[i].spec)
				n_volumes += sc->slots[i].spec->n_volumes;
		(void)hashmap_reserve(s->files, sc->n);
		(void)dsw_reserve(s->dsw, sc->n, n_volumes);
	}
	for (size_t i = 0; i < sc->n; i++) {
		struct scan_slot *sl = &sc->slots[i];

		struct error_info err = { .code = sl->r };

		if (sl->r < 0)
			snprintf(err.msg, sizeof(err.msg), "%s",
				 sl->error ? sl->error : strerror(-sl->r));
		else
			err.msg[0] = '\0';
		if (apply_file(s, sl->name, sl->r, sl->untrusted, TAKE_PTR(sl->spec), &err, true,
			       &stats))
			changed = 1;
	}
	log_info("loaded pod spec files", "dir", s->dir, "files", LOG_INT(stats.files), "volumes",
		 LOG_INT(stats.volumes), "refused", LOG_INT(stats.refused));
	s->scan = NULL;
	scan_free(sc);
	return changed;
}

int spec_source_scan(struct spec_source *s)
{
	int r = spec_source_scan_begin(s);

	return r < 0 ? r : spec_source_scan_finish(s);
}

/* One read of at most this many bytes per call: some tens of files (events of names up to 32
 * bytes take 48 bytes each; longer names make fewer), so that a burst of files is handed to
 * the pass, and from it to the workers, in batches instead of after the last file is parsed.
 * The rest stays queued in the kernel, in order, and the fd readable.  It holds at least one
 * event of the longest name. */
#ifndef SPEC_SOURCE_BATCH_BYTES
#define SPEC_SOURCE_BATCH_BYTES 2048
#endif

int spec_source_dispatch(struct spec_source *s)
{
	char buf[SPEC_SOURCE_BATCH_BYTES]
		__attribute__((aligned(__alignof__(struct inotify_event))));
	int changed = 0;
	ssize_t len;

	static_assert(sizeof(buf) >= sizeof(struct inotify_event) + NAME_MAX + 1,
		      "a read must hold any one event");
	do
		len = read(s->fd, buf, sizeof(buf));
	while (len < 0 && errno == EINTR);
	if (len < 0)
		return errno == EAGAIN ? 0 : -errno;
	if (len > 0)
		check_dir(s);
	for (char *p = buf; p < buf + len;) {
		const struct inotify_event *ev = (const struct inotify_event *)p;

		p += sizeof(*ev) + ev->len;
		if (ev->mask & IN_Q_OVERFLOW) {
			log_warning("pods dir event queue overflowed, rescanning", "dir", s->dir);
			if (spec_source_scan(s) > 0)
				changed = 1;
			continue;
		}
		if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
			log_error("pods dir was removed or moved; keeping the current desired state",
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
	return changed;
}

bool spec_source_next_rejected(const struct spec_source *s, struct hashmap_iter *it,
			       const char **ret_name, const char **ret_reason)
{
	void *v;

	while (hashmap_iterate(s->files, it, &v, NULL)) {
		const struct spec_file *f = v;

		if (!f->rejected)
			continue;
		*ret_name = f->name;
		*ret_reason = f->error ? f->error : "out of memory";
		return true;
	}
	return false;
}

const char *spec_source_dir(const struct spec_source *s)
{
	return s->dir;
}

const char *spec_source_dir_error(const struct spec_source *s)
{
	return s->dir_error[0] ? s->dir_error : NULL;
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
