/* registration.h - kubelet's plugin registration service, served by the agent itself.
 *
 * Kubelet watches <kubelet-root>/plugins_registry/ for unix sockets.  On
 * <kubelet-root>/plugins_registry/<driver-name>-reg.sock this serves
 * pluginregistration.Registration: GetInfo answers type "CSIPlugin", the driver name, the CSI
 * socket path and versions ["1.0.0"]; NotifyRegistrationStatus is kubelet's verdict, logged
 * (a failed registration at error level, with kubelet's reason).  This replaces the
 * node-driver-registrar sidecar.
 *
 * It runs on its own grpc-core server (own socket, queue thread and lock file
 * "<dir>/.<driver-name>-reg.sock.lock", a dot file that kubelet's watcher ignores); both RPCs
 * are answered inline on that thread.  The socket is 0600: only kubelet (root) talks to it. */
#pragma once

#include "error.h"

enum registration_state {
	REGISTRATION_PENDING, /* kubelet has not reported yet */
	REGISTRATION_OK,
	REGISTRATION_FAILED,
};

struct registration_config {
	const char *kubelet_root;    /* absolute */
	const char *driver_name;     /* validated by the caller */
	const char *csi_socket_path; /* what GetInfo reports as the endpoint */
};

struct registration;

/* Copies cfg; binds nothing yet.  Returns NULL with err set on failure. */
struct registration *registration_new(const struct registration_config *cfg,
				      struct error_info *err);

/* Creates plugins_registry/ if missing, takes the lock, binds and serves.
 * Returns 0 or a negative errno with err set (-EBUSY: another instance serves it). */
int registration_start(struct registration *r, struct error_info *err);

/* Stops serving (gRPC removes the socket, so kubelet deregisters the plugin).
 * Returns 0 or -ETIMEDOUT as gcore_shutdown(). */
int registration_shutdown(struct registration *r, int grace_ms);

/* What kubelet last reported.  Any thread. */
enum registration_state registration_get_state(const struct registration *r);

/* The registration socket path. */
const char *registration_socket_path(const struct registration *r);

/* Accepts NULL; returns NULL. */
struct registration *registration_free(struct registration *r);
