/* csi-calls.c - the text of the common CSI Node calls (see csi-calls.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csi-calls.h"
#include "csi-env.h"

/* Appends a printf-formatted line to calls; fails the test when it does not fit. */
static void __attribute__((format(printf, 3, 4)))
append(char *calls, size_t size, const char *fmt, ...)
{
	size_t len = strlen(calls);
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(calls + len, size - len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size - len)
		fail_msg("the CSI calls do not fit in %zu bytes", size);
}

void csi_calls_stage(char *calls, size_t size, const char *vol, const char *stg, const char *cap,
		     const char *path)
{
	append(calls, size,
	       "Node/NodeStageVolume {\"volume_id\": \"%s\", \"staging_target_path\": \"%s\", "
	       "\"volume_capability\": %s, \"volume_context\": {\"type\": \"local\", "
	       "\"path\": \"%s\"}}\n",
	       vol, stg, cap, path);
}

void csi_calls_publish(char *calls, size_t size, const char *vol, const char *stg,
		       const char *target, const char *cap, const char *path)
{
	append(calls, size,
	       "Node/NodePublishVolume {\"volume_id\": \"%s\", %s%s%s\"target_path\": \"%s\", "
	       "\"volume_capability\": %s, \"volume_context\": {\"type\": \"local\", "
	       "\"path\": \"%s\"}}\n",
	       vol, stg ? "\"staging_target_path\": \"" : "", stg ? stg : "", stg ? "\", " : "",
	       target, cap, path);
}

void csi_calls_unpublish(char *calls, size_t size, const char *vol, const char *target)
{
	append(calls, size,
	       "Node/NodeUnpublishVolume {\"volume_id\": \"%s\", \"target_path\": \"%s\"}\n", vol,
	       target);
}

void csi_calls_unstage(char *calls, size_t size, const char *vol, const char *stg)
{
	append(calls, size,
	       "Node/NodeUnstageVolume {\"volume_id\": \"%s\", \"staging_target_path\": \"%s\"}\n",
	       vol, stg);
}

void csi_env_call_want(struct csi_env *e, const char *calls, const struct csi_want *want, size_t n)
{
	char *out = csi_env_call(e, calls);

	for (size_t i = 0; i < n; i++)
		assert_line(out, want[i].line, want[i].text);
	free(out);
}
