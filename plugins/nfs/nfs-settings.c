/* nfs-settings.c - see nfs-settings.h. */
#include <errno.h>
#include <string.h>

#include "macro.h"
#include "nfs-settings.h"
#include "server-health.h"

/* The defaults here and in the option table below agree (test-config checks). */
struct nfs_settings nfs_settings = {
	.direct = false,
	.op_timeout_ms = 30000,
	.connect_timeout_ms = 2000,
	.unmount_escalate_ms = 10000,
};

static int set_mode(const char *value, uint64_t ms, struct error_info *err)
{
	if (!streq(value, "shared") && !streq(value, "direct"))
		return err_set(err, -EINVAL, "\"%s\" is not shared or direct", value);
	nfs_settings.direct = streq(value, "direct");
	return 0;
}

static int set_op_timeout(const char *value, uint64_t ms, struct error_info *err)
{
	nfs_settings.op_timeout_ms = ms;
	return 0;
}

static int set_connect_timeout(const char *value, uint64_t ms, struct error_info *err)
{
	nfs_settings.connect_timeout_ms = ms;
	return 0;
}

static int set_unmount_escalate(const char *value, uint64_t ms, struct error_info *err)
{
	nfs_settings.unmount_escalate_ms = ms;
	return 0;
}

static int set_hung_after(const char *value, uint64_t ms, struct error_info *err)
{
	server_health_set_hung_after(ms);
	return 0;
}

const struct plugin_option nfs_options[] = {
	{ "nfs-mode", PLUGIN_OPTION_STRING, "shared",
	  "shared: one NFS mount per export on the node, bound into pods; direct: one per pod",
	  set_mode },
	{ "nfs-timeout", PLUGIN_OPTION_DURATION, "30s",
	  "an NFS mount, unmount or statfs is given up after this", set_op_timeout },
	{ "nfs-connect-timeout", PLUGIN_OPTION_DURATION, "2s",
	  "the TCP reachability check of the NFS server before mounting", set_connect_timeout },
	{ "nfs-hung-after", PLUGIN_OPTION_DURATION, "5s",
	  "a mount to an NFS server in flight this long makes the server down: other mounts to "
	  "it fail at once (UNAVAILABLE) until it answers a probe; 0: only a timeout does",
	  set_hung_after },
	{ "nfs-unmount-escalate", PLUGIN_OPTION_DURATION, "10s",
	  "a stuck NFS unmount is retried with MNT_FORCE, then MNT_DETACH, after this",
	  set_unmount_escalate },
	{ 0 }
};
