/* test-config.c - defaults, the config file, flags overriding it, the errors that name the
 * flag or key at fault, and the plugins' own options (their tables, read the same way). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "plugin-option.h"
#include "plugin.h"
#include "testlib.h"

static int parse(struct agent_config *cfg, struct error_info *err, const char *const *args)
{
	char *argv[32];
	int argc = 0;

	argv[argc++] = (char *)"run";
	for (; *args; args++)
		argv[argc++] = (char *)*args;
	argv[argc] = NULL;
	return config_parse(argc, argv, cfg, err);
}

static void test_durations(void **state)
{
	uint64_t ms;

	assert_int_equal(config_parse_duration("500ms", &ms), 0);
	assert_int_equal(ms, 500);
	assert_int_equal(config_parse_duration("30s", &ms), 0);
	assert_int_equal(ms, 30000);
	assert_int_equal(config_parse_duration("2m", &ms), 0);
	assert_int_equal(ms, 120000);
	assert_int_equal(config_parse_duration("1h", &ms), 0);
	assert_int_equal(ms, 3600000);
	assert_int_equal(config_parse_duration("10", &ms), -EINVAL);
	assert_int_equal(config_parse_duration("-1s", &ms), -EINVAL);
	assert_int_equal(config_parse_duration("s", &ms), -EINVAL);
	assert_int_equal(config_parse_duration("5d", &ms), -EINVAL);
}

static void test_defaults_file_and_flags(void **state)
{
	char *dir = test_mkdtemp("config"), path[600];
	struct agent_config cfg;
	struct error_info err = { 0 };

	snprintf(path, sizeof(path), "%s/c.json", dir);
	assert_int_equal(test_write_file(path, "{\"root-dir\": \"/srv/va\", \"workers\": 3, "
					       "\"backoff-max\": \"30s\"}"),
			 0);
	assert_int_equal(parse(&cfg, &err,
			       (const char *[]){ "--config", path, "--workers", "5", NULL }),
			 0);
	assert_string_equal(cfg.root_dir, "/srv/va"); /* from the file */
	assert_int_equal(cfg.workers, 5);	      /* the flag wins */
	assert_int_equal(cfg.backoff_max_ms, 30000);
	assert_string_equal(cfg.pods_dir, "/etc/volagent/pods.d"); /* the default */
	assert_string_equal(cfg.state_dir, "/var/lib/volagent/state");
	assert_int_equal(cfg.resync_ms, 60000);
	assert_string_equal(cfg.mount_events, "auto");
	assert_false(cfg.csi);
	config_done(&cfg);
	assert_int_equal(parse(&cfg, &err, (const char *[]){ "--mount-events=off", NULL }), 0);
	assert_string_equal(cfg.mount_events, "off");
	config_done(&cfg);
	/* A bool flag alone is true and does not swallow the next flag. */
	assert_int_equal(parse(&cfg, &err,
			       (const char *[]){ "--csi", "--device-inventory=false", "--workers",
						 "2", NULL }),
			 0);
	assert_true(cfg.csi);
	assert_false(cfg.device_inventory);
	assert_int_equal(cfg.workers, 2);
	config_done(&cfg);
	assert_int_equal(parse(&cfg, &err,
			       (const char *[]){ "--device-inventory", "false", "--csi", "true",
						 NULL }),
			 0);
	assert_true(cfg.csi);
	assert_false(cfg.device_inventory);
	config_done(&cfg);
	test_rm_rf(dir);
	free(dir);
}

static void expect_error(const char *const *args, const char *text)
{
	struct agent_config cfg;
	struct error_info err = { 0 };

	assert_int_equal(parse(&cfg, &err, args), -EINVAL);
	if (!strstr(err_msg(&err), text))
		fail_msg("expected \"%s\" in \"%s\"", text, err_msg(&err));
	config_done(&cfg);
}

