/* plugin-settings.c - see plugin-settings.h. */
#include "plugin-settings.h"

static struct plugin_settings current = {
	.nfs_mode = "shared",
	.nfs_op_timeout_ms = 30000,
	.nfs_connect_timeout_ms = 2000,
	.nfs_unmount_escalate_ms = 10000,
	.rbd_attach_methods = "krbd,nbd,fuse",
	.rbd_op_timeout_ms = 30000,
	.rbd_run_dir = "/var/lib/volagent/state/rbd",
};

const struct plugin_settings *plugin_settings(void)
{
	return &current;
}

void plugin_settings_set(const struct plugin_settings *s)
{
	current = *s;
}
