/* rbd.c - the "rbd" plugin: a Ceph RBD image, attached once per node as a block device,
 * formatted when blank, mounted at its node-wide path and bind-mounted into each pod.
 *
 * Spec keys are the Kubernetes RBD volume's: monitors, pool (rbd), image, user (admin),
 * keyring (/etc/ceph/keyring when no other credential is given) or secretFile, fsType (ext4),
 * readOnly.  From CSI the same keys come in volume_context, and the key may come in the
 * secrets as userKey (with userID overriding user), as ceph-csi names them.
 *
 * Attaching (rbd-attach.c) tries the configured methods in order (krbd, nbd, fuse by
 * default).  Before a read-write attach, the image's watchers are read through librbd
 * (rbd-cluster.c, side-effect free): a client other than ours means another node has the
 * image, and the attach is refused (-EBUSY) until it is gone.  What an attach made is kept
 * both in the core's journal (the attachment meta) and in a record file of our own under the
 * run dir, <run_dir>/<escaped volume name>.rec, which lets attach adopt an attachment a crash
 * left unrecorded, lets the health check find the helper process, and tells our own
 * watchers from other clients' after a restart.  Clients of ours that died are fenced
 * (blocklisted) when the credentials allow it, and remembered in <run_dir>/released so that
 * their lingering watchers do not block re-attaching. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "crypt-volume.h"
#include "mount-options.h"
#include "device-fs.h"
#include "log.h"
#include "macro.h"
#include "mount-util.h"
#include "path-util.h"
#include "plugin-option.h"
#include "bind-util.h"
#include "block-map.h"
#include "block-volume.h"
#include "plugin.h"
#include "rbd-attach.h"
#include "rbd-cluster.h"
#include "rbd-health.h"
#include "rbd-util.h"

#define DEFAULT_POOL "rbd"
#define DEFAULT_USER "admin"
#define DEFAULT_KEYRING "/etc/ceph/keyring"
#define DEFAULT_FSTYPE "ext4"
#define DEFAULT_STATE_DIR "/var/lib/volagent/state" /* until the agent says (tests) */
#define DEFAULT_SECRET_DIR "/run/volagent"	    /* likewise */
/* How long a dead client of ours is remembered: its watcher lingers ~30 s unless fenced. */
#define RELEASED_MAX_AGE_S 600
#define BLOCKLIST_EXPIRE_S 3600

static const char *const spec_keys[] = {
	"monitors", "pool", "image", "user", "keyring", "secretFile", "fsType",
};

static bool rbd_can_support(const struct volume_spec *spec)
{
	return streq(spec->type, "rbd");
}

static const char *pool_of(const struct volume_spec *spec)
{
	const char *pool = volume_spec_get(spec, "pool");

	return pool && *pool ? pool : DEFAULT_POOL;
}

/* A pool or image name as rbd takes it in "pool/image" (no '/', no '@' of a snapshot), and
 * never one a helper's command line could read as an option (a leading '-': rbd-nbd and
 * rbd-fuse take no "--" before it) or a path could read as a dir ("." and "..": rbd-fuse
 * shows the image as a file of that name; Ceph itself accepts both). */
static bool valid_name(const char *s)
{
	if (!*s || s[0] == '-' || strlen(s) > 255 || strchr(s, '/') || strchr(s, '@') ||
	    streq(s, ".") || streq(s, ".."))
		return false;
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c < 0x21 || *c == 0x7f)
			return false;
	return true;
}

