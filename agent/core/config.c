/* config.c - see config.h. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "macro.h"
#include "plugin-option.h"
#include "plugin.h"
#include "time-util.h"

enum option_type {
	OPT_PATH,
	OPT_STRING,
	OPT_UINT,
	OPT_COUNT,
	OPT_DURATION,
	OPT_LOG_LEVEL,
	OPT_BOOL,
	OPT_PLUGINS, /* not an option: where the plugins' options are listed */
	OPT_PLUGIN,  /* a plugin's option, set through its table entry */
};

struct option_def {
	const char *name; /* the flag without "--", and the config file key */
	enum option_type type;
	size_t offset;
	const char *def;
	const char *help;
};

/* An option as parsing sees it: one of the agent's, or a plugin's. */
struct option_entry {
	struct option_def def;
	const struct plugin_option *plugin; /* OPT_PLUGIN */
};

#define OFF(field) offsetof(struct agent_config, field)

static const struct option_def options[] = {
	{ "root-dir", OPT_PATH, OFF(root_dir), "/var/lib/volagent",
	  "pod volume dirs and node-wide device mounts live below this" },
	{ "state-dir", OPT_PATH, OFF(state_dir), "/var/lib/volagent/state",
	  "the journal and the instance lock" },
	{ "secret-dir", OPT_PATH, OFF(secret_dir), "/run/volagent",
	  "key files for helpers (rbd userKey), each removed once its helper has read it: keep it "
	  "on a tmpfs so no key reaches a disk" },
	{ "pods-dir", OPT_PATH, OFF(pods_dir), "/etc/volagent/pods.d",
	  "pod spec files (*.json), one pod each" },
	{ "insecure-pods-dir", OPT_BOOL, OFF(insecure_pods_dir), "false",
	  "for tests only: read spec files whoever owns them and the pods dir (by default a file "
	  "is read only when it and every directory above it are root's and writable by root "
	  "alone)" },
	{ "log-level", OPT_LOG_LEVEL, OFF(log_level), "info", "debug, info, warning or error" },
	{ "workers", OPT_UINT, OFF(workers), "8",
	  "worker threads for mounts and other blocking work" },
	{ "backoff-max", OPT_DURATION, OFF(backoff_max_ms), "2m",
	  "longest wait between retries of a failing operation (the first is 500ms)" },
	{ "resync-interval", OPT_DURATION, OFF(resync_ms), "60s",
	  "full pass with a fresh read of the mount table this often" },
	{ "mount-events", OPT_STRING, OFF(mount_events), "auto",
	  "follow the mount table by the kernel's mount events where it has them (auto), or "
	  "always by libmount's monitor and mountinfo (off)" },
	{ "device-inventory", OPT_BOOL, OFF(device_inventory), "true",
	  "keep <state-dir>/devices.json current from udev events and log device renames" },
	{ "health-interval", OPT_DURATION, OFF(health_interval_ms), "10s",
	  "check mounted network and attached volumes this often, and heal broken ones" },
	{ "stale-stage-after", OPT_DURATION, OFF(stale_stage_after_ms), "5m",
	  "a volume staged or attached with no pod publishing it this long is reported as lost "
	  "(status, metric, one log line; never unstaged by the agent); 0: never" },
	/* Here --help lists the plugins' own options (plugin-option.h), in registry order. */
	{ NULL, OPT_PLUGINS, 0, NULL, NULL },
	{ "csi", OPT_BOOL, OFF(csi), "false",
	  "serve the CSI Identity and Node services (on by itself with --csi-endpoint or "
	  "CSI_ENDPOINT)" },
	{ "controller", OPT_BOOL, OFF(csi_controller), "false",
	  "also serve the CSI Controller service on the CSI socket: local directory volumes "
	  "made below a StorageClass's basePath on this node (needs --csi and a "
	  "--local-path-prefix)" },
	{ "csi-endpoint", OPT_STRING, OFF(csi_endpoint), "",
	  "unix socket of the CSI services; empty: $CSI_ENDPOINT, else "
	  "unix://<kubelet-root-dir>/plugins/<driver-name>/csi.sock" },
	{ "driver-name", OPT_STRING, OFF(driver_name), "csi.volagent.io",
	  "the CSI driver name kubelet knows this plugin by" },
	{ "node-id", OPT_STRING, OFF(node_id), "", "the CSI node id; empty: the hostname" },
	{ "kubelet-root-dir", OPT_PATH, OFF(kubelet_root_dir), "/var/lib/kubelet",
	  "CSI target and staging paths must lie below it" },
	{ "csi-registration", OPT_BOOL, OFF(csi_registration), "true",
	  "serve kubelet's plugin registration (no node-driver-registrar sidecar needed)" },
	{ "csi-socket-group", OPT_STRING, OFF(csi_socket_group), "",
	  "group of the CSI socket (mode 0660); empty: root only (0600)" },
	{ "max-volumes-per-node", OPT_COUNT, OFF(max_volumes_per_node), "0",
	  "reported by NodeGetInfo; 0: no limit reported" },
	{ "csi-workers", OPT_UINT, OFF(csi_workers), "16",
	  "CSI calls handled at once (each waits for its mount)" },
	{ "csi-grace", OPT_DURATION, OFF(csi_grace_ms), "10s",
	  "on SIGTERM, CSI calls in flight get this long to finish" },
	{ "stats-timeout", OPT_DURATION, OFF(stats_timeout_ms), "5s",
	  "NodeGetVolumeStats gives up on a hung mount after this and reports it abnormal" },
	{ "admin-socket", OPT_STRING, OFF(admin_socket), "",
	  "where `volagent status` asks; empty: <state-dir>/admin.sock; \"off\": none" },
	{ "admin-socket-group", OPT_STRING, OFF(admin_socket_group), "",
	  "group allowed on the admin and metrics sockets (0660); empty: root only (0600)" },
	{ "metrics-address", OPT_STRING, OFF(metrics_address), "",
	  "Prometheus metrics at /metrics: unix:/path or a loopback host:port; empty: "
	  "unix:<state-dir>/metrics.sock; \"off\": none" },
	{ "metrics-network", OPT_BOOL, OFF(metrics_network), "false",
	  "let metrics-address be any IP address:port of the node (0.0.0.0:PORT, a node IP), "
	  "for Prometheus on the network; without it only loopback" },
};

