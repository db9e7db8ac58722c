/* luks.c - see luks.h.
 *
 * libcryptsetup (and what it pulls in: libdevmapper, libcrypto, libargon2, libjson-c, ~2 MiB
 * of a process's RSS) is dlopen()ed at the first call of this file, not linked: an agent
 * that never opens an encrypted volume never maps it.  Every crypt_ function used below goes
 * through a table filled once by dlsym; the macros keep the code's spelling.  The soname
 * comes from the build (LUKS_CRYPTSETUP_SONAME, mk/crypt.mk) and is in the binary's
 * .note.dlopen for the image's package list. */
#include <dlfcn.h>
#include <errno.h>
#include <libcryptsetup.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dlopen-note.h"
#include "log.h"
#include "luks.h"
#include "macro.h"

#ifndef LUKS_CRYPTSETUP_SONAME
#error "LUKS_CRYPTSETUP_SONAME (libcryptsetup's soname) must come from the build (mk/crypt.mk)"
#endif

DLOPEN_NOTE(luks_dlopen_note,
	    "[{\"feature\":\"encryption\",\"description\":\"LUKS2 encrypted volumes\","
	    "\"priority\":\"recommended\",\"soname\":[\"" LUKS_CRYPTSETUP_SONAME "\"]}]");

#define LUKS_SYMS(X)                       \
	X(crypt_activate_by_passphrase)    \
	X(crypt_deactivate)                \
	X(crypt_format)                    \
	X(crypt_get_label)                 \
	X(crypt_free)                      \
	X(crypt_get_device_name)           \
	X(crypt_init)                      \
	X(crypt_init_by_name)              \
	X(crypt_keyslot_add_by_volume_key) \
	X(crypt_keyslot_max)               \
	X(crypt_keyslot_status)            \
	X(crypt_load)                      \
	X(crypt_resize)                    \
	X(crypt_set_label)                 \
	X(crypt_set_log_callback)          \
	X(crypt_set_pbkdf_type)            \
	X(crypt_status)                    \
	X(crypt_volume_key_get)            \
	X(crypt_volume_key_keyring)

#define X(name) static typeof(name) *sym_##name;
LUKS_SYMS(X)
#undef X

static pthread_once_t dl_once = PTHREAD_ONCE_INIT;
static struct error_info dl_result;