static int rbd_validate(const struct volume_spec *spec, struct error_info *err)
{
	const char *mons = volume_spec_get(spec, "monitors");
	const char *image = volume_spec_get(spec, "image");
	const char *user = volume_spec_get(spec, "user");

	for (size_t i = 0; i < spec->n_attrs; i++) {
		const char *k = spec->attrs[i].key;
		bool known = false;
		for (size_t j = 0; j < ARRAY_SIZE(spec_keys); j++)
			known = known || streq(k, spec_keys[j]);
		/* CSI adds context keys of its own, all with a '/': csi.storage.k8s.io/... */
		if (known || strchr(k, '/') || crypt_volume_is_attr(k))
			continue;
		if (startswith(k, "secretRef"))
			return err_set(err, -EINVAL,
				       "%s: not supported (no API server here); use keyring or "
				       "secretFile, or the CSI secret userKey",
				       k);
		return err_set(err, -EINVAL,
			       "%s: unknown field (rbd takes monitors, pool, image, user, keyring, "
			       "secretFile, fsType, readOnly, encrypted)",
			       k);
	}
	if (crypt_volume_validate(spec, err) < 0)
		return err->code;
	if (!mons || !*mons)
		return err_set(err, -EINVAL, "monitors: required (a list of host:port)");
	for (const char *c = mons; *c; c++)
		if (*c == ' ' || (unsigned char)*c < 0x20)
			return err_set(err, -EINVAL, "monitors: must not contain spaces");
	if (strstr(mons, ",,") || mons[0] == ',' || endswith(mons, ","))
		return err_set(err, -EINVAL, "monitors: an entry is empty");
	if (!image)
		return err_set(err, -EINVAL, "image: required");
	if (!valid_name(image))
		return err_set(err, -EINVAL,
			       "image: \"%s\" is not an image name (no '/', '@', spaces, no leading "
			       "'-', not '.' or '..')",
			       image);
	if (!valid_name(pool_of(spec)))
		return err_set(
			err, -EINVAL,
			"pool: \"%s\" is not a pool name (no '/', '@', spaces, no leading '-', not "
			"'.' or '..')",
			pool_of(spec));
	if (user && (!*user || !path_is_safe_component(user)))
		return err_set(err, -EINVAL, "user: \"%s\" is not a CephX user name", user);
	if (volume_spec_get(spec, "keyring") && volume_spec_get(spec, "secretFile"))
		return err_set(err, -EINVAL, "secretFile: give keyring or secretFile, not both");
	for (size_t i = 0; i < 2; i++) {
		const char *k = i ? "secretFile" : "keyring", *v = volume_spec_get(spec, k);
		if (v && path_validate_absolute(v, k, err) < 0)
			return err->code;
	}
	return block_volume_check_fstype(spec, err);
}

static char *rbd_get_volume_name(const struct volume_spec *spec)
{
	return strdup_printf("rbd:%s/%s", pool_of(spec), volume_spec_get(spec, "image"));
}

static void params_done(struct rbd_params *p)
{
	free(p->name);
	free(p->run_dir);
	free(p->secret_dir);
	free(p->record_path);
	free(p->base);
	memset(p, 0, sizeof(*p));
}

/* The plugin's options (its table is at the end of this file): set before the agent starts,
 * read-only afterwards. */
static struct {
	char attach_methods[64];  /* tried in order: "krbd,nbd,fuse" */
	uint64_t op_timeout_ms;	  /* librados/librbd calls and attach helpers */
	uint64_t nbd_reattach_ms; /* how long the kernel waits for a new rbd-nbd */
} settings = {
	.attach_methods = "krbd,nbd,fuse",
	.op_timeout_ms = 30000,
	.nbd_reattach_ms = 300000,
};

/* Fills p from spec and the settings; strings are borrowed from spec except the paths. */
static int params_from_spec(const struct volume_spec *spec, struct rbd_params *p)
{
	const char *state_dir = plugin_state_dir(), *secret_dir = plugin_secret_dir();
	const char *user_secret = volume_spec_get_secret(spec, "userID");
	_cleanup_free_ char *esc = NULL;

	memset(p, 0, sizeof(*p));
	p->monitors = volume_spec_get(spec, "monitors");
	p->pool = pool_of(spec);
	p->image = volume_spec_get(spec, "image");
	p->user = user_secret			  ? user_secret
		  : volume_spec_get(spec, "user") ? volume_spec_get(spec, "user")
						  : DEFAULT_USER;
	p->key = volume_spec_get_secret(spec, "userKey");
	p->secret_file = volume_spec_get(spec, "secretFile");
	p->keyring = volume_spec_get(spec, "keyring");
	if (!p->key && !p->secret_file && !p->keyring)
		p->keyring = DEFAULT_KEYRING;
	if (p->key) /* the secret wins: the files are not read */
		p->keyring = p->secret_file = NULL;
	p->fstype = volume_spec_get(spec, "fsType") ? volume_spec_get(spec, "fsType")
						    : DEFAULT_FSTYPE;
	p->read_only = spec->read_only;
	p->timeout_ms = settings.op_timeout_ms;
	p->nbd_reattach_ms = settings.nbd_reattach_ms;
	p->name = rbd_get_volume_name(spec);
	/* FUSE dirs, logs and records, under the agent's state dir; key files in the secret dir
	 * (a tmpfs), never on the state dir's disk. */
	p->run_dir = strdup_printf("%s/rbd", state_dir ? state_dir : DEFAULT_STATE_DIR);
	p->secret_dir = strdup(secret_dir ? secret_dir : DEFAULT_SECRET_DIR);
	esc = p->name ? path_escape_component(p->name) : NULL;
	if (esc) {
		p->base = strdup_printf("%s/%s", p->run_dir, esc);
		p->record_path = strdup_printf("%s.rec", p->base);
	}
	if (!p->name || !p->run_dir || !p->secret_dir || !p->base || !p->record_path) {
		params_done(p);
		return -ENOMEM;
	}
	return 0;
}

