/* nfs-spec.h - an NFS volume as its spec describes it: the server (a host name or an IP
 * address, IPv6 bracketed or not), the export path, the mount options (the spec's, the CSI
 * mountOptions string, "ro"), checked and normalized into a struct nfs_volume ready to
 * mount; the volume's name ("nfs:server:/path", with a hash of the options) and the spec
 * rebuilt from it; and the texts about a volume, with the values of sensitive mount options
 * masked (mount-options.h; the spec attribute "sensitiveMountOptions" lists more names).
 *
 * Never blocks, never logs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "volume-spec.h"

#define NFS_DEFAULT_PORT 2049
#define NFS_SERVER_MAX 253
#define NFS_EXPORT_MAX 1024
/* "10.0.2.2:/export", "[fd00::1]:/x" */
#define NFS_SOURCE_MAX (NFS_SERVER_MAX + NFS_EXPORT_MAX + 4)

/* One NFS volume as the spec describes it, ready to mount. */
struct nfs_volume {
	char server[NFS_SERVER_MAX + 1]; /* bare: "10.0.2.2", "fd00::1", "nfs.example" */
	char path[NFS_EXPORT_MAX + 1];	 /* the export, normalized: "/export" */
	char source[NFS_SOURCE_MAX];	 /* "10.0.2.2:/export", "[fd00::1]:/x" */
	char **options;			 /* spec options, CSI mountOptions, then "ro" */
	const char *sensitive;		 /* the spec's sensitiveMountOptions, or NULL */
	unsigned port;			 /* for the reachability check */
};

/* Builds v from spec; read_only adds "ro" (the spec's own readOnly always does).  Free v
 * with nfs_volume_done also on failure.  Returns 0, or -EINVAL naming the field. */
int nfs_volume_load(const struct volume_spec *spec, bool read_only, struct nfs_volume *v,
		    struct error_info *err);
void nfs_volume_done(struct nfs_volume *v);

/* The end of an operation on v: masks every sensitive option value that err's message may
 * have picked up and frees v.  Returns r. */
int nfs_volume_finish(struct nfs_volume *v, int r, struct error_info *err);

/* The options of the mount: the spec's, plus nosuid and nodev unless it asks suid or dev
 * (a vector of v's strings: free the vector only).  Not in v->options, which names the
 * volume: the names of the mounts older agents made stay the same. */
char **nfs_volume_mount_options(const struct nfs_volume *v);

/* The options of the mount for a message: "vers=4.1,password=****,nosuid,nodev". */
void nfs_volume_options_text(const struct nfs_volume *v, char *buf, size_t size);

/* "10.0.2.2:2049", "[fd00::1]:2049": the server as messages and its health key name it. */
void nfs_volume_host_port(const struct nfs_volume *v, char *buf, size_t size);

/* The spec ops (plugin.h): validate, get_volume_name, construct_spec. */
int nfs_spec_validate(const struct volume_spec *spec, struct error_info *err);
char *nfs_spec_volume_name(const struct volume_spec *spec);
int nfs_spec_from_name(const char *volume_name, const char *mount_path,
		       struct volume_spec **ret_spec, struct error_info *err);