int config_parse_duration(const char *s, uint64_t *ret_ms)
{
	return parse_duration_ms(s, ret_ms);
}

/* The agent's options and every plugin's, in --help order: built once per parse. */
static struct option_entry *all_options;
static size_t n_all_options;

static int collect_options(void)
{
	const struct volume_plugin *p;
	size_t n = 0, k = 0;

	for (size_t i = 0; (p = plugin_registry_get(i)); i++)
		for (const struct plugin_option *o = p->options; o && o->name; o++)
			n++;
	free(all_options);
	all_options = calloc(ARRAY_SIZE(options) + n, sizeof(*all_options));
	if (!all_options)
		return -ENOMEM;
	for (size_t j = 0; j < ARRAY_SIZE(options); j++) {
		if (options[j].type != OPT_PLUGINS) {
			all_options[k++].def = options[j];
			continue;
		}
		for (size_t i = 0; (p = plugin_registry_get(i)); i++)
			for (const struct plugin_option *o = p->options; o && o->name; o++)
				all_options[k++] = (struct option_entry){
					{ o->name, OPT_PLUGIN, 0, o->def, o->help }, o
				};
	}
	n_all_options = k;
	return 0;
}

/* Stores value for option o; where names the source for messages ("--workers", "key workers
 * in /etc/..."). */