static char *released_path(const struct rbd_params *p)
{
	return strdup_printf("%s/released", p->run_dir);
}

static bool watcher_is_ours(const struct rbd_params *p, const struct rbd_watcher *w,
			    const struct device_attachment *old)
{
	_cleanup_free_ char *rel = released_path(p);

	if (old && streq_ptr(device_attachment_get_meta(old, "client"), w->addr))
		return true;
	return rel && rbd_released_has(rel, w->addr, RELEASED_MAX_AGE_S);
}

/* The watcher that appeared since before (our helper's client), polled briefly. */
static void record_client(struct rbd_cluster *c, const struct rbd_params *p,
			  const struct rbd_watcher *before, size_t n_before,
			  struct device_attachment *att)
{
	/* A read-only client may watch nothing (a read-only krbd map has no watch), so it is
	 * looked for briefly: each look is a cluster round trip (through rbd-helper). */
	int tries = p->read_only ? 4 : 40;

	for (int i = 0; i < tries; i++) {
		_cleanup_free_ struct rbd_watcher *now = NULL;
		size_t n = 0;

		if (rbd_cluster_watchers(c, p->pool, p->image, &now, &n, NULL) < 0)
			return;
		for (size_t j = 0; j < n; j++) {
			bool seen = false;
			for (size_t k = 0; k < n_before && !seen; k++)
				seen = streq(now[j].addr, before[k].addr);
			if (!seen) {
				char id[32];
				snprintf(id, sizeof(id), "client.%lld", (long long)now[j].id);
				(void)device_attachment_set_meta(att, "client", now[j].addr);
				(void)device_attachment_set_meta(att, "client_id", id);
				return;
			}
		}
		usleep(50 * 1000);
	}
}

/* Fences a client of ours that died so its watch and lock go at once, and remembers it. */
static void forget_dead_client(const struct rbd_params *p, struct rbd_cluster *c,
			       const struct device_attachment *att)
{
	const char *addr = device_attachment_get_meta(att, "client");
	_cleanup_free_ char *rel = released_path(p);
	int r;

	if (!addr || !rel)
		return;
	(void)rbd_released_add(rel, addr, RELEASED_MAX_AGE_S);
	if (!c)
		return;
	r = rbd_cluster_blocklist(c, addr, BLOCKLIST_EXPIRE_S);
	log_debug("rbd", "fenced our dead client", "volume", p->name, "client", addr, "result",
		  r < 0 ? strerror(-r) : "blocklisted");
}

static int add_identity_meta(const struct rbd_params *p, struct device_attachment *att)
{
	if (device_attachment_set_meta(att, "pool", p->pool) < 0 ||
	    device_attachment_set_meta(att, "image", p->image) < 0 ||
	    device_attachment_set_meta(att, "monitors", p->monitors) < 0 ||
	    device_attachment_set_meta(att, "user", p->user) < 0)
		return -ENOMEM;
	if (p->keyring && device_attachment_set_meta(att, "keyring", p->keyring) < 0)
		return -ENOMEM;
	if (p->secret_file && device_attachment_set_meta(att, "secretFile", p->secret_file) < 0)
		return -ENOMEM;
	return 0;
}

/* A record a crash left (attach done, the core's journal not yet written): adopted when it
 * still works, released otherwise.  Returns 1 when adopted into ret. */
static int handle_old_record(const struct rbd_params *p, struct rbd_cluster *c,
			     struct device_attachment *old, struct device_attachment *ret,
			     struct error_info *err)
{
	struct error_info why = { 0 };
	bool was_dead = false;
	int r;

