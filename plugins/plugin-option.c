/* plugin-option.c - setting the plugins' own options by name (see plugin-option.h) and the
 * state directory they keep their records under. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "plugin-option.h"
#include "plugin.h"
#include "time-util.h"

static char state_dir[PATH_MAX];

void plugin_set_state_dir(const char *dir)
{
	snprintf(state_dir, sizeof(state_dir), "%s", dir ? dir : "");
}

const char *plugin_state_dir(void)
{
	return state_dir[0] ? state_dir : NULL;
}

const struct plugin_option *plugin_option_find(const char *name)
{
	const struct volume_plugin *p;

	for (size_t i = 0; (p = plugin_registry_get(i)); i++)
		for (const struct plugin_option *o = p->options; o && o->name; o++)
			if (streq(o->name, name))
				return o;
	return NULL;
}

static int option_set(const struct plugin_option *o, const char *value, struct error_info *err)
{
	uint64_t ms = 0;
	int r;

	if (o->type == PLUGIN_OPTION_DURATION && (parse_duration_ms(value, &ms) < 0 || ms == 0))
		return err_set(err, -EINVAL,
			       "%s: \"%s\" is not a duration such as 500ms, 30s, 2m or 1h", o->name,
			       value);
	r = o->set(value, ms, err);
	if (r < 0)
		err_prefix(err, "%s", o->name);
	return r;
}

int plugin_option_set(const char *name, const char *value, struct error_info *err)
{
	const struct plugin_option *o = plugin_option_find(name);

	if (!o)
		return err_set(err, -EINVAL, "%s: no plugin has this option", name);
	return option_set(o, value, err);
}

int plugin_options_reset(struct error_info *err)
{
	const struct volume_plugin *p;
	int r;

	for (size_t i = 0; (p = plugin_registry_get(i)); i++)
		for (const struct plugin_option *o = p->options; o && o->name; o++) {
			r = option_set(o, o->def, err);
			if (r < 0)
				return r;
		}
	return 0;
}