static int set_option(struct agent_config *cfg, const struct option_entry *e, const char *value,
		      const char *where, struct error_info *err)
{
	const struct option_def *o = &e->def;
	void *field = (char *)cfg + o->offset; /* not used for OPT_PLUGIN */
	char *end;
	unsigned long u;

	switch (o->type) {
	case OPT_PATH:
		if (value[0] != '/')
			return err_set(err, -EINVAL, "%s: must be an absolute path, got \"%s\"",
				       where, value);
		/* fall through */
	case OPT_STRING:
		if (o->offset == OFF(mount_events) && !streq(value, "auto") && !streq(value, "off"))
			return err_set(err, -EINVAL, "%s: \"%s\" is not auto or off", where, value);
		free(*(char **)field);
		*(char **)field = strdup(value);
		return *(char **)field ? 0 : -ENOMEM;
	case OPT_LOG_LEVEL:
		if (log_set_level_name(value) < 0)
			return err_set(err, -EINVAL,
				       "%s: \"%s\" is not a level (debug, info, warning, error)",
				       where, value);
		free(*(char **)field);
		*(char **)field = strdup(value);
		return *(char **)field ? 0 : -ENOMEM;
	case OPT_COUNT:
		errno = 0;
		u = strtoul(value, &end, 10);
		if (errno || end == value || *end || value[0] == '-' || u > 1000000)
			return err_set(err, -EINVAL, "%s: \"%s\" is not a number from 0 to 1000000",
				       where, value);
		*(unsigned *)field = (unsigned)u;
		return 0;
	case OPT_UINT:
		errno = 0;
		u = strtoul(value, &end, 10);
		if (errno || end == value || *end || value[0] == '-' || u == 0 || u > 1024)
			return err_set(err, -EINVAL, "%s: \"%s\" is not a number from 1 to 1024",
				       where, value);
		*(unsigned *)field = (unsigned)u;
		return 0;
	case OPT_BOOL:
		if (!streq(value, "true") && !streq(value, "false"))
			return err_set(err, -EINVAL, "%s: \"%s\" is not true or false", where,
				       value);
		*(bool *)field = streq(value, "true");
		if (o->offset == OFF(csi))
			cfg->csi_explicit = !streq(where, "default");
		return 0;
	case OPT_DURATION:
		if (config_parse_duration(value, (uint64_t *)field) < 0 || *(uint64_t *)field == 0)
			return err_set(err, -EINVAL,
				       "%s: \"%s\" is not a duration such as 500ms, 30s, 2m or 1h",
				       where, value);
		return 0;
	case OPT_PLUGIN: {
		uint64_t ms = 0;
		int r;

		if (e->plugin->type == PLUGIN_OPTION_DURATION &&
		    (config_parse_duration(value, &ms) < 0 || ms == 0))
			return err_set(err, -EINVAL,
				       "%s: \"%s\" is not a duration such as 500ms, 30s, 2m or 1h",
				       where, value);
		r = e->plugin->set(value, ms, err);
		if (r < 0) {
			if (!err || !err->code)
				err_set(err, r, "%s", strerror(-r));
			err_prefix(err, "%s", where);
		}
		return r;
	}
	case OPT_PLUGINS:
		break;
	}
	return -EINVAL;
}

static const struct option_entry *find_option(const char *name)
{
	for (size_t i = 0; i < n_all_options; i++)
		if (streq(all_options[i].def.name, name))
			return &all_options[i];
	return NULL;
}

static int load_file(struct agent_config *cfg, const char *path, bool must_exist,
		     struct error_info *err)
{
	json_auto_t *root = NULL;
	json_error_t jerr;
	const char *key;
	json_t *v;
	int r;

