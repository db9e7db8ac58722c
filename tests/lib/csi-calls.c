/* csi-calls.c - see csi-calls.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csi-calls.h"
#include "csi-env.h"

void csi_calls_add(char *calls, size_t size, const char *fmt, ...)
{
	size_t len = strnlen(calls, size);
	va_list ap;
	int n;

	assert_true(len < size);
	va_start(ap, fmt);
	n = vsnprintf(calls + len, size - len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size - len)
		fail_msg("CSI calls do not fit in %zu bytes", size);
}

const char *csi_local_ctx(const char *path, char *buf)
{
	snprintf(buf, 200, "{\"type\": \"local\", \"path\": \"%s\"}", path);
	return buf;
}

void csi_calls_stage(char *calls, size_t size, const char *vol, const char *stg, const char *cap,
		     const char *ctx, const char *extra)
{
	csi_calls_add(
		calls, size,
		"Node/NodeStageVolume {\"volume_id\": \"%s\", \"staging_target_path\": \"%s\", "
		"\"volume_capability\": %s, \"volume_context\": %s%s%s}\n",
		vol, stg, cap, ctx, extra ? ", " : "", extra ? extra : "");
}

void csi_calls_publish(char *calls, size_t size, const char *vol, const char *stg,
		       const char *target, const char *cap, const char *ctx, const char *extra)
{
	csi_calls_add(
		calls, size,
		"Node/NodePublishVolume {\"volume_id\": \"%s\", %s%s%s\"target_path\": \"%s\", "
		"\"volume_capability\": %s, \"volume_context\": %s%s%s}\n",
		vol, stg ? "\"staging_target_path\": \"" : "", stg ? stg : "", stg ? "\", " : "",
		target, cap, ctx, extra ? ", " : "", extra ? extra : "");
}

void csi_calls_stats(char *calls, size_t size, const char *vol, const char *path)
{
	csi_calls_add(calls, size,
		      "Node/NodeGetVolumeStats {\"volume_id\": \"%s\", \"volume_path\": \"%s\"}\n",
		      vol, path);
}

void csi_calls_unpublish(char *calls, size_t size, const char *vol, const char *target)
{
	csi_calls_add(calls, size,
		      "Node/NodeUnpublishVolume {\"volume_id\": \"%s\", \"target_path\": \"%s\"}\n",
		      vol, target);
}

void csi_calls_unstage(char *calls, size_t size, const char *vol, const char *stg)
{
	csi_calls_add(
		calls, size,
		"Node/NodeUnstageVolume {\"volume_id\": \"%s\", \"staging_target_path\": \"%s\"}\n",
		vol, stg);
}

static void local_ctx(const char *path, char *buf, size_t size)
{
	buf[0] = '\0';
	csi_calls_add(buf, size, "{\"type\": \"local\", \"path\": \"%s\"}", path);
}

void csi_calls_stage_local(char *calls, size_t size, const char *vol, const char *stg,
			   const char *cap, const char *path)
{
	char ctx[4200];

	local_ctx(path, ctx, sizeof(ctx));
	csi_calls_stage(calls, size, vol, stg, cap, ctx, NULL);
}

void csi_calls_publish_local(char *calls, size_t size, const char *vol, const char *stg,
			     const char *target, const char *cap, const char *path)
{
	char ctx[4200];

	local_ctx(path, ctx, sizeof(ctx));
	csi_calls_publish(calls, size, vol, stg, target, cap, ctx, NULL);
}

void csi_env_call_want(struct csi_env *e, const char *calls, const struct csi_want *want, size_t n)
{
	char *out = csi_env_call(e, calls);

	for (size_t i = 0; i < n; i++)
		assert_line(out, want[i].line, want[i].text);
	free(out);
}