	if (old->device_path) {
		struct error_info ignored = { 0 };
		int k = rbd_attach_check(old, p->timeout_ms, &why);
		/* A dead rbd-nbd whose device the kernel still holds: attach a new one to it. */
		if (k == -ENOTCONN && rbd_attach_reattach(p, old, &ignored) == 0 &&
		    rbd_record_write(p->record_path, old) == 0) {
			err_clear(&why);
			k = rbd_attach_check(old, p->timeout_ms, &why);
		}
		if (k != 0)
			goto release;
		*ret = *old;
		memset(old, 0, sizeof(*old));
		log_debug("rbd", "adopted an attachment the journal did not know", "volume",
			  p->name, "device", ret->device_path);
		return 1;
	}
release:
	r = rbd_attach_release(old, p->timeout_ms, &was_dead, err);
	if (r < 0)
		return err_prefix(err, "releasing the previous attachment of %s", p->name);
	if (was_dead || why.code)
		forget_dead_client(p, c, old);
	unlink(p->record_path);
	return 0;
}

/* Writes the record of att, or sets err naming it. */
static int write_record(const struct rbd_params *p, const struct device_attachment *att,
			struct error_info *err)
{
	int r = rbd_record_write(p->record_path, att);

	return r < 0 ? err_set(err, r, "cannot write %s: %s", p->record_path, strerror(-r)) : 0;
}

/* A map (krbd, rbd-nbd, rbd-fuse) through the cluster's gate (rbd-health.h): refused at once
 * while the cluster is down; one that hangs or times out makes it down. */
static int attach_method_gated(const struct rbd_params *p, enum rbd_method m,
			       struct device_attachment *ret, struct error_info *err)
{
	struct server_health_op gate;
	int r = rbd_health_begin(p->monitors, &gate, err);

	if (r < 0)
		return r;
	r = rbd_attach_method(p, m, ret, err);
	rbd_health_end(&gate, r, err);
	return r;
}

static int attach_image(const struct volume_spec *spec, bool read_only,
			struct device_attachment *ret, struct error_info *err)
{
	_cleanup_free_ char *methods = strdup(settings.attach_methods);
	_cleanup_free_ struct rbd_watcher *before = NULL;
	_cleanup_rbd_cluster_ struct rbd_cluster *c = NULL;
	struct device_attachment att = { 0 }, old = { 0 };
	struct rbd_params p;
	char failures[2048] = "";
	char *m, *save = NULL;
	size_t n_before = 0;
	int r;

