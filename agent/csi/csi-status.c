/* csi-status.c - the one errno -> gRPC status map of the CSI services.
 *
 * What the CSI spec (v1.12) asks of the Node and Identity RPCs, in its order, and the errnos
 * that stand for each case here:
 *
 *   every RPC     INVALID_ARGUMENT     a required field is missing or malformed     EINVAL
 *                 ABORTED              an operation on the same volume is pending   EAGAIN
 *                 UNIMPLEMENTED        the RPC is not served                        ENOSYS
 *   Stage         NOT_FOUND            the volume does not exist                    ENOENT
 *                 ALREADY_EXISTS       staged with an incompatible capability       EEXIST
 *                 FAILED_PRECONDITION  capability not supported                     EOPNOTSUPP
 *   Unstage       NOT_FOUND            the volume does not exist                    ENOENT
 *   Publish       NOT_FOUND            the volume does not exist                    ENOENT
 *                 ALREADY_EXISTS       published there with another capability or
 *                                      readonly flag                                EEXIST
 *                 FAILED_PRECONDITION  capability not supported; not staged though
 *                                      staging is served; a single-writer volume
 *                                      published elsewhere; the device or target is
 *                                      in use by someone else                       EOPNOTSUPP
 *                                                                                   EBUSY
 *                                                                                   EMEDIUMTYPE
 *                                                                                   EROFS
 *                                                                                   ENOTBLK
 *   Unpublish     NOT_FOUND            the volume does not exist                    ENOENT
 *   GetVolumeStats NOT_FOUND           the volume or its path does not exist        ENOENT
 *   Expand        NOT_FOUND            the volume does not exist                    ENOENT
 *                 FAILED_PRECONDITION  it cannot be grown while in use              EOPNOTSUPP
 *                 OUT_OF_RANGE         the size asked for is not possible           ERANGE EFBIG
 *   Probe         FAILED_PRECONDITION  the plugin is not healthy
 *
 * Codes kubelet retries without treating the attempt as final (the outcome is not known):
 *   DEADLINE_EXCEEDED  ETIMEDOUT        UNAVAILABLE  ESHUTDOWN EHOSTUNREACH ECONNREFUSED
 *   RESOURCE_EXHAUSTED ENOSPC ENOMEM    ABORTED      EAGAIN
 * and PERMISSION_DENIED for EPERM/EACCES.  Everything else is INTERNAL.
 *
 * EBUSY is FAILED_PRECONDITION, not ABORTED: ABORTED is reserved for "another CSI call on this
 * volume is still running", which the server detects itself; an EBUSY from an operation means
 * that something else holds the device or the target, which a retry alone does not cure. */
#include <errno.h>

#include "csi-status.h"

enum csi_code csi_code_from_errno(int negative_errno)
{
	switch (-negative_errno) {
	case 0:
		return CSI_OK;
	case EINVAL:
		return CSI_INVALID_ARGUMENT;
	case ENOENT:
		return CSI_NOT_FOUND;
	case EEXIST:
		return CSI_ALREADY_EXISTS;
	case EOPNOTSUPP:
	case EBUSY:
	case EMEDIUMTYPE:
	case EROFS:
	case ENOTBLK:
	case EUCLEAN: /* a device whose content forbids formatting it (blkdev.h) */
		return CSI_FAILED_PRECONDITION;
	case ERANGE:
	case EFBIG:
		return CSI_OUT_OF_RANGE;
	case EAGAIN:
		return CSI_ABORTED;
	case ETIMEDOUT:
		return CSI_DEADLINE_EXCEEDED;
	case ESHUTDOWN:
	case EHOSTUNREACH:
	case ECONNREFUSED:
		return CSI_UNAVAILABLE;
	case ENOSPC:
	case ENOMEM:
		return CSI_RESOURCE_EXHAUSTED;
	case EPERM:
	case EACCES:
		return CSI_PERMISSION_DENIED;
	case ENOSYS:
		return CSI_UNIMPLEMENTED;
	default:
		return CSI_INTERNAL;
	}
}
