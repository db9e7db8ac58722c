/* kubelet-record.c - a CSI path's owner by kubelet's vol_data.json.  See kubelet-record.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kubelet-record.h"
#include "macro.h"

#define RECORD_MAX (64 * 1024)
#define MAX_PARTS 8

/* Splits rel ("a/b/c") into at most MAX_PARTS components in buf; returns their number, or
 * -1 for more. */
static int split(const char *rel, char *buf, size_t size, char *parts[MAX_PARTS])
{
	int n = 0;

	if ((size_t)snprintf(buf, size, "%s", rel) >= size)
		return -1;
	for (char *s = buf, *save = NULL, *t; (t = strtok_r(s, "/", &save)); s = NULL) {
		if (n == MAX_PARTS)
			return -1;
		parts[n++] = t;
	}
	return n;
}

/* The length of kubelet_root as a prefix of the paths below it ("/": none). */
static size_t root_len(const char *kubelet_root)
{
	return streq(kubelet_root, "/") ? 0 : strlen(kubelet_root);
}

bool kubelet_path_in_csi_dirs(const char *kubelet_root, const char *path)
{
	size_t rl = root_len(kubelet_root);
	const char *rel;

	if (strncmp(path, kubelet_root, rl) != 0 || path[rl] != '/')
		return false;
	rel = path + rl + 1;
	return (startswith(rel, "pods/") && rel[5]) || (startswith(rel, "plugins/") && rel[8]);
}

bool kubelet_csi_record_path(const char *kubelet_root, const char *path, char *ret_record,
			     size_t size)
{
	size_t rl = root_len(kubelet_root);
	char buf[4096], *p[MAX_PARTS];
	int n, w = -1;

	if (strncmp(path, kubelet_root, rl) != 0 || path[rl] != '/')
		return false;
	n = split(path + rl + 1, buf, sizeof(buf), p);
	kubelet_root = rl ? kubelet_root : "";
	if (n == 6 && streq(p[0], "pods") && streq(p[2], "volumes") &&
	    streq(p[3], "kubernetes.io~csi") && streq(p[5], "mount"))
		w = snprintf(ret_record, size,
			     "%s/pods/%s/volumes/kubernetes.io~csi/%s/vol_data.json", kubelet_root,
			     p[1], p[4]);
	else if (n >= 6 && streq(p[0], "plugins") && streq(p[1], "kubernetes.io") &&
		 streq(p[2], "csi") && streq(p[3], "volumeDevices") &&
		 (streq(p[4], "staging") || streq(p[4], "publish")))
		w = snprintf(ret_record, size,
			     "%s/plugins/kubernetes.io/csi/volumeDevices/%s/data/vol_data.json",
			     kubelet_root, p[5]);
	else if (n == 6 && streq(p[0], "plugins") && streq(p[1], "kubernetes.io") &&
		 streq(p[2], "csi") && !streq(p[3], "volumeDevices") && streq(p[5], "globalmount"))
		w = snprintf(ret_record, size, "%s/plugins/kubernetes.io/csi/%s/%s/vol_data.json",
			     kubelet_root, p[3], p[4]);
	return w > 0 && (size_t)w < size;
}

/* kubelet's record at path (a plain file of at most RECORD_MAX bytes: a link or anything
 * large is not its record), parsed; NULL when there is none. */
static json_t *record_load(const char *record)
{
	_cleanup_close_ int fd = -1;
	struct stat st;

	fd = open(record, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > RECORD_MAX)
		return NULL;
	return json_loadfd(fd, JSON_REJECT_DUPLICATES, NULL);
}

/* Whether kubelet's record at path names driver. */
static bool record_names_driver(const char *record, const char *driver)
{
	json_t *o = record_load(record);
	const char *d = json_string_value(json_object_get(o, "driverName"));
	bool ok = d && streq(d, driver);

	json_decref(o);
	return ok;
}

bool kubelet_record_owns(const char *kubelet_root, const char *path, const char *driver,
			 const char *volume_id)
{
	char record[4096];
	json_t *o;
	const char *d, *h;
	bool owns;

	if (!kubelet_root || !driver || !volume_id ||
	    !kubelet_csi_record_path(kubelet_root, path, record, sizeof(record)))
		return false;
	o = record_load(record);
	if (!o)
		return false;
	d = json_string_value(json_object_get(o, "driverName"));
	h = json_string_value(json_object_get(o, "volumeHandle"));
	owns = d && h && streq(d, driver) && streq(h, volume_id);
	json_decref(o);
	return owns;
}

/* Calls fn for each <dir>/<pv>/mount whose <dir>/<pv>/vol_data.json names driver. */
static int walk_pv_dirs(const char *dir, const char *driver,
			int (*fn)(const char *target, void *userdata), void *userdata)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d = opendir(dir);
	int r = 0;

	if (!d)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	while (r >= 0 && (de = readdir(d))) {
		if (de->d_name[0] == '.' ||
		    snprintf(path, sizeof(path), "%s/%s/vol_data.json", dir, de->d_name) >=
			    (int)sizeof(path) ||
		    !record_names_driver(path, driver))
			continue;
		if (snprintf(path, sizeof(path), "%s/%s/mount", dir, de->d_name) <
		    (int)sizeof(path))
			r = fn(path, userdata);
	}
	closedir(d);
	return r;
}

int kubelet_recorded_targets(const char *kubelet_root, const char *driver,
			     int (*fn)(const char *target, void *userdata), void *userdata)
{
	char pods[PATH_MAX], dir[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (snprintf(pods, sizeof(pods), "%s/pods", kubelet_root) >= (int)sizeof(pods))
		return -ENAMETOOLONG;
	d = opendir(pods);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while (r >= 0 && (de = readdir(d))) {
		if (de->d_name[0] == '.' ||
		    snprintf(dir, sizeof(dir), "%s/%s/volumes/kubernetes.io~csi", pods,
			     de->d_name) >= (int)sizeof(dir))
			continue;
		r = walk_pv_dirs(dir, driver, fn, userdata);
	}
	closedir(d);
	return r;
}