static void test_errors_name_the_culprit(void **state)
{
	char *dir = test_mkdtemp("config"), bad[600], unknown[600], badtype[600];

	expect_error((const char *[]){ "--no-such-flag", NULL }, "'--no-such-flag'");
	/* No abbreviations: "--root" is not "--root-dir". */
	expect_error((const char *[]){ "--root", "/x", NULL }, "unknown option '--root'");
	expect_error((const char *[]){ "--root=/x", NULL }, "unknown option '--root'");
	expect_error((const char *[]){ "--workers", "0", NULL }, "--workers: \"0\"");
	expect_error((const char *[]){ "--workers", "many", NULL }, "--workers: \"many\"");
	expect_error((const char *[]){ "--root-dir", "relative", NULL },
		     "--root-dir: must be an absolute path");
	expect_error((const char *[]){ "--backoff-max", "soon", NULL }, "--backoff-max");
	expect_error((const char *[]){ "--log-level", "loud", NULL }, "--log-level: \"loud\"");
	expect_error((const char *[]){ "extra", NULL }, "unexpected argument 'extra'");
	expect_error((const char *[]){ "--nfs-mode", "sometimes", NULL },
		     "nfs-mode: \"sometimes\"");
	expect_error((const char *[]){ "--rbd-attach-methods", "krbd,iscsi", NULL }, "\"iscsi\"");
	expect_error((const char *[]){ "--rbd-attach-methods=", NULL },
		     "--rbd-attach-methods: must name at least one method");
	expect_error((const char *[]){ "--nfs-timeout", "0s", NULL }, "--nfs-timeout: \"0s\"");
	expect_error((const char *[]){ "--device-inventory=yes", NULL }, "not true or false");
	expect_error((const char *[]){ "--mount-events", "on", NULL },
		     "--mount-events: \"on\" is not auto or off");
	expect_error((const char *[]){ "--config", "/nonexistent/volagent.json", NULL },
		     "/nonexistent/volagent.json");
	snprintf(bad, sizeof(bad), "%s/bad.json", dir);
	test_write_file(bad, "{\"workers\": ");
	expect_error((const char *[]){ "--config", bad, NULL }, "line 1");
	snprintf(unknown, sizeof(unknown), "%s/unknown.json", dir);
	test_write_file(unknown, "{\"root_dir\": \"/x\"}");
	expect_error((const char *[]){ "--config", unknown, NULL },
		     "key \"root_dir\": unknown key");
	snprintf(badtype, sizeof(badtype), "%s/badtype.json", dir);
	test_write_file(badtype, "{\"pods-dir\": 7}");
	expect_error((const char *[]){ "--config", badtype, NULL },
		     "key \"pods-dir\": must be a string");
	test_rm_rf(dir);
	free(dir);
	log_set_level(LOG_LVL_INFO);
}

/* Each plugin owns its options: flags and file keys reach the plugin, defaults come back when
 * nothing is given, and --help lists every option with its default. */
static void test_plugin_options(void **state)
{
	char *dir = test_mkdtemp("config"), file[600], help[8192] = "";
	struct volume_spec *nfs = volume_spec_new("nfs");
	const struct volume_plugin *p = plugin_find_by_name("nfs");
	struct agent_config cfg;
	struct error_info err = { 0 };
	const struct volume_plugin *q;
	FILE *f;

	assert_true(plugin_uses_device(p, nfs)); /* the built-in default: shared */
	assert_int_equal(parse(&cfg, &err, (const char *[]){ "--nfs-mode", "direct", NULL }), 0);
	assert_false(plugin_uses_device(p, nfs));
	config_done(&cfg);
	/* A new parse starts from the defaults: the table's agree with the plugin's own. */
	assert_int_equal(parse(&cfg, &err, (const char *[]){ NULL }), 0);
	assert_true(plugin_uses_device(p, nfs));
	config_done(&cfg);
	snprintf(file, sizeof(file), "%s/c.json", dir);
	test_write_file(file, "{\"nfs-mode\": \"direct\", \"rbd-timeout\": \"5s\"}");
	assert_int_equal(parse(&cfg, &err, (const char *[]){ "--config", file, NULL }), 0);
	assert_false(plugin_uses_device(p, nfs));
	config_done(&cfg);
	test_write_file(file, "{\"nfs-mode\": true}");
	assert_int_equal(parse(&cfg, &err, (const char *[]){ "--config", file, NULL }), -EINVAL);
	assert_non_null(strstr(err_msg(&err), "key \"nfs-mode\": must be a string"));
	config_done(&cfg);
	/* --help: every plugin option, with its default. */
	f = fmemopen(help, sizeof(help) - 1, "w");
	config_usage(f);
	fclose(f);
	for (size_t i = 0; (q = plugin_registry_get(i)); i++)
		for (const struct plugin_option *o = q->options; o && o->name; o++) {
			char line[256];
			snprintf(line, sizeof(line), "--%s VALUE", o->name);
			assert_non_null(strstr(help, line));
			snprintf(line, sizeof(line), "%s (default: %s)", o->help,
				 o->def[0] ? o->def : "empty");
			assert_non_null(strstr(help, line));
		}
	assert_non_null(strstr(help, "--nfs-mode VALUE"));
	assert_non_null(strstr(help, "--rbd-attach-methods VALUE"));
	assert_int_equal(plugin_options_reset(&err), 0);
	volume_spec_unref(nfs);
	test_rm_rf(dir);
	free(dir);
	log_set_level(LOG_LVL_INFO);
}

/* An endpoint turns CSI on by itself (--csi-endpoint was ignored without --csi); an explicit
 * csi false with an endpoint is an error naming both. */
