/* csi-status.h - the gRPC status codes of the CSI services, and the one map from a negative
 * errno to a code, used by the server (csi-server.c) and the Node backend (csi-node.c) alike so
 * that the same failure gets the same code whichever path answers it. */
#pragma once

/* gRPC status codes (numerically the gRPC codes). */
enum csi_code {
	CSI_OK = 0,
	CSI_CANCELLED = 1,
	CSI_UNKNOWN = 2,
	CSI_INVALID_ARGUMENT = 3,
	CSI_DEADLINE_EXCEEDED = 4,
	CSI_NOT_FOUND = 5,
	CSI_ALREADY_EXISTS = 6,
	CSI_PERMISSION_DENIED = 7,
	CSI_RESOURCE_EXHAUSTED = 8,
	CSI_FAILED_PRECONDITION = 9,
	CSI_ABORTED = 10,
	CSI_OUT_OF_RANGE = 11,
	CSI_UNIMPLEMENTED = 12,
	CSI_INTERNAL = 13,
	CSI_UNAVAILABLE = 14,
};

/* The gRPC code for a negative errno (0 gives CSI_OK); see the table in csi-status.c.
 * Anything not listed there is INTERNAL. */
enum csi_code csi_code_from_errno(int negative_errno);
