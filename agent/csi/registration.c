/* registration.c - kubelet's plugin registration service (pluginregistration.Registration)
 * on <kubelet-root>/plugins_registry/<driver-name>-reg.sock.  See registration.h. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "pluginregistration.pb-c.h"

#include "grpc-core.h"
#include "log.h"
#include "macro.h"
#include "registration.h"

#define CSI_PLUGIN_TYPE "CSIPlugin"

struct registration {
	char *kubelet_root;
	char *driver_name;
	char *csi_socket_path;
	char *socket_path;
	char *lock_path;
	struct gcore *g;
	_Atomic int state; /* enum registration_state */
};

static int mkdir_one(const char *path, mode_t mode)
{
	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static void handle_get_info(struct gcore_call *call, void *userdata)
{
	struct registration *r = userdata;
	Pluginregistration__InfoRequest *req;
	Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
	char *versions[] = { "1.0.0" };
	const void *data;
	size_t len;

	data = gcore_call_request(call, &len);
	req = data ? pluginregistration__info_request__unpack(NULL, len, data) : NULL;
	if (!req) {
		gcore_call_fail(call, GCORE_INVALID_ARGUMENT, "request: cannot decode InfoRequest");
		return;
	}
	pluginregistration__info_request__free_unpacked(req, NULL);
	info.type = CSI_PLUGIN_TYPE;
	info.name = r->driver_name;
	info.endpoint = r->csi_socket_path;
	info.n_supported_versions = ARRAY_SIZE(versions);
	info.supported_versions = versions;
	log_debug("registration", "kubelet asked for plugin info", "driver", r->driver_name);
	gcore_call_reply_message(call, &info.base);
}

static void handle_notify(struct gcore_call *call, void *userdata)
{
	struct registration *r = userdata;
	Pluginregistration__RegistrationStatus *st;
	Pluginregistration__RegistrationStatusResponse resp =
		PLUGINREGISTRATION__REGISTRATION_STATUS_RESPONSE__INIT;
	const void *data;
	size_t len;

	data = gcore_call_request(call, &len);
	st = data ? pluginregistration__registration_status__unpack(NULL, len, data) : NULL;
	if (!st) {
		gcore_call_fail(call, GCORE_INVALID_ARGUMENT,
				"request: cannot decode RegistrationStatus");
		return;
	}
	if (st->plugin_registered) {
		atomic_store(&r->state, REGISTRATION_OK);
		log_info("registered with kubelet", "driver", r->driver_name, "endpoint",
			 r->csi_socket_path);
	} else {
		atomic_store(&r->state, REGISTRATION_FAILED);
		log_error("kubelet plugin registration failed", "driver", r->driver_name, "error",
			  st->error, "socket", r->socket_path);
	}
	pluginregistration__registration_status__free_unpacked(st, NULL);
	gcore_call_reply_message(call, &resp.base);
}

struct registration *registration_new(const struct registration_config *cfg, struct error_info *err)
{
	struct registration *r;

	if (!cfg || !cfg->kubelet_root || cfg->kubelet_root[0] != '/' || !cfg->driver_name ||
	    !cfg->driver_name[0] || !cfg->csi_socket_path) {
		err_set(err, -EINVAL, "registration: kubelet root, driver name and socket needed");
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	r->kubelet_root = strdup(cfg->kubelet_root);
	r->driver_name = strdup(cfg->driver_name);
	r->csi_socket_path = strdup(cfg->csi_socket_path);
	r->socket_path = strdup_printf("%s/plugins_registry/%s-reg.sock",
				       streq(cfg->kubelet_root, "/") ? "" : cfg->kubelet_root,
				       cfg->driver_name);
	r->lock_path = strdup_printf("%s/plugins_registry/.%s-reg.sock.lock",
				     streq(cfg->kubelet_root, "/") ? "" : cfg->kubelet_root,
				     cfg->driver_name);
	atomic_init(&r->state, REGISTRATION_PENDING);
	if (!r->kubelet_root || !r->driver_name || !r->csi_socket_path || !r->socket_path ||
	    !r->lock_path) {
		err_set(err, -ENOMEM, "out of memory");
		return registration_free(r);
	}
	if (strlen(r->socket_path) > 107) {
		err_set(err, -ENAMETOOLONG,
			"registration socket %s is %zu bytes long; a unix socket path may have at "
			"most 107 (use a shorter --kubelet-root-dir or --driver-name)",
			r->socket_path, strlen(r->socket_path));
		return registration_free(r);
	}
	return r;
}

int registration_start(struct registration *r, struct error_info *err)
{
	_cleanup_free_ char *dir = NULL;
	struct error_info local;
	struct gcore_config gc = {
		.socket_path = r->socket_path,
		.lock_path = r->lock_path,
		.mode = 0600,
		.gid = (gid_t)-1,
		.calls_per_method = 2,
		.max_receive_bytes = 16384, /* kubelet's two small messages */
	};
	int k;

	if (!err)
		err = &local;
	if (r->g)
		return err_set(err, -EINVAL, "registration already started");
	dir = strdup_printf("%s/plugins_registry",
			    streq(r->kubelet_root, "/") ? "" : r->kubelet_root);
	if (!dir)
		return err_set(err, -ENOMEM, "out of memory");
	k = mkdir_one(dir, 0750);
	if (k < 0)
		return err_set(err, k, "cannot create %s: %s", dir, strerror(-k));
	r->g = gcore_new(&gc, err);
	if (!r->g)
		return err->code;
	if (gcore_add_method(r->g, "/pluginregistration.Registration/GetInfo", handle_get_info, r) <
		    0 ||
	    gcore_add_method(r->g, "/pluginregistration.Registration/NotifyRegistrationStatus",
			     handle_notify, r) < 0) {
		r->g = gcore_free(r->g);
		return err_set(err, -ENOMEM, "cannot register the registration methods");
	}
	k = gcore_start(r->g, err);
	if (k < 0) {
		err_prefix(err, "registration socket");
		r->g = gcore_free(r->g);
		return k;
	}
	log_debug("registration", "serving kubelet plugin registration", "socket", r->socket_path);
	return 0;
}

int registration_shutdown(struct registration *r, int grace_ms)
{
	if (!r || !r->g)
		return 0;
	return gcore_shutdown(r->g, grace_ms, 2000, NULL, NULL);
}

enum registration_state registration_get_state(const struct registration *r)
{
	return (enum registration_state)atomic_load(&((struct registration *)r)->state);
}

const char *registration_socket_path(const struct registration *r)
{
	return r->socket_path;
}

struct registration *registration_free(struct registration *r)
{
	if (!r)
		return NULL;
	r->g = gcore_free(r->g);
	free(r->kubelet_root);
	free(r->driver_name);
	free(r->csi_socket_path);
	free(r->socket_path);
	free(r->lock_path);
	free(r);
	return NULL;
}
