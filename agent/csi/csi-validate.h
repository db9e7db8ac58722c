/* csi-validate.h - the checks of a CSI Node request that need no state and no I/O: required
 * fields, the shape of ids and paths, the shape of a volume capability, capacity numbers.
 * The server runs them on the gRPC queue thread before a request is queued; the symlink walk
 * (lstat) and everything that depends on the node's state come later, on a worker.
 *
 * Order, as the CSI spec lists the codes: every missing required field first
 * (INVALID_ARGUMENT "<field>: required"), then malformed fields (INVALID_ARGUMENT naming the
 * field and the reason), then what depends on the driver's capabilities
 * (FAILED_PRECONDITION).  NodeGetVolumeStats and NodeExpandVolume only look a volume up at
 * volume_path: a volume_path that cannot hold a volume (relative, not normalized, outside the
 * kubelet root) is NOT_FOUND, as for any path where the volume is not published. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "csi.pb-c.h"
#include "csi-status.h"

#define CSI_VOLUME_ID_MAX 4096
/* The spec's size limits ("Size Limits"): a string 128 bytes unless its field says otherwise,
 * a map<string, string> 4 KiB (keys and values together).  mount_flags, a repeated string the
 * spec bounds only per string, is held to a map's 4 KiB in all. */
#define CSI_STRING_MAX 128
#define CSI_MAP_MAX 4096
#define CSI_MOUNT_FLAGS_MAX 4096
/* The largest request the server receives (gRPC answers a longer one RESOURCE_EXHAUSTED
 * before any handler runs).  The largest one within the limits above is a NodePublishVolume:
 * volume_id 4 KiB, target_path and staging_target_path 4 KiB each (PATH_MAX), fs_type 128
 * bytes, and three maps (publish_context, secrets, volume_context) of 4 KiB and mount_flags of
 * 4 KiB, 28.1 KiB of content.  Encoded, a map of one-byte keys costs 5 bytes per byte (entry
 * tag and length, key tag and length) and a mount flag of one byte 3, so the worst encoding
 * of a valid request is about 88 KiB (3 x 20 + 12 + 12 + 4 KiB).  96 KiB holds it, and is
 * 1/43 of gRPC's default 4 MiB. */
#define CSI_MAX_REQUEST_BYTES (96 * 1024)

struct csi_validate_config {
	const char *kubelet_root; /* absolute, normalized, without trailing '/'; "" for "/" */
	bool has_stage;		  /* STAGE_UNSTAGE_VOLUME is advertised */
};

/* What the server needs of a request that passed: pointers into the message. */
struct csi_request_info {
	const char *volume_id;
	bool stats_slot;	   /* NodeGetVolumeStats: its own in-flight slot */
	const char *path_field[2]; /* the paths to walk for symlinks, and their field names */
	const char *path[2];	   /* NULL or "" when absent */
};

/* Why a request was refused: a code and a message naming the field. */
struct csi_verdict {
	enum csi_code code;
	char message[1024];
};

/* One per Node volume RPC; msg is the decoded request of that RPC.  Returns true when the
 * request passes (ret_info filled), false with ret_verdict set.  ret_info is filled as far as
 * the message allows also on failure (the volume id for the log line). */
typedef bool (*csi_validate_fn)(const struct csi_validate_config *cfg, const ProtobufCMessage *msg,
				struct csi_request_info *ret_info, struct csi_verdict *ret_verdict);

bool csi_validate_stage(const struct csi_validate_config *cfg, const ProtobufCMessage *msg,
			struct csi_request_info *ret_info, struct csi_verdict *ret_verdict);
bool csi_validate_unstage(const struct csi_validate_config *cfg, const ProtobufCMessage *msg,
			  struct csi_request_info *ret_info, struct csi_verdict *ret_verdict);
bool csi_validate_publish(const struct csi_validate_config *cfg, const ProtobufCMessage *msg,
			  struct csi_request_info *ret_info, struct csi_verdict *ret_verdict);
bool csi_validate_unpublish(const struct csi_validate_config *cfg, const ProtobufCMessage *msg,
			    struct csi_request_info *ret_info, struct csi_verdict *ret_verdict);
bool csi_validate_stats(const struct csi_validate_config *cfg, const ProtobufCMessage *msg,
			struct csi_request_info *ret_info, struct csi_verdict *ret_verdict);
bool csi_validate_expand(const struct csi_validate_config *cfg, const ProtobufCMessage *msg,
			 struct csi_request_info *ret_info, struct csi_verdict *ret_verdict);

/* An absolute path with no empty, "." or ".." component and no trailing '/' ("/" passes). */
bool csi_path_normalized(const char *p);