	if (!methods || params_from_spec(spec, &p) < 0)
		return -ENOMEM;
	p.read_only = p.read_only || read_only; /* every pod reads only: no single-writer check */
	r = path_mkdir_p(p.run_dir, 0700);
	if (r < 0) {
		err_set(err, r, "cannot create the run dir %s: %s", p.run_dir, strerror(-r));
		goto out;
	}
	for (size_t i = 0; i < 2; i++) {
		const char *f = i ? p.secret_file : p.keyring;
		if (f && access(f, R_OK) < 0) {
			r = err_set(err, -errno, "%s %s: %s", i ? "secretFile" : "keyring", f,
				    strerror(errno));
			goto out;
		}
	}
	r = rbd_cluster_connect(&(struct rbd_credentials){ .monitors = p.monitors,
							   .user = p.user,
							   .keyring = p.keyring,
							   .keyfile = p.secret_file,
							   .key = p.key },
				p.timeout_ms, &c, err);
	if (r < 0)
		goto out;
	rbd_cluster_track_health(c);
	r = rbd_cluster_watchers(c, p.pool, p.image, &before, &n_before, err);
	if (r < 0)
		goto out;
	if (rbd_record_read(p.record_path, &old) == 0) {
		r = handle_old_record(&p, c, &old, ret, err);
		if (r != 0) {
			r = r > 0 ? 0 : r;
			goto out;
		}
	}
	/* The single-writer guard: any client but our own means the image is in use. */
	for (size_t i = 0; i < n_before && !p.read_only; i++) {
		if (watcher_is_ours(&p, &before[i], &old))
			continue;
		r = err_set(
			err, -EBUSY,
			"image %s/%s is in use by client.%lld at %s (attached on another node?); "
			"a read-write attach needs it to have no other client",
			p.pool, p.image, (long long)before[i].id, before[i].addr);
		goto out;
	}
	/* A record before anything exists: a crash from here on leaves a trace to clean up. */
	for (m = strtok_r(methods, ", ", &save); m; m = strtok_r(NULL, ", ", &save)) {
		struct error_info merr = { 0 };
		enum rbd_method method;
		size_t len = strlen(failures);

		if (rbd_method_from_name(m, &method) < 0) {
			snprintf(failures + len, sizeof(failures) - len, "%s%s: unknown method",
				 len ? "; " : "", m);
			continue;
		}
		device_attachment_clear(&att);
		if (device_attachment_set_meta(&att, "method", m) < 0 ||
		    add_identity_meta(&p, &att) < 0) {
			r = -ENOMEM;
			goto out;
		}
		if (method == RBD_METHOD_FUSE) {
			_cleanup_free_ char *dir = strdup_printf("%s.fuse", p.base);
			if (!dir || device_attachment_set_meta(&att, "fuse_dir", dir) < 0) {
				r = -ENOMEM;
				goto out;
			}
		}
		r = rbd_record_write(p.record_path, &att);
		if (r < 0) {
			r = err_set(err, r,
				    "not attached: the record %s cannot be written (%s), and an "
				    "attach no record names could not be released after a crash",
				    p.record_path, strerror(-r));
			goto out;
		}
		device_attachment_clear(&att);
		r = attach_method_gated(&p, method, &att, &merr);
		if (r == 0)
			break;
		if (r == -EHOSTUNREACH) { /* the cluster is down: no other method either */
			unlink(p.record_path);
			r = err_set(err, r, "%s", err_msg(&merr));
			goto out;
		}
		snprintf(failures + len, sizeof(failures) - len, "%s%s: %s", len ? "; " : "", m,
			 err_msg(&merr));
		log_debug("rbd", "attach method failed, trying the next", "volume", p.name,
			  "method", m, "error", err_msg(&merr));
		unlink(p.record_path);
	}
	if (!m) {
		r = err_set(err, r < 0 ? r : -EINVAL,
			    "cannot attach %s/%s with any method (%s): %s", p.pool, p.image,
			    settings.attach_methods, failures);
		goto out;
	}
	if (add_identity_meta(&p, &att) < 0 ||
	    (failures[0] && device_attachment_set_meta(&att, "skipped", failures) < 0)) {
		r = -ENOMEM;
		goto out_release;
	}
	/* The device as soon as it exists: killed while our client is looked for below (up
	 * to 2 s), the next start finds a record it can adopt or release by its device, not
	 * one without it (its mapping leaked, its client then taken for another node's).  Then
	 * again with the client. */
	r = write_record(&p, &att, err);
	if (r == 0) {
		record_client(c, &p, before, n_before, &att);
		r = write_record(&p, &att, err);
	}
	if (r < 0)
		goto out_release;
	*ret = att;
	memset(&att, 0, sizeof(att));
	goto out;

out_release:
	(void)rbd_attach_release(&att, p.timeout_ms, NULL, NULL);
	unlink(p.record_path);
out:
	device_attachment_clear(&att);
	device_attachment_clear(&old);
	params_done(&p);
	return r;
}

static int detach_image(const struct volume_spec *spec, const struct device_attachment *att,
			struct error_info *err)
{
	struct device_attachment rec = { 0 };
	const struct device_attachment *use = att;
	_cleanup_rbd_cluster_ struct rbd_cluster *c = NULL;
	struct rbd_params p;
	bool was_dead = false;
	int r;

	if (params_from_spec(spec, &p) < 0)
		return -ENOMEM;
	/* The journal's copy says what was made; an adopted mount may have only the device. */
	if (rbd_record_read(p.record_path, &rec) == 0 &&
	    (!device_attachment_get_meta(att, "method") ||
	     streq_ptr(rec.device_path, att->device_path)))
		use = &rec;
	r = rbd_attach_release(use, p.timeout_ms, &was_dead, err);
	if (r < 0)
		goto out;
	if (was_dead && device_attachment_get_meta(use, "client")) {
		struct error_info ignored = { 0 };
		const char *mons = device_attachment_get_meta(use, "monitors");
		if (mons)
			(void)rbd_cluster_connect(
				&(struct rbd_credentials){
					.monitors = mons,
					.user = p.user,
					.keyring =
						p.key ? NULL
						      : device_attachment_get_meta(use, "keyring"),
					.keyfile = p.key ? NULL
							 : device_attachment_get_meta(use,
										      "secretFile"),
					.key = p.key },
				p.timeout_ms, &c, &ignored);
		if (c)
			rbd_cluster_track_health(c);
		forget_dead_client(&p, c, use);
	}
	if (use == &rec || !rec.device_path || streq_ptr(rec.device_path, att->device_path))
		unlink(p.record_path);
out:
	device_attachment_clear(&rec);
	params_done(&p);
	return r;
}

