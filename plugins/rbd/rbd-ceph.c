/* rbd-ceph.c - see rbd-ceph.h: the librados/librbd calls of the rbd plugin, made in the
 * `volagent rbd-helper` process only, through one table of function pointers filled by
 * dlsym() (systemd's pattern for optional libraries).  The sonames are also listed in an ELF
 * note, .note.dlopen (the format systemd uses), so that tools that derive a package list from
 * the binary (scripts/build-image) find libraries that ldd cannot see. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <rados/librados.h>
#include <rbd/librbd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlopen-note.h"
#include "macro.h"
#include "rbd-ceph.h"
#include "rbd-health.h"

DLOPEN_NOTE(rbd_dlopen_note,
	    "[{\"feature\":\"rbd\",\"description\":\"Ceph RBD volumes (volagent rbd-helper)\","
	    "\"priority\":\"recommended\",\"soname\":[\"" RBD_CEPH_LIBRADOS "\",\"" RBD_CEPH_LIBRBD
	    "\"]}]");

/* The symbols used, resolved by rbd_ceph_dlopen(); only calls through these appear below. */
#define SYM(name) static typeof(name) *sym_##name
SYM(rados_create2);
SYM(rados_conf_set);
SYM(rados_connect);
SYM(rados_shutdown);
SYM(rados_ioctx_create);
SYM(rados_ioctx_destroy);
SYM(rados_blocklist_add);
SYM(rbd_open_read_only);
SYM(rbd_watchers_list);
SYM(rbd_watchers_list_cleanup);
SYM(rbd_close);
#undef SYM

struct dl_sym {
	const char *name;
	void **ptr;
};
#define DL_SYM(name)                        \
	{                                   \
#name, (void **)&sym_##name \
	}

static const struct {
	const char *soname;
	struct dl_sym syms[8];
} dl_libs[] = {
	{ RBD_CEPH_LIBRADOS,
	  { DL_SYM(rados_create2), DL_SYM(rados_conf_set), DL_SYM(rados_connect),
	    DL_SYM(rados_shutdown), DL_SYM(rados_ioctx_create), DL_SYM(rados_ioctx_destroy),
	    DL_SYM(rados_blocklist_add) } },
	{ RBD_CEPH_LIBRBD,
	  { DL_SYM(rbd_open_read_only), DL_SYM(rbd_watchers_list),
	    DL_SYM(rbd_watchers_list_cleanup), DL_SYM(rbd_close) } },
};

static pthread_mutex_t dl_lock = PTHREAD_MUTEX_INITIALIZER;
static struct error_info dl_result = { .code = 1 }; /* 1: not tried yet */

static void dl_load(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(dl_libs); i++) {
		/* Never closed: librados keeps threads and atexit handlers of its own. */
		void *h = dlopen(dl_libs[i].soname, RTLD_NOW | RTLD_LOCAL);

		if (!h) {
			err_set(&dl_result, -EOPNOTSUPP,
				"cannot load %s (install the librbd1/librados2 packages): %s",
				dl_libs[i].soname, dlerror());
			return;
		}
		for (size_t j = 0; j < ARRAY_SIZE(dl_libs[i].syms) && dl_libs[i].syms[j].name;
		     j++) {
			*dl_libs[i].syms[j].ptr = dlsym(h, dl_libs[i].syms[j].name);
			if (!*dl_libs[i].syms[j].ptr) {
				err_set(&dl_result, -EOPNOTSUPP, "%s has no symbol %s: %s",
					dl_libs[i].soname, dl_libs[i].syms[j].name, dlerror());
				return;
			}
		}
	}
	dl_result.code = 0;
}

int rbd_ceph_dlopen(struct error_info *err)
{
	int r;

	pthread_mutex_lock(&dl_lock);
	if (dl_result.code == 1)
		dl_load();
	r = dl_result.code;
	if (r < 0 && err)
		*err = dl_result;
	pthread_mutex_unlock(&dl_lock);
	return r;
}

struct rbd_ceph {
	rados_t rados;
};

struct rbd_ceph *rbd_ceph_free(struct rbd_ceph *c)
{
	if (!c)
		return NULL;
	sym_rados_shutdown(c->rados);
	free(c);
	return NULL;
}

int rbd_ceph_connect(const struct rbd_credentials *cred, uint64_t timeout_ms, struct rbd_ceph **ret,
		     struct error_info *err)
{
	_cleanup_free_ char *name = strdup_printf("client.%s", cred->user);
	char secs[32];
	struct rbd_ceph *c;
	int r;