	if (access(path, F_OK) < 0 && errno == ENOENT && !must_exist)
		return 0;
	root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return err_set(err, -EINVAL, "config file %s line %d: %s", path, jerr.line,
			       jerr.text);
	if (!json_is_object(root))
		return err_set(err, -EINVAL, "config file %s: must be a JSON object", path);
	json_object_foreach(root, key, v)
	{
		const struct option_entry *e = find_option(key);
		const struct option_def *o = e ? &e->def : NULL;
		char where[512], buf[32];
		const char *value;

		snprintf(where, sizeof(where), "config file %s, key \"%s\"", path, key);
		if (!o || streq(key, "config"))
			return err_set(err, -EINVAL, "%s: unknown key", where);
		if (json_is_array(v) && o->type == OPT_PLUGIN) {
			/* A repeatable plugin option: each string is one occurrence. */
			size_t i;
			json_t *item;

			json_array_foreach(v, i, item)
			{
				if (!json_is_string(item))
					return err_set(err, -EINVAL,
						       "%s: must be a list of strings", where);
				r = set_option(cfg, e, json_string_value(item), where, err);
				if (r < 0)
					return r;
			}
			continue;
		} else if (json_is_string(v)) {
			value = json_string_value(v);
		} else if (json_is_integer(v) && (o->type == OPT_UINT || o->type == OPT_COUNT)) {
			snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
			value = buf;
		} else if (json_is_boolean(v) && o->type == OPT_BOOL) {
			value = json_is_true(v) ? "true" : "false";
		} else {
			return err_set(err, -EINVAL, "%s: must be a %s", where,
				       o->type == OPT_UINT || o->type == OPT_COUNT
					       ? "string or a number"
				       : o->type == OPT_BOOL ? "boolean"
							     : "string");
		}
		r = set_option(cfg, e, value, where, err);
		if (r < 0)
			return r;
	}
	return 0;
}

void config_usage(FILE *f)
{
	fprintf(f,
		"Usage: volagent run [OPTIONS]\n\n"
		"Converge this node's mounts with the pod spec files in --pods-dir.\n\n"
		"  --config FILE          JSON file whose keys are these options without \"--\"\n"
		"                         (default %s, if it exists)\n",
		CONFIG_DEFAULT_PATH);
	if (collect_options() < 0)
		return;
	for (size_t i = 0; i < n_all_options; i++) {
		const struct option_def *o = &all_options[i].def;
		char flag[64];
		snprintf(flag, sizeof(flag), "%s%s", o->name,
			 o->type == OPT_BOOL ? "[=BOOL]" : " VALUE");
		fprintf(f, "  --%-26s %s (default: %s)\n", flag, o->help,
			o->def[0] ? o->def : "empty");
	}
	fprintf(f, "  --help                 show this help\n");
}

void config_done(struct agent_config *cfg)
{
	free(all_options);
	all_options = NULL;
	n_all_options = 0;
	free(cfg->config_path);
	for (size_t i = 0; i < ARRAY_SIZE(options); i++)
		if (options[i].type == OPT_PATH || options[i].type == OPT_STRING ||
		    options[i].type == OPT_LOG_LEVEL) {
			char **p = (char **)((char *)cfg + options[i].offset);
			free(*p);
			*p = NULL;
		}
	cfg->config_path = NULL;
}

/* A bool flag's value: "--csi=false", "--csi false", or "--csi" alone for true. */
static const char *bool_value(int argc, char **argv)
{
	if (optarg)
		return optarg;
	if (optind < argc && (streq(argv[optind], "true") || streq(argv[optind], "false")))
		return argv[optind++];
	return "true";
}

static bool longopts_has_arg(const struct option *longopts, const char *name)
{
	for (size_t k = 0; longopts[k].name; k++)
		if (streq(longopts[k].name, name))
			return longopts[k].has_arg == required_argument;
	return false;
}

/* An endpoint (--csi-endpoint, else $CSI_ENDPOINT) turns CSI on by itself; with an explicit
 * csi false it is a contradiction, not something to guess about. */