/* The image mapped, then, for an encrypted volume, opened as a dm-crypt mapping
 * (crypt-volume.h): the attachment's device_path is the mapping, and the record under the run
 * dir keeps the image's own device. */
static int rbd_attach(const struct volume_spec *spec, bool read_only, struct device_attachment *ret,
		      struct error_info *err)
{
	_cleanup_free_ char *name = rbd_get_volume_name(spec);
	int r;

	if (!name)
		return -ENOMEM;
	r = attach_image(spec, read_only, ret, err);
	if (r < 0)
		return r;
	r = crypt_volume_attach(spec, name, read_only, ret, err);
	if (r < 0) {
		struct error_info ignored = { 0 };
		(void)detach_image(spec, ret, &ignored);
		device_attachment_clear(ret);
	}
	return r;
}

/* The mapping closed first (crypt-volume.h), then the image's own device released. */
static int rbd_detach(const struct volume_spec *spec, const struct device_attachment *att,
		      struct error_info *err)
{
	struct device_attachment image = *att;
	int r = crypt_volume_detach(att, err);

	if (r < 0)
		return r;
	image.device_path = (char *)crypt_volume_backing_device(att);
	return detach_image(spec, &image, err);
}

/* --- device mount and pod binds (as the local plugin's block devices) --- */

static int rbd_mount_device(const struct volume_spec *spec, const char *device_path, bool read_only,
			    const struct mount_target *target, struct error_info *err)
{
	char **opts = NULL;
	int r;

	/* _netdev: the filesystem lives on the network.  A userspace option (libmount keeps it
	 * from the kernel and records it in utab), which tells systemd to unmount it before the
	 * network goes down at shutdown, as for an rbdmap or iSCSI mount. */
	for (char **o = spec->mount_options; o && *o; o++)
		if (mount_options_append(&opts, *o) < 0)
			goto oom;
	if (!mount_options_get(opts, "_netdev") && mount_options_append(&opts, "_netdev") < 0)
		goto oom;
	r = device_fs_mount(device_path, volume_spec_get(spec, "fsType"), DEFAULT_FSTYPE, opts,
			    read_only, target, err);
	mount_options_free(opts);
	return r;
oom:
	mount_options_free(opts);
	return -ENOMEM;
}

static int rbd_unmount_device(const char *path, struct error_info *err)
{
	int r = mnt_util_umount(path, 0, err);

	if (r == -EIO || r == -ENOTCONN) /* the device died under it */
		r = mnt_util_umount(path, MNT_DETACH, err);
	return r == -EINVAL || r == -ENOENT ? 0 : r;
}

static int rbd_check_set_up(const struct volume_mounter *m, const char *target,
			    struct mount_seen *seen, struct error_info *err)
{
	if (!m->device_mount_path)
		return 0;
	if (m->spec->block)
		return block_map_check(target, m->device_mount_path, m->read_only);
	return bind_check_seen(target, m->device_mount_path, m->read_only, seen);
}

static int rbd_set_up_at(const struct volume_mounter *m, const struct mount_target *target,
			 struct error_info *err)
{
	_cleanup_close_ int src = -1;

	if (!m->device_mount_path)
		return err_set(err, -EINVAL, "rbd volumes are mounted through a device mount");
	src = bind_open_device_mount(m->device_mount_path, err);
	if (src < 0)
		return src;
	return bind_set_up(src, m->device_mount_path, target, m->read_only, err);
}

static int rbd_tear_down_at(const char *volume_name, const char *pod_uid, const char *target,
			    struct error_info *err)
{
	int r = mnt_util_umount(target, 0, err);

	if (r == -EIO || r == -ENOTCONN)
		r = mnt_util_umount(target, MNT_DETACH, err);
	return r == -EINVAL ? 0 : r;
}

static int rbd_construct_spec(const char *volume_name, const char *mount_path,
			      struct volume_spec **ret_spec, struct error_info *err)
{
	_cleanup_volume_spec_ struct volume_spec *s = NULL;
	_cleanup_free_ char *pool = NULL;
	const char *rest, *slash;
	struct device_attachment rec = { 0 };
	struct rbd_params p;
	int r = 0;