	r = rbd_ceph_dlopen(err);
	if (r < 0)
		return r;
	if (!name)
		return -ENOMEM;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	r = sym_rados_create2(&c->rados, "ceph", name, 0);
	if (r < 0) {
		free(c);
		return err_set(err, r, "cannot create a cluster handle: %s", strerror(-r));
	}
	snprintf(secs, sizeof(secs), "%llu", (unsigned long long)((timeout_ms + 999) / 1000));
	struct {
		const char *key, *value;
	} conf[] = {
		{ "mon_host", cred->monitors },
		{ "client_mount_timeout", secs },
		{ "rados_mon_op_timeout", secs },
		{ "rados_osd_op_timeout", secs },
		/* Our stderr is the agent's log: the library must not write there. */
		{ "log_to_stderr", "false" },
		{ "err_to_stderr", "false" },
		{ "log_file", "" },
		{ "keyring", cred->keyring },
		{ "keyfile", cred->keyfile },
		{ "key", cred->key },
	};
	for (size_t i = 0; i < ARRAY_SIZE(conf); i++) {
		if (!conf[i].value)
			continue;
		r = sym_rados_conf_set(c->rados, conf[i].key, conf[i].value);
		if (r < 0) {
			/* Never echo the value: it may be the key. */
			rbd_ceph_free(c);
			return err_set(err, r, "cannot set %s: %s", conf[i].key, strerror(-r));
		}
	}
	r = sym_rados_connect(c->rados);
	if (r < 0) {
		rbd_ceph_free(c);
		switch (-r) {
		case ETIMEDOUT:
		case EINTR:
			/* A monitor that refuses the key makes the client hunt until the timeout:
			 * tell that from a cluster that does not answer at all (the messenger's
			 * banner, rbd-health.h: the kernel accepts connections to a stopped
			 * monitor too). */
			if (rbd_health_probe(cred->monitors, RBD_HEALTH_PROBE_MS, NULL) == 0)
				return err_set(
					err, -EACCES,
					"authentication as client.%s failed: monitors %s answer "
					"but did not accept the key within %.1fs (wrong key, or "
					"the user does not exist)",
					cred->user, cred->monitors, (double)timeout_ms / 1000.0);
			return err_set(
				err, -ETIMEDOUT,
				"cluster unreachable: monitors %s did not answer within %.1fs",
				cred->monitors, (double)timeout_ms / 1000.0);
		case EACCES:
		case EPERM:
			return err_set(err, -EACCES,
				       "authentication as client.%s refused by monitors %s (wrong "
				       "key, or the user does not exist)",
				       cred->user, cred->monitors);
		case ENOENT:
			return err_set(err, -ENOENT,
				       "no key for client.%s (keyring %s, key file %s: missing or "
				       "without this user)",
				       cred->user, cred->keyring ? cred->keyring : "none",
				       cred->keyfile ? cred->keyfile : "none");
		default:
			return err_set(err, r, "cannot connect to monitors %s as client.%s: %s",
				       cred->monitors, cred->user, strerror(-r));
		}
	}
	*ret = c;
	return 0;
}

int rbd_ceph_watchers(struct rbd_ceph *c, const char *pool, const char *image,
		      struct rbd_watcher **ret, size_t *ret_n, struct error_info *err)
{
	rbd_image_watcher_t *w = NULL;
	struct rbd_watcher *out = NULL;
	rados_ioctx_t io;
	rbd_image_t img;
	size_t max = 8;
	int r;

	r = sym_rados_ioctx_create(c->rados, pool, &io);
	if (r == -ENOENT)
		return err_set(err, r, "pool \"%s\" does not exist", pool);
	if (r < 0)
		return err_set(err, r, "cannot open pool \"%s\": %s", pool, strerror(-r));
	r = sym_rbd_open_read_only(io, image, &img, NULL);
	if (r < 0) {
		sym_rados_ioctx_destroy(io);
		if (r == -ENOENT)
			return err_set(err, r, "image \"%s\" does not exist in pool \"%s\"", image,
				       pool);
		if (r == -EPERM || r == -EACCES)
			return err_set(err, r,
				       "not allowed to open image %s/%s (the user's osd caps?): %s",
				       pool, image, strerror(-r));
		return err_set(err, r, "cannot open image %s/%s: %s", pool, image, strerror(-r));
	}
	for (;;) {
		w = calloc(max, sizeof(*w));
		if (!w) {
			r = -ENOMEM;
			break;
		}
		r = sym_rbd_watchers_list(img, w, &max);
		if (r != -ERANGE)
			break;
		free(w);
		w = NULL;
	}
	if (r == 0) {
		out = calloc(max ? max : 1, sizeof(*out));
		if (!out)
			r = -ENOMEM;
		for (size_t i = 0; out && i < max; i++) {
			snprintf(out[i].addr, sizeof(out[i].addr), "%s", w[i].addr);
			out[i].id = w[i].id;
		}
		sym_rbd_watchers_list_cleanup(w, max);
	} else if (r != -ENOMEM) {
		err_set(err, r, "cannot list the watchers of %s/%s: %s", pool, image, strerror(-r));
	}
	free(w);
	sym_rbd_close(img);
	sym_rados_ioctx_destroy(io);
	if (r < 0)
		return r;
	*ret = out;
	*ret_n = max;
	return 0;
}

int rbd_ceph_blocklist(struct rbd_ceph *c, const char *addr, uint32_t expire_s,
		       struct error_info *err)
{
	_cleanup_free_ char *a = strdup(addr);
	int r;

	if (!a)
		return -ENOMEM;
	r = sym_rados_blocklist_add(c->rados, a, expire_s);
	if (r == -EACCES || r == -EPERM)
		return err_set(err, -EACCES,
			       "not allowed to blocklist %s (the user needs the \"osd blocklist\" "
			       "mon capability, e.g. profile rbd)",
			       addr);
	if (r < 0)
		return err_set(err, r, "cannot blocklist %s: %s", addr, strerror(-r));
	return 0;
}
