/* config.h - the agent's settings: defaults, then the config file (JSON, keys named like the
 * flags without the leading dashes), then the command-line flags, each overriding the last.
 *
 * One table describes every option of the agent, and each plugin has its own table of its
 * options (plugin-option.h), which are read the same way and set in the plugin itself: the
 * agent's configuration holds no plugin's field.  So flags, file keys, defaults and --help
 * never disagree. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"

#define CONFIG_DEFAULT_PATH "/etc/volagent/volagent.json"

struct agent_config {
	char *config_path;
	char *root_dir;
	char *state_dir;
	char *secret_dir;
	char *pods_dir;
	bool insecure_pods_dir; /* tests only: spec files believed whoever wrote them */
	char *log_level;
	unsigned workers;
	uint64_t backoff_max_ms;
	uint64_t resync_ms;
	char *mount_events; /* "auto" or "off" */
	bool device_inventory;
	uint64_t health_interval_ms;
	uint64_t stale_stage_after_ms;
	/* CSI */
	bool csi;	     /* also set by an endpoint (--csi-endpoint or $CSI_ENDPOINT) */
	bool csi_explicit;   /* csi was given by a flag or the config file */
	bool csi_controller; /* also serve the CSI Controller service (needs csi) */
	char *csi_endpoint;
	char *driver_name;
	char *node_id;
	char *kubelet_root_dir;
	bool csi_registration;
	char *csi_socket_group;
	unsigned max_volumes_per_node;
	unsigned csi_workers;
	uint64_t csi_grace_ms;
	uint64_t stats_timeout_ms;
	/* local services */
	char *admin_socket;
	char *admin_socket_group;
	char *metrics_address;
	bool metrics_network;
};

/* Parses `volagent run` arguments (argv[0] is "run") into cfg and the plugins' options (set
 * to their defaults first).  Returns 0, 1 when --help was given (usage printed), or -EINVAL
 * with err naming the flag or file key and the reason. */
int config_parse(int argc, char **argv, struct agent_config *cfg, struct error_info *err);
void config_done(struct agent_config *cfg);
void config_usage(FILE *f);
/* "500ms", "30s", "2m", "1h" -> milliseconds.  Returns 0 or -EINVAL. */
int config_parse_duration(const char *s, uint64_t *ret_ms);
