/* nfs-probe.c - see nfs-probe.h. */
#include <errno.h>
#include <fcntl.h>
#include <rpc/rpc.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nfs-probe.h"

#define NFS_PROGRAM_NUMBER 100003
#define NFS_PROBE_VERSION 4

/* The NULL procedure's arguments and result: nothing (xdr_void, in xdrproc_t's shape). */
static bool_t nothing(XDR *xdrs, ...)
{
	(void)xdrs;
	return TRUE;
}

int nfs_probe_null(int fd, uint64_t timeout_ms, struct error_info *err)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct netbuf nb;
	struct timeval tv = { .tv_sec = (time_t)(timeout_ms / 1000),
			      .tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000 };
	enum clnt_stat st;
	CLIENT *cl;
	int flags;

	/* libtirpc waits with poll() itself; its reads and writes expect a blocking socket. */
	flags = fcntl(fd, F_GETFL);
	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0 || flags < 0 ||
	    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
		int r = -errno;
		close(fd);
		return err_set(err, -EIO, "probe: %s", strerror(-r));
	}
	nb = (struct netbuf){ .maxlen = len, .len = len, .buf = &ss };
	cl = clnt_vc_create(fd, &nb, NFS_PROGRAM_NUMBER, NFS_PROBE_VERSION, 0, 0);
	if (!cl) {
		close(fd);
		return err_set(err, -EIO, "probe: %s", clnt_spcreateerror("rpc client"));
	}
	clnt_control(cl, CLSET_FD_CLOSE, NULL);
	st = clnt_call(cl, NULLPROC, nothing, NULL, nothing, NULL, tv);
	clnt_destroy(cl);
	switch (st) {
	case RPC_SUCCESS:
	case RPC_PROGVERSMISMATCH:
	case RPC_PROGUNAVAIL:
	case RPC_PROCUNAVAIL:
	case RPC_AUTHERROR:
		return 0;
	case RPC_TIMEDOUT:
		return err_set(err, -ETIMEDOUT,
			       "no answer to an NFS NULL call within %llums (the server accepts "
			       "connections but does not answer)",
			       (unsigned long long)timeout_ms);
	default:
		return err_set(err, -EIO, "NFS NULL call: %s", clnt_sperrno(st));
	}
}
