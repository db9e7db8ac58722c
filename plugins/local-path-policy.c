/* local-path-policy.c - the host paths a `local` volume may expose.  See local-path-policy.h.
 *
 * The lexical rules run at validation (a spec file or a CSI call is refused at once, naming
 * local.path); the filesystem check runs on the opened directory at set-up, so that a
 * pseudo-filesystem mounted anywhere (a proc at /mnt/p) is refused too, and what is checked
 * is what is bound. */
#include <errno.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/vfs.h>

#include "local-path-policy.h"
#include "macro.h"
#include "path-util.h"
#include "plugin-option.h"

#define MAX_PREFIXES 32

static char prefixes[MAX_PREFIXES][PATH_MAX];
static size_t n_prefixes;

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef BPF_FS_MAGIC
#define BPF_FS_MAGIC 0xcafe4a11
#endif
#ifndef TRACEFS_MAGIC
#define TRACEFS_MAGIC 0x74726163
#endif

/* Filesystems of the kernel's own objects: binding one into a pod hands it the host. */
static const struct {
	unsigned long magic;
	const char *name;
} pseudo_fs[] = {
	{ PROC_SUPER_MAGIC, "proc" },	    { SYSFS_MAGIC, "sysfs" },
	{ CGROUP_SUPER_MAGIC, "cgroup" },   { CGROUP2_SUPER_MAGIC, "cgroup2" },
	{ SECURITYFS_MAGIC, "securityfs" }, { DEBUGFS_MAGIC, "debugfs" },
	{ TRACEFS_MAGIC, "tracefs" },	    { BPF_FS_MAGIC, "bpf" },
	{ EFIVARFS_MAGIC, "efivarfs" },	    { PSTOREFS_MAGIC, "pstore" },
	{ SELINUX_MAGIC, "selinuxfs" },	    { BINFMTFS_MAGIC, "binfmt_misc" },
};

/* Where those filesystems are mounted on every Linux host: refused by name, before any
 * I/O (devtmpfs reports itself as tmpfs to statfs, so /dev is known by its path). */
static const char *const pseudo_dirs[] = { "/proc", "/sys", "/dev" };

int local_path_policy_check(const char *path, struct error_info *err)
{
	const struct {
		const char *dir, *what;
	} own[] = {
		{ plugin_state_dir(), "the agent's state dir" },
		{ plugin_root_dir(), "the agent's root dir" },
		{ plugin_kubelet_dir(), "the kubelet dir" },
	};

	if (streq(path, "/"))
		return err_set(
			err, -EPERM,
			"path: / is the host's root directory; a local volume never exposes it");
	for (size_t i = 0; i < ARRAY_SIZE(pseudo_dirs); i++)
		if (streq(path, pseudo_dirs[i]) ||
		    (path_is_under(path, pseudo_dirs[i]) && !streq(pseudo_dirs[i], "/dev")))
			return err_set(err, -EPERM,
				       "path: %s is in %s, a pseudo-filesystem of the kernel's "
				       "own objects; a local volume never exposes it",
				       path, pseudo_dirs[i]);
	if (startswith(path, "/dev/"))
		return 0; /* a device: local.c checks it is a block device */
	for (size_t i = 0; i < ARRAY_SIZE(own); i++)
		if (own[i].dir &&
		    (path_is_under(path, own[i].dir) || path_is_under(own[i].dir, path)))
			return err_set(
				err, -EPERM,
				"path: %s holds or is in %s %s; a local volume never exposes it",
				path, own[i].what, own[i].dir);
	if (n_prefixes == 0)
		return 0;
	for (size_t i = 0; i < n_prefixes; i++)
		if (path_is_under(path, prefixes[i]))
			return 0;
	return err_set(err, -EPERM,
		       "path: %s is not below a --local-path-prefix (%s%s); refusing it", path,
		       prefixes[0], n_prefixes > 1 ? ", ..." : "");
}

int local_path_policy_check_below_prefix(const char *path, struct error_info *err)
{
	if (n_prefixes == 0)
		return err_set(err, -EPERM,
			       "path: %s: no --local-path-prefix is configured, and volumes are "
			       "made and deleted only below one",
			       path);
	return local_path_policy_check(path, err);
}

int local_path_policy_check_dir(int fd, const char *path, struct error_info *err)
{
	struct statfs sf;

	if (streq(path, "/dev") || startswith(path, "/dev/"))
		return err_set(err, -EPERM,
			       "path: %s is a directory in /dev (devtmpfs); only a block device "
			       "there is a local volume",
			       path);
	if (fstatfs(fd, &sf) < 0)
		return err_set(err, -errno, "path: %s: statfs: %s", path, strerror(errno));
	for (size_t i = 0; i < ARRAY_SIZE(pseudo_fs); i++)
		if ((unsigned long)sf.f_type == pseudo_fs[i].magic)
			return err_set(err, -EPERM,
				       "path: %s is on %s, a pseudo-filesystem of the kernel's own "
				       "objects; a local volume never exposes it",
				       path, pseudo_fs[i].name);
	return 0;
}

/* --local-path-prefix: each one adds a prefix; "" (the default) clears the list. */
int local_path_policy_add_prefix(const char *value, uint64_t ms, struct error_info *err)
{
	if (!*value) {
		n_prefixes = 0;
		return 0;
	}
	if (path_validate_absolute(value, "prefix", err) < 0)
		return -EINVAL;
	if (streq(value, "/"))
		return err_set(err, -EINVAL, "\"/\" would allow every path; name a dir");
	if (n_prefixes == MAX_PREFIXES)
		return err_set(err, -EINVAL, "more than %d prefixes", MAX_PREFIXES);
	snprintf(prefixes[n_prefixes++], PATH_MAX, "%s", value);
	return 0;
}