static void luks_dl_load(void)
{
	/* Never closed: the library keeps state until the process exits. */
	void *h = dlopen(LUKS_CRYPTSETUP_SONAME, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		err_set(&dl_result, -EOPNOTSUPP,
			"encrypted volumes need %s (install libcryptsetup12): %s",
			LUKS_CRYPTSETUP_SONAME, dlerror());
		return;
	}
#define X(name)                                                                                 \
	if (!(sym_##name = (typeof(sym_##name))dlsym(h, #name))) {                              \
		err_set(&dl_result, -EOPNOTSUPP, "%s has no symbol %s", LUKS_CRYPTSETUP_SONAME, \
			#name);                                                                 \
		return;                                                                         \
	}
	LUKS_SYMS(X)
#undef X
}

/* Loads libcryptsetup once.  Returns 0, or -EOPNOTSUPP with err (when not NULL) naming the
 * library or the symbol. */
static int luks_dlopen(struct error_info *err)
{
	pthread_once(&dl_once, luks_dl_load);
	if (dl_result.code < 0 && err)
		*err = dl_result;
	return dl_result.code;
}

#define crypt_activate_by_passphrase (*sym_crypt_activate_by_passphrase)
#define crypt_deactivate (*sym_crypt_deactivate)
#define crypt_get_device_name (*sym_crypt_get_device_name)
#define crypt_get_label (*sym_crypt_get_label)
#define crypt_keyslot_add_by_volume_key (*sym_crypt_keyslot_add_by_volume_key)
#define crypt_keyslot_max (*sym_crypt_keyslot_max)
#define crypt_keyslot_status (*sym_crypt_keyslot_status)
#define crypt_resize (*sym_crypt_resize)
#define crypt_set_label (*sym_crypt_set_label)
#define crypt_set_log_callback (*sym_crypt_set_log_callback)
#define crypt_set_pbkdf_type (*sym_crypt_set_pbkdf_type)
#define crypt_volume_key_get (*sym_crypt_volume_key_get)
#define crypt_volume_key_keyring (*sym_crypt_volume_key_keyring)

/* libcryptsetup keeps process-wide state that it sets up without a lock: its crypto backend
 * (an OpenSSL library context, made by the first call that needs it: two first calls at once
 * make two and leak one, as LeakSanitizer showed in the VM with three volumes set up at once)
 * and its device-mapper backend's count of users (changed by every context's creation and
 * release, and by a status lookup without a context).  The calls that touch it take turns
 * under one lock: creating and freeing a context, the status lookup, and header reads and
 * formats until one has set the crypto backend up.  After that the slow work (a passphrase's
 * PBKDF, the device's I/O, a mapping's removal) runs outside the lock. */
static pthread_mutex_t global_state_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool crypto_backend_ready;

/* call (an expression), with the lock held. */
#define UNDER_GLOBAL_LOCK(call)                           \
	({                                                \
		pthread_mutex_lock(&global_state_lock);   \
		__auto_type r_ = (call);                  \
		pthread_mutex_unlock(&global_state_lock); \
		r_;                                       \
	})

static int locked_crypt_init(struct crypt_device **cd, const char *device)
{
	return UNDER_GLOBAL_LOCK(sym_crypt_init(cd, device));
}

static int locked_crypt_init_by_name(struct crypt_device **cd, const char *name)
{
	return UNDER_GLOBAL_LOCK(sym_crypt_init_by_name(cd, name));
}

static void locked_crypt_free(struct crypt_device *cd)
{
	pthread_mutex_lock(&global_state_lock);
	sym_crypt_free(cd);
	pthread_mutex_unlock(&global_state_lock);
}

static crypt_status_info locked_crypt_status(struct crypt_device *cd, const char *name)
{
	return UNDER_GLOBAL_LOCK(sym_crypt_status(cd, name));
}

/* A call that sets the crypto backend up when it is not yet: in turn until one succeeded. */
#define CRYPTO_FIRST_CALL(call)                                            \
	({                                                                 \
		bool held_ = !atomic_load(&crypto_backend_ready);          \
		int r_;                                                    \
		if (held_)                                                 \
			pthread_mutex_lock(&global_state_lock);            \
		r_ = (call);                                               \
		if (held_) {                                               \
			if (r_ >= 0)                                       \
				atomic_store(&crypto_backend_ready, true); \
			pthread_mutex_unlock(&global_state_lock);          \
		}                                                          \
		r_;                                                        \
	})

static int locked_crypt_load(struct crypt_device *cd, const char *type, void *params)
{
	return CRYPTO_FIRST_CALL(sym_crypt_load(cd, type, params));
}

static int locked_crypt_format(struct crypt_device *cd, const char *type, const char *cipher,
			       const char *cipher_mode, const char *uuid, const char *volume_key,
			       size_t volume_key_size, void *params)
{
	return CRYPTO_FIRST_CALL(sym_crypt_format(cd, type, cipher, cipher_mode, uuid, volume_key,
						  volume_key_size, params));
}

#define crypt_format locked_crypt_format
#define crypt_free locked_crypt_free
#define crypt_init locked_crypt_init
#define crypt_init_by_name locked_crypt_init_by_name
#define crypt_load locked_crypt_load
#define crypt_status locked_crypt_status

/* The misc device device-mapper registers; libdevmapper makes /dev/mapper/control from it
 * (there is no udev in a container or the test VM). */
#define DM_MISC_SYSFS "/sys/class/misc/device-mapper"

static void crypt_freep(struct crypt_device **cd)
{
	if (*cd)
		crypt_free(*cd);
}
#define _cleanup_crypt_ __attribute__((cleanup(crypt_freep)))

static void log_crypt(int level, const char *msg, void *arg)
{
	(void)arg;
	(void)level;
	log_debug("crypt", "libcryptsetup", "message", msg);
}

static const struct crypt_pbkdf_type pbkdf = {
	.type = LUKS_PBKDF,
	.max_memory_kb = LUKS_PBKDF_MEMORY_KB,
	.parallel_threads = LUKS_PBKDF_THREADS,
	.iterations = LUKS_PBKDF_ITERATIONS,
	.flags = CRYPT_PBKDF_NO_BENCHMARK,
};

bool luks_dm_available(void)
{
	return access(DM_MISC_SYSFS, F_OK) == 0;
}

static int init_device(const char *dev, struct crypt_device **ret, struct error_info *err)
{
	int r = luks_dlopen(err);

	if (r < 0)
		return r;
	crypt_set_log_callback(NULL, log_crypt, NULL);
	r = crypt_init(ret, dev);
	if (r < 0)
		return err_set(err, r, "LUKS device %s: %s", dev, strerror(-r));
	crypt_set_log_callback(*ret, log_crypt, NULL);
	return 0;
}

/* init_device() and the LUKS2 header read. */
static int load_device(const char *dev, struct crypt_device **ret, struct error_info *err)
{
	int r = init_device(dev, ret, err);

	if (r < 0)
		return r;
	r = crypt_load(*ret, CRYPT_LUKS2, NULL);
	if (r < 0)
		return err_set(err, r == -EINVAL ? -EMEDIUMTYPE : r,
			       "%s carries no LUKS2 header libcryptsetup can read: %s", dev,
			       strerror(-r));
	return 0;
}

/* -ENOKEY naming dev when its header has no keyslot in use: what a format stopped between
 * writing the header and adding the keyslot leaves (a crash, a kill), which no passphrase
 * opens; said as such rather than as a wrong passphrase or a kernel without dm_crypt. */
static int require_keyslot(struct crypt_device *cd, const char *dev, struct error_info *err)
{
	int max = crypt_keyslot_max(CRYPT_LUKS2);

	for (int i = 0; i < max; i++) {
		crypt_keyslot_info st = crypt_keyslot_status(cd, i);

		if (st == CRYPT_SLOT_ACTIVE || st == CRYPT_SLOT_ACTIVE_LAST)
			return 0;
	}
	return err_set(err, -ENOKEY,
		       "the LUKS header on %s has no keyslot: its format stopped before the "
		       "passphrase was added (a crash or a kill), and no passphrase opens it",
		       dev);
}

/* Unlocks a keyslot with pass without any device-mapper call (libcryptsetup's activation
 * without a name still asks device-mapper, which makes /dev/mapper/control on a kernel that
 * has none): the volume key comes out into a buffer wiped at once. */
static int check_passphrase(struct crypt_device *cd, const char *dev, const char *pass,
			    size_t pass_len, struct error_info *err)
{
	char vk[LUKS_KEY_BITS / 8];
	size_t vk_len = sizeof(vk);
	int r = crypt_volume_key_get(cd, CRYPT_ANY_SLOT, vk, &vk_len, pass, pass_len);

	explicit_bzero(vk, sizeof(vk));
	if (r == -EPERM)
		return err_set(err, -EPERM, "wrong passphrase for the LUKS device %s", dev);
	if (r < 0)
		return err_set(err, r, "LUKS device %s: %s", dev, strerror(-r));
	return 0;
}

int luks_format(const char *dev, const char *owner, const char *pass, size_t pass_len,
		struct error_info *err)
{
	_cleanup_crypt_ struct crypt_device *cd = NULL;
	char label[sizeof(LUKS_LABEL_FORMATTING) + LUKS_OWNER_MAX];
	struct crypt_params_luks2 params = { .sector_size = 512 };
	struct crypt_pbkdf_type kdf = pbkdf;
	int r;

	if (owner && strlen(owner) > LUKS_OWNER_MAX)
		return err_set(err, -ENAMETOOLONG, "LUKS format %s: owner %s is too long", dev,
			       owner);
	if (owner) {
		snprintf(label, sizeof(label), LUKS_LABEL_FORMATTING "%s", owner);
		params.label = label;
	}
	r = init_device(dev, &cd, err);
	if (r < 0)
		return r;
	r = crypt_set_pbkdf_type(cd, &kdf);
	if (r < 0)
		return err_set(err, r, "LUKS format %s: PBKDF %s: %s", dev, LUKS_PBKDF,
			       strerror(-r));
	r = crypt_format(cd, CRYPT_LUKS2, LUKS_CIPHER, LUKS_CIPHER_MODE, NULL, NULL,
			 LUKS_KEY_BITS / 8, &params);
	if (r < 0)
		return err_set(err, r, "LUKS format %s: %s", dev, strerror(-r));
	r = crypt_keyslot_add_by_volume_key(cd, CRYPT_ANY_SLOT, NULL, 0, pass, pass_len);
	if (r < 0)
		return err_set(err, r, "LUKS format %s: adding the keyslot: %s", dev, strerror(-r));
	/* Finished: a stop before this point leaves the keyslot in, and a header with a
	 * keyslot is never taken for an unfinished one whatever its label. */
	r = owner ? crypt_set_label(cd, owner, NULL) : 0;
	if (r < 0)
		return err_set(err, r, "LUKS format %s: labelling the header: %s", dev,
			       strerror(-r));
	return 0;
}

int luks_unfinished_format(const char *dev, const char *owner, struct error_info *err)
{
	_cleanup_crypt_ struct crypt_device *cd = NULL;
	struct error_info ignored = { 0 };
	const char *label;
	int r = init_device(dev, &cd, err);

	if (r < 0)
		return r;
	if (crypt_load(cd, CRYPT_LUKS2, NULL) < 0)
		return 0;
	if (require_keyslot(cd, dev, &ignored) == 0)
		return 0;
	label = crypt_get_label(cd);
	return label && startswith(label, LUKS_LABEL_FORMATTING) &&
	       streq(label + strlen(LUKS_LABEL_FORMATTING), owner);
}

int luks_open(const char *dev, const char *name, const char *pass, size_t pass_len, bool read_only,
	      char *ret_path, struct error_info *err)
{
	_cleanup_crypt_ struct crypt_device *cd = NULL;
	int r;

	r = load_device(dev, &cd, err);
	if (r < 0)
		return r;
	r = require_keyslot(cd, dev, err);
	if (r < 0)
		return r;
	if (!luks_dm_available()) {
		/* Only the check of the passphrase works without the kernel's support. */
		r = check_passphrase(cd, dev, pass, pass_len, err);
		if (r < 0)
			return r;
		return err_set(err, -EOPNOTSUPP,
			       "cannot open the LUKS device %s: this kernel has no device-mapper "
			       "(dm_mod and dm_crypt; " DM_MISC_SYSFS
			       " and /dev/mapper/control are "
			       "missing)",
			       dev);
	}
	/* The volume key in the dm table, not in a kernel keyring of this thread: a resize (on
	 * another thread, after a restart) then needs no passphrase. */
	(void)crypt_volume_key_keyring(cd, 0);
	r = crypt_activate_by_passphrase(cd, name, CRYPT_ANY_SLOT, pass, pass_len,
					 read_only ? CRYPT_ACTIVATE_READONLY : 0);
	if (r == -EPERM)
		return err_set(err, -EPERM, "wrong passphrase for the LUKS device %s", dev);
	if (r == -ENOENT || r == -ENOTSUP)
		return err_set(err, -EOPNOTSUPP,
			       "cannot open the LUKS device %s as %s: the kernel refused the "
			       "mapping (is dm_crypt loaded?): %s",
			       dev, name, strerror(-r));
	if (r < 0)
		return err_set(err, r, "cannot open the LUKS device %s as %s: %s", dev, name,
			       strerror(-r));
	snprintf(ret_path, LUKS_PATH_MAX, LUKS_MAPPER_DIR "/%s", name);
	return 0;
}

int luks_lookup(const char *name, dev_t *ret_backing, char *ret_backing_path)
{
	_cleanup_crypt_ struct crypt_device *cd = NULL;
	crypt_status_info st_info;
	const char *dev;
	struct stat st;
	int r;

	if (!luks_dm_available())
		return 0;
	r = luks_dlopen(NULL);
	if (r < 0)
		return r;
	crypt_set_log_callback(NULL, log_crypt, NULL);
	st_info = crypt_status(NULL, name);
	if (st_info != CRYPT_ACTIVE && st_info != CRYPT_BUSY)
		return 0;
	r = crypt_init_by_name(&cd, name);
	if (r < 0)
		return r == -ENODEV ? 0 : r;
	dev = crypt_get_device_name(cd);
	if (!dev || stat(dev, &st) < 0)
		return -ENODEV;
	*ret_backing = st.st_rdev;
	snprintf(ret_backing_path, LUKS_PATH_MAX, "%s", dev);
	return 1;
}

int luks_resize(const char *name, struct error_info *err)
{
	_cleanup_crypt_ struct crypt_device *cd = NULL;
	int r = luks_dlopen(err);

	if (r < 0)
		return r;
	crypt_set_log_callback(NULL, log_crypt, NULL);
	r = crypt_init_by_name(&cd, name);
	if (r < 0)
		return err_set(err, r, "mapping %s: %s", name, strerror(-r));
	(void)crypt_volume_key_keyring(cd, 0);
	r = crypt_resize(cd, name, 0);
	if (r < 0)
		return err_set(err, r, "growing the mapping %s: %s", name, strerror(-r));
	return 0;
}

int luks_close(const char *name, struct error_info *err)
{
	_cleanup_crypt_ struct crypt_device *cd = NULL;
	int r;

	if (!luks_dm_available())
		return 0;
	r = luks_dlopen(err);
	if (r < 0)
		return r;
	crypt_set_log_callback(NULL, log_crypt, NULL);
	r = crypt_init_by_name(&cd, name);
	if (r == -ENODEV)
		return 0;
	if (r < 0)
		return err_set(err, r, "mapping %s: %s", name, strerror(-r));
	r = crypt_deactivate(cd, name);
	if (r == -ENODEV)
		return 0;
	if (r < 0)
		return err_set(err, r, "closing the mapping %s: %s", name,
			       r == -EBUSY ? "it is still in use" : strerror(-r));
	return 0;
}

int luks_verify(const char *dev, const char *pass, size_t pass_len, struct error_info *err)
{
	_cleanup_crypt_ struct crypt_device *cd = NULL;
	int r;

	r = load_device(dev, &cd, err);
	if (r < 0)
		return r;
	r = require_keyslot(cd, dev, err);
	if (r < 0)
		return r;
	return check_passphrase(cd, dev, pass, pass_len, err);
}