	if (!startswith(volume_name, "rbd:") || !(slash = strchr(volume_name + 4, '/')))
		return err_set(err, -EINVAL, "%s is not an rbd volume name", volume_name);
	rest = volume_name + 4;
	pool = strndup(rest, (size_t)(slash - rest));
	s = volume_spec_new("rbd");
	if (!pool || !s || volume_spec_set(s, "pool", pool) < 0 ||
	    volume_spec_set(s, "image", slash + 1) < 0)
		return -ENOMEM;
	/* Our record knows the rest (never the key). */
	if (params_from_spec(s, &p) == 0) {
		if (rbd_record_read(p.record_path, &rec) == 0) {
			static const char *const keys[] = { "monitors", "user", "keyring",
							    "secretFile" };
			for (size_t i = 0; i < ARRAY_SIZE(keys) && r == 0; i++) {
				const char *v = device_attachment_get_meta(&rec, keys[i]);
				if (v)
					r = volume_spec_set(s, keys[i], v);
			}
			device_attachment_clear(&rec);
		}
		params_done(&p);
	}
	if (r < 0)
		return r;
	*ret_spec = TAKE_PTR(s);
	return 0;
}

static int rbd_check_health(const struct volume_spec *spec, const char *path,
			    struct error_info *err)
{
	struct device_attachment rec = { 0 };
	struct rbd_params p;
	int r;

	if (params_from_spec(spec, &p) < 0)
		return -ENOMEM;
	if (rbd_record_read(p.record_path, &rec) == 0) {
		r = rbd_attach_check(&rec, p.timeout_ms, err);
		if (r == -ENOTCONN &&
		    streq_ptr(device_attachment_get_meta(&rec, "method"), "nbd")) {
			/* rbd-nbd died (with a restarted agent's container, say), but the kernel
			 * still holds the device: a new rbd-nbd on it, and the filesystem mounted
			 * there (also in running pods) never notices.  Only if that fails is the
			 * volume broken (and healed by remounting, which pods do notice). */
			struct error_info why = { 0 };
			int k = rbd_attach_reattach(&p, &rec, &why);
			if (k == 0 && rbd_record_write(p.record_path, &rec) == 0) {
				log_info("rbd-nbd reattached to the device it served", "volume",
					 p.name, "device", rec.device_path, "pid",
					 device_attachment_get_meta(&rec, "pid"));
				err_clear(err);
				r = rbd_attach_check(&rec, p.timeout_ms, err);
			} else if (k < 0) {
				log_warning("rbd-nbd could not be reattached", "volume", p.name,
					    "device", rec.device_path, "error", err_msg(&why));
			}
		}
		device_attachment_clear(&rec);
		if (r < 0)
			goto out;
	}
	r = rbd_probe_path(RBD_PROBE_STATFS, path, p.timeout_ms);
	if (r < 0)
		r = err_set(err, r == -ETIMEDOUT ? r : -EIO, "%s: %s", path, strerror(-r));
out:
	params_done(&p);
	return r;
}

/* Whether dev is "/dev/<prefix><n>". */
static bool device_named(const char *dev, const char *prefix)
{
	const char *n;

	if (!dev || !startswith(dev, "/dev/") || !startswith(dev + 5, prefix))
		return false;
	n = dev + 5 + strlen(prefix);
	return *n && strspn(n, "0123456789") == strlen(n);
}

/* What the journal recorded of an attach is what rbd_attach would have made for name: a
 * device of its method's kind, the FUSE dir <state dir>/rbd/<escaped name>.fuse and the image
 * file in it (a loop device is detached only when backed by that file, loop-device.h). */
static int rbd_check_attachment(const char *name, const struct device_attachment *att,
				struct error_info *err)
{
	const char *m = device_attachment_get_meta(att, "method");
	const char *dir = device_attachment_get_meta(att, "fuse_dir");
	const char *file = device_attachment_get_meta(att, "image_file");
	const char *loop = device_attachment_get_meta(att, "loop");
	const char *state_dir = plugin_state_dir();
	/* An encrypted volume's device is its mapping; the image's own device is kept beside. */
	const char *dev = crypt_volume_backing_device(att);
	_cleanup_free_ char *esc = path_escape_component(name), *want = NULL;

