/* nfs-server.h - is the NFS server there?  Before a mount, a TCP connect to the server's
 * port (port= or 2049) with a short deadline (--nfs-connect-timeout) turns "server down"
 * into an error in milliseconds instead of a mount that hangs.  And the server's gate
 * (lib/server-health.h): while a mount to a server hangs or has timed out, the server is
 * down and further mounts to it are refused at once, until its probe (the connect, then the
 * NFS NULL call of nfs-probe.h) is answered.
 *
 * Runs in the calling thread and never waits past its deadline.  Nothing here logs. */
#pragma once

#include "error.h"
#include "nfs-spec.h"
#include "server-health.h"

/* The probe's deadline, connect and NULL call together: short, so that the mount or CSI call
 * that runs it still answers within a second (a server that runs answers at once). */
#define NFS_SERVER_PROBE_MS 500

/* A TCP connect to v's server and port within the connect timeout.  ret_fd (may be NULL:
 * then closed) gets the connected socket.  Returns 0, or with err naming the server
 * -ETIMEDOUT, -ECONNREFUSED, -ENETUNREACH, or -EHOSTUNREACH (also for any other failure). */
int nfs_server_check_reachable(const struct nfs_volume *v, int *ret_fd, struct error_info *err);

/* Begins op on v's server, running the probe when the server is down and one is due.
 * Returns 0 (end op with server_health_end), or -errno with err set: -EHOSTUNREACH while
 * the server is down. */
int nfs_server_gate(const struct nfs_volume *v, struct server_health_op *op,
		    struct error_info *err);