static int check_csi(struct agent_config *cfg, struct error_info *err)
{
	const char *env = getenv("CSI_ENDPOINT");
	bool flag = cfg->csi_endpoint[0] != '\0';

	if (!flag && !(env && *env))
		return 0;
	if (!cfg->csi && cfg->csi_explicit)
		return err_set(err, -EINVAL,
			       "csi: false, but %s%s sets the CSI endpoint; remove one of the two",
			       flag ? "--csi-endpoint " : "CSI_ENDPOINT=",
			       flag ? cfg->csi_endpoint : env);
	cfg->csi = true;
	return 0;
}

int config_parse(int argc, char **argv, struct agent_config *cfg, struct error_info *err)
{
	_cleanup_free_ struct option *longopts = NULL;
	const char *config_path = NULL;
	size_t n = 0;
	int r, c, idx;

	memset(cfg, 0, sizeof(*cfg));
	r = collect_options();
	if (r < 0)
		return r;
	longopts = calloc(n_all_options + 3, sizeof(*longopts));
	if (!longopts)
		return -ENOMEM;
	for (size_t i = 0; i < n_all_options; i++) {
		const struct option_def *o = &all_options[i].def;
		r = set_option(cfg, &all_options[i], o->def, "default", err);
		if (r < 0)
			return r;
		/* "--csi" alone means true; "--csi=false" turns it off. */
		longopts[n++] = (struct option){ o->name,
						 o->type == OPT_BOOL ? optional_argument
								     : required_argument,
						 NULL, 0 };
	}
	longopts[n++] = (struct option){ "config", required_argument, NULL, 0 };
	longopts[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	longopts[n] = (struct option){ 0 };

	/* getopt_long accepts abbreviations ("--root" for "--root-dir"): a daemon must not guess
	 * which directory it was given, so every flag has to be spelled out. */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		size_t len;
		bool known = false;

		if (streq(a, "--"))
			break;
		if (!startswith(a, "--"))
			continue;
		len = strcspn(a + 2, "=");
		for (size_t k = 0; longopts[k].name && !known; k++)
			known = strlen(longopts[k].name) == len &&
				!strncmp(longopts[k].name, a + 2, len);
		if (!known)
			return err_set(err, -EINVAL, "unknown option '%.*s'", (int)len + 2, a);
		if (!strchr(a, '=') && longopts_has_arg(longopts, a + 2))
			i++; /* skip the value, which may itself start with "--" */
	}
	/* First pass: find --config and --help. */
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+h", longopts, &idx)) != -1) {
		if (c == 'h') {
			config_usage(stdout);
			return 1;
		}
		if (c == '?')
			return err_set(err, -EINVAL, "unknown or incomplete option '%s'",
				       argv[optind - 1]);
		if (c == 0 && streq(longopts[idx].name, "config"))
			config_path = optarg;
		else if (c == 0 && longopts[idx].has_arg == optional_argument)
			(void)bool_value(argc, argv);
	}
	if (optind < argc)
		return err_set(err, -EINVAL, "unexpected argument '%s'", argv[optind]);
	cfg->config_path = strdup(config_path ? config_path : CONFIG_DEFAULT_PATH);
	if (!cfg->config_path)
		return -ENOMEM;
	r = load_file(cfg, cfg->config_path, config_path != NULL, err);
	if (r < 0)
		return r;
	/* Second pass: flags override the file. */
	optind = 1;
	while ((c = getopt_long(argc, argv, "+h", longopts, &idx)) != -1) {
		char where[64];
		const struct option_entry *e;
		const struct option_def *o;

		if (c != 0 || streq(longopts[idx].name, "config"))
			continue;
		e = find_option(longopts[idx].name);
		o = &e->def;
		snprintf(where, sizeof(where), "--%s", o->name);
		r = set_option(cfg, e, o->type == OPT_BOOL ? bool_value(argc, argv) : optarg, where,
			       err);
		if (r < 0)
			return r;
	}
	return check_csi(cfg, err);
}
