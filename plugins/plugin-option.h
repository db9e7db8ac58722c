/* plugin-option.h - a plugin's own settings (`volagent run` flags and config file keys),
 * described by a table in the plugin itself, so that the core holds no plugin's field: the
 * configuration code walks every plugin's table for its flags, config keys, defaults and
 * --help lines (and the README's flag table is made from --help).
 *
 * Values are set once, before the agent starts (config parsing, or a test), and only read
 * afterwards, so the plugins stay stateless const tables that need no lock. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "error.h"

struct volume_plugin;

enum plugin_option_type {
	PLUGIN_OPTION_STRING,	/* any string the set function accepts */
	PLUGIN_OPTION_DURATION, /* "500ms", "30s", "2m", "1h"; more than zero */
};

struct plugin_option {
	const char *name; /* the flag without "--" and the config key: "nfs-mode" */
	enum plugin_option_type type;
	const char *def;  /* the default, written as a flag value */
	const char *help; /* one line for --help and the README */
	/* Checks and stores a value: the string as given, and for a duration its length in
	 * milliseconds (already checked).  Returns 0, or -EINVAL with err saying why without
	 * naming the option (the caller prefixes the flag or key), e.g. "\"x\" is not shared or
	 * direct". */
	int (*set)(const char *value, uint64_t ms, struct error_info *err);
};

/* The option called name in any plugin's table, or NULL. */
const struct plugin_option *plugin_option_find(const char *name);

/* Sets an option by name from a flag-style value (tests, and the configuration code after
 * parsing a duration).  Returns 0, or -EINVAL with err "<name>: <reason>". */
int plugin_option_set(const char *name, const char *value, struct error_info *err);

/* Sets every plugin option to its default again.  Returns 0 or the first error. */
int plugin_options_reset(struct error_info *err);

/* Where the agent keeps its state (the journal's directory): plugins keep their own records
 * below it (rbd: <state-dir>/rbd).  Set (copied) once at startup; NULL until then. */
void plugin_set_state_dir(const char *state_dir);
const char *plugin_state_dir(void);