static void test_csi_endpoint_turns_csi_on(void **state)
{
	char *dir = test_mkdtemp("config"), path[600];
	struct agent_config cfg;
	struct error_info err = { 0 };

	unsetenv("CSI_ENDPOINT");
	assert_int_equal(parse(&cfg, &err, (const char *[]){ NULL }), 0);
	assert_false(cfg.csi);
	config_done(&cfg);
	assert_int_equal(parse(&cfg, &err,
			       (const char *[]){ "--csi-endpoint", "unix:///x/csi.sock", NULL }),
			 0);
	assert_true(cfg.csi);
	config_done(&cfg);
	assert_int_equal(parse(&cfg, &err,
			       (const char *[]){ "--csi=true", "--csi-endpoint", "/x/s", NULL }),
			 0);
	assert_true(cfg.csi);
	config_done(&cfg);
	expect_error((const char *[]){ "--csi=false", "--csi-endpoint", "/x/s", NULL },
		     "csi: false, but --csi-endpoint /x/s sets the CSI endpoint");
	expect_error((const char *[]){ "--csi", "false", "--csi-endpoint", "/x/s", NULL },
		     "remove one of the two");
	/* The same from the config file. */
	snprintf(path, sizeof(path), "%s/c.json", dir);
	assert_int_equal(test_write_file(path, "{\"csi\": false}"), 0);
	expect_error((const char *[]){ "--config", path, "--csi-endpoint", "/x/s", NULL },
		     "csi: false");
	assert_int_equal(test_write_file(path, "{\"csi-endpoint\": \"/y/s\"}"), 0);
	assert_int_equal(parse(&cfg, &err, (const char *[]){ "--config", path, NULL }), 0);
	assert_true(cfg.csi);
	config_done(&cfg);
	/* The environment variable, as a DaemonSet sets it. */
	setenv("CSI_ENDPOINT", "unix:///z/csi.sock", 1);
	assert_int_equal(parse(&cfg, &err, (const char *[]){ NULL }), 0);
	assert_true(cfg.csi);
	config_done(&cfg);
	expect_error((const char *[]){ "--csi=false", NULL },
		     "csi: false, but CSI_ENDPOINT=unix:///z/csi.sock sets the CSI endpoint");
	unsetenv("CSI_ENDPOINT");
	test_rm_rf(dir);
	free(dir);
}

/* Whether a local volume at path passes the plugin's validation. */
static bool local_path_ok(const char *path)
{
	struct volume_spec *s = volume_spec_new("local");
	struct error_info err = { 0 };
	int r;

	assert_non_null(s);
	assert_int_equal(volume_spec_set(s, "path", path), 0);
	r = plugin_validate(plugin_find_by_name("local"), s, &err);
	volume_spec_unref(s);
	return r == 0;
}

/* --local-path-prefix is repeatable, a string or a list in the config file, and a new parse
 * starts from none. */
static void test_local_path_prefix(void **state)
{
	char *dir = test_mkdtemp("config"), file[600];
	struct agent_config cfg;
	struct error_info err = { 0 };

	assert_int_equal(parse(&cfg, &err,
			       (const char *[]){ "--local-path-prefix", "/mnt/disks",
						 "--local-path-prefix", "/srv", NULL }),
			 0);
	assert_true(local_path_ok("/mnt/disks/ssd1"));
	assert_true(local_path_ok("/srv/demo"));
	assert_false(local_path_ok("/home/x"));
	config_done(&cfg);
	snprintf(file, sizeof(file), "%s/c.json", dir);
	test_write_file(file, "{\"local-path-prefix\": [\"/data\"]}");
	assert_int_equal(parse(&cfg, &err, (const char *[]){ "--config", file, NULL }), 0);
	assert_true(local_path_ok("/data/a"));
	assert_false(local_path_ok("/srv/demo"));
	config_done(&cfg);
	test_write_file(file, "{\"local-path-prefix\": [1]}");
	assert_int_equal(parse(&cfg, &err, (const char *[]){ "--config", file, NULL }), -EINVAL);
	assert_non_null(strstr(err_msg(&err), "must be a list of strings"));
	config_done(&cfg);
	assert_int_equal(parse(&cfg, &err, (const char *[]){ "--local-path-prefix", "/", NULL }),
			 -EINVAL);
	config_done(&cfg);
	assert_int_equal(parse(&cfg, &err, (const char *[]){ NULL }), 0);
	assert_true(local_path_ok("/home/x"));
	config_done(&cfg);
	test_rm_rf(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_defaults_file_and_flags),
		cmocka_unit_test(test_errors_name_the_culprit),
		cmocka_unit_test(test_plugin_options),
		cmocka_unit_test(test_local_path_prefix),
		cmocka_unit_test(test_csi_endpoint_turns_csi_on),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
