/* outside-env.c - the fixture of the refusal tests (see outside-env.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "outside-env.h"
#include "testlib.h"

struct outside_env *outside_env_new(const char *tag)
{
	struct outside_env *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	e->f = fixture_new(tag);
	snprintf(e->outside, sizeof(e->outside), "%s/outside", e->f->dir);
	mkdir(e->outside, 0755);
	csi_env_init(&e->csi, e->f);
	return e;
}

void outside_env_free(struct outside_env *e)
{
	fixture_free(e->f);
	free(e);
}

void outside_env_write_journal(struct outside_env *e, const char *devices, const char *csi)
{
	char path[700], boot[64] = "", *text;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	assert_non_null(f);
	assert_non_null(fgets(boot, sizeof(boot), f));
	fclose(f);
	boot[strcspn(boot, "\n")] = '\0';
	assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", e->f->state, NULL }), 0);
	snprintf(path, sizeof(path), "%s/journal.json", e->f->state);
	assert_true(asprintf(&text, "{\"version\": 1, \"boot_id\": \"%s\", \"devices\": %s%s%s}\n",
			     boot, devices, csi ? ", \"csi\": " : "", csi ? csi : "") > 0);
	assert_int_equal(test_write_file(path, text), 0);
	free(text);
}
