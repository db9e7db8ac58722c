/* mount-utab.c - see mount-utab.h.
 *
 * Dropping an entry through libmount (mnt_update_table) takes utab's lock file, blocks
 * signals, reads and parses utab and writes it back: some twenty system calls for every
 * unmount, although almost none has an entry (only mounts with userspace options do: rbd's
 * and NFS's _netdev).  Where there is no utab, or an empty one (a node whose mounts have no
 * userspace options), an unmount costs a stat(2) of it instead.  libmount has no public
 * reader of utab's own format, so a utab with entries is left to libmount to search. */
#include <errno.h>
#include <libmount.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "mount-utab.h"
#include "path-util.h"

bool mnt_utab_has_userspace_options(const char *options)
{
	_cleanup_free_ char *user = NULL;

	if (!options || !*options || mnt_split_optstr(options, &user, NULL, NULL, 0, 0) < 0)
		return false;
	return user && *user;
}

void mnt_utab_record(const char *source, int target_fd, const char *options)
{
	struct libmnt_update *upd = mnt_new_update();
	struct libmnt_fs *fs = mnt_new_fs();
	char link[FD_PATH_MAX], target[PATH_MAX];
	ssize_t n = readlink(path_fd_path(target_fd, link), target, sizeof(target) - 1);

	if (n > 0 && upd && fs) {
		target[n] = '\0';
		if (mnt_fs_set_source(fs, source) == 0 && mnt_fs_set_target(fs, target) == 0 &&
		    mnt_fs_set_options(fs, options) == 0 &&
		    mnt_update_set_fs(upd, 0, NULL, fs) == 0)
			(void)mnt_update_table(upd, NULL);
	}
	mnt_free_fs(fs);
	mnt_free_update(upd);
}

/* Where libmount keeps utab: its default, or LIBMOUNT_UTAB, which libmount reads too. */
static const char *utab_path(void)
{
	const char *p = secure_getenv("LIBMOUNT_UTAB");

	return p && *p ? p : "/run/mount/utab";
}

void mnt_utab_forget(const char *target)
{
	struct libmnt_update *upd;
	struct stat st;

	/* No utab, or an empty one: nothing to drop, and no lock to take for it. */
	if (stat(utab_path(), &st) < 0 ? errno == ENOENT : st.st_size == 0)
		return;
	upd = mnt_new_update();
	if (upd && mnt_update_set_fs(upd, 0, target, NULL) == 0)
		(void)mnt_update_table(upd, NULL);
	mnt_free_update(upd);
}
