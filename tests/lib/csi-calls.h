/* csi-calls.h - the CSI tests' request lines, as tests/csi/csi_client.py reads them
 * ("Service/Method {json}", one a line): each function appends one line to the string in
 * calls (start it empty), a buffer of size bytes, so that a test names the calls it makes and
 * their fields, not their JSON, and several go to the client in one run (csi_env_call).  They
 * fail the running cmocka test when the line does not fit.  And the check of their answers,
 * line by line (CSI_CALL_WANT). */
#pragma once

#include <stddef.h>

struct csi_env;

/* Appends a line made from fmt, e.g. "Node/NodeGetVolumeStats {...}\n" (with its newline). */
void csi_calls_add(char *calls, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The volume_context of a local volume at path, into buf (>= 200 bytes); returns buf. */
const char *csi_local_ctx(const char *path, char *buf);

/* NodeStageVolume of vol at stg with capability cap (a JSON object, e.g. CSI_CAP_BLOCK) and
 * context ctx (a JSON object); extra, when not NULL, is more members of the request
 * ("\"secrets\": {...}"). */
void csi_calls_stage(char *calls, size_t size, const char *vol, const char *stg, const char *cap,
		     const char *ctx, const char *extra);
/* NodePublishVolume of vol, staged at stg (NULL: no staging_target_path), at target; as
 * csi_calls_stage (extra e.g. "\"readonly\": true"). */
void csi_calls_publish(char *calls, size_t size, const char *vol, const char *stg,
		       const char *target, const char *cap, const char *ctx, const char *extra);
/* NodeGetVolumeStats of vol at path. */
void csi_calls_stats(char *calls, size_t size, const char *vol, const char *path);
/* NodeUnpublishVolume of vol at target. */
void csi_calls_unpublish(char *calls, size_t size, const char *vol, const char *target);
/* NodeUnstageVolume of vol at stg. */
void csi_calls_unstage(char *calls, size_t size, const char *vol, const char *stg);
/* The same two for a local volume at path, with no extra members. */
void csi_calls_stage_local(char *calls, size_t size, const char *vol, const char *stg,
			   const char *cap, const char *path);
void csi_calls_publish_local(char *calls, size_t size, const char *vol, const char *stg,
			     const char *target, const char *cap, const char *path);

/* What one answer line must contain: line n (0-based) of the answers holds text. */
struct csi_want {
	int line;
	const char *text;
};
/* Runs the calls (csi_env_call) and fails the test unless each of want[0..n) holds. */
void csi_env_call_want(struct csi_env *e, const char *calls, const struct csi_want *want, size_t n);
#define CSI_CALL_WANT(e, calls, ...)                                          \
	csi_env_call_want(e, calls, (const struct csi_want[]){ __VA_ARGS__ }, \
			  sizeof((const struct csi_want[]){ __VA_ARGS__ }) /  \
				  sizeof(struct csi_want))