	if (crypt_volume_check_attachment(name, att, err) < 0)
		return -EBADMSG;
	if (!esc || !(want = strdup_printf("%s/rbd/%s.fuse",
					   state_dir ? state_dir : DEFAULT_STATE_DIR, esc)))
		return -ENOMEM;
	if (dir && !streq(dir, want))
		return err_set(err, -EBADMSG, "meta.fuse_dir: %s is not this volume's (%s)", dir,
			       want);
	if (file && (!dir || !path_is_under(file, dir) || streq(file, dir) ||
		     strchr(file + strlen(dir) + 1, '/')))
		return err_set(err, -EBADMSG, "meta.image_file: %s is not in the FUSE dir", file);
	if (loop && (!file || !device_named(loop, "loop")))
		return err_set(err, -EBADMSG, "meta.loop: %s is not a loop device over the image",
			       loop);
	if (dev && streq_ptr(m, "krbd") && !device_named(dev, "rbd"))
		return err_set(err, -EBADMSG, "device: %s is not an rbd device", dev);
	if (dev && streq_ptr(m, "nbd") && !device_named(dev, "nbd"))
		return err_set(err, -EBADMSG, "device: %s is not an nbd device", dev);
	if (dev && streq_ptr(m, "fuse") && !streq_ptr(dev, loop))
		return err_set(err, -EBADMSG, "device: %s is not the loop device over the image",
			       dev);
	/* Of the right shape: is what it names still ours (a name reused while the agent was
	 * down)?  If not, -ESTALE: the core drops the attachment and attaches afresh. */
	return rbd_attach_still_ours(att, dev, err);
}

static const struct volume_ops rbd_ops = {
	.can_support = rbd_can_support,
	.validate = rbd_validate,
	.get_volume_name = rbd_get_volume_name,
	.set_up_at = rbd_set_up_at,
	.tear_down_at = rbd_tear_down_at,
	.check_set_up = rbd_check_set_up,
	.construct_spec = rbd_construct_spec,
	.check_health = rbd_check_health,
};

static const struct device_mount_ops rbd_device_ops = {
	.mount_device = rbd_mount_device,
	.unmount_device = rbd_unmount_device,
};

static const struct attach_ops rbd_attach_ops = {
	.attach = rbd_attach,
	.detach = rbd_detach,
	.check_attachment = rbd_check_attachment,
};

static int set_attach_methods(const char *value, uint64_t ms, struct error_info *err)
{
	_cleanup_free_ char *methods = strdup(value);
	char *save = NULL;
	enum rbd_method m;

	if (!methods)
		return -ENOMEM;
	if (!value[0])
		return err_set(err, -EINVAL, "must name at least one method");
	for (char *name = strtok_r(methods, ",", &save); name; name = strtok_r(NULL, ",", &save))
		if (rbd_method_from_name(name, &m) < 0)
			return err_set(err, -EINVAL, "\"%s\" is not krbd, nbd or fuse", name);
	if (strlen(value) >= sizeof(settings.attach_methods))
		return err_set(err, -EINVAL, "\"%s\" is too long", value);
	snprintf(settings.attach_methods, sizeof(settings.attach_methods), "%s", value);
	return 0;
}

static int set_op_timeout(const char *value, uint64_t ms, struct error_info *err)
{
	settings.op_timeout_ms = ms;
	return 0;
}

static int set_hung_after(const char *value, uint64_t ms, struct error_info *err)
{
	rbd_health_set_hung_after(ms);
	return 0;
}

static int set_nbd_reattach(const char *value, uint64_t ms, struct error_info *err)
{
	if (ms < 1000)
		return err_set(err, -EINVAL, "\"%s\" is less than 1s", value);
	settings.nbd_reattach_ms = ms;
	return 0;
}

/* The defaults here and in the settings' initializer above agree (test-config checks). */
static const struct plugin_option rbd_options[] = {
	{ "rbd-attach-methods", PLUGIN_OPTION_STRING, "krbd,nbd,fuse",
	  "how rbd images are attached, tried in this order (krbd, nbd, fuse)",
	  set_attach_methods },
	{ "rbd-timeout", PLUGIN_OPTION_DURATION, "30s",
	  "librados/librbd calls and attach helpers give up after this", set_op_timeout },
	{ "rbd-nbd-reattach-timeout", PLUGIN_OPTION_DURATION, "5m",
	  "a dead rbd-nbd's device holds its I/O this long for a new rbd-nbd (an agent restart)",
	  set_nbd_reattach },
	{ "rbd-hung-after", PLUGIN_OPTION_DURATION, "10s",
	  "an attach or cluster call in flight this long makes its Ceph cluster down: new ones "
	  "to it fail at once until a monitor answers a probe; 0: only a timeout does",
	  set_hung_after },
	{ 0 }
};

const struct volume_plugin rbd_plugin = {
	.name = "rbd",
	.ops = &rbd_ops,
	.device = &rbd_device_ops,
	.attach = &rbd_attach_ops,
	.block = &block_volume_block_ops,
	.expand = &block_volume_expand_ops,
	.options = rbd_options,
};
