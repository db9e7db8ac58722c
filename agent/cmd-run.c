/* cmd-run.c - `volagent run`: the daemon.  Parses the configuration, takes the instance lock,
 * builds the reconciler, starts the reconciler and then, while its first pass runs, the CSI
 * server (when enabled); says READY=1 once both are up, and waits for SIGTERM/SIGINT on a
 * signalfd; then stops in reverse order: the CSI server first (calls in flight finish within
 * the grace period, new ones get UNAVAILABLE), then the reconciler.  Stopping leaves every
 * mount in place, as kubelet does: a restarted agent adopts them. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/statfs.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "backoff.h"
#include "commands.h"
#include "admin-server.h"
#include "config.h"
#include "csi-controller.h"
#include "csi-node.h"
#include "devmon.h"
#include "csi-server.h"
#include "log.h"
#include "process.h"
#include "metrics-server.h"
#include "macro.h"
#include "path-util.h"
#include "plugin-option.h"
#include "reconciler.h"

/* Makes dir (and its parents) if missing and checks it is a readable directory. */
static int ensure_dir(const char *what, const char *dir, mode_t mode, struct error_info *err)
{
	struct stat st;
	int r;

	if (stat(dir, &st) < 0) {
		if (errno != ENOENT)
			return err_set(err, -errno, "--%s %s: %s", what, dir, strerror(errno));
		r = path_mkdir_p(dir, mode);
		if (r < 0)
			return err_set(err, r, "--%s %s: cannot create it: %s", what, dir,
				       strerror(-r));
		log_info("created directory", "option", what, "dir", dir);
		return 0;
	}
	if (!S_ISDIR(st.st_mode))
		return err_set(err, -ENOTDIR, "--%s %s: not a directory", what, dir);
	if (access(dir, R_OK | X_OK) < 0)
		return err_set(err, -errno, "--%s %s: not readable: %s", what, dir,
			       strerror(errno));
	return 0;
}

/* One agent per state dir: a second one would fight the first over every mount. */
/* Key files live in the secret dir only while a helper reads them, but even that moment must
 * not put a key on a disk (backups, disk images, a stolen drive).  A secret dir that is not
 * memory-backed (a bare host whose /run is not a tmpfs, or a --secret-dir on a disk) is said
 * in the log at every start, and the agent runs on: refusing would stop every volume, and
 * the files are still short-lived, mode 0600 and zeroed before they are removed. */
static void check_secret_dir(const char *dir)
{
	struct statfs sf;

	if (statfs(dir, &sf) < 0)
		log_warning("cannot tell whether the secret dir is a tmpfs", "dir", dir, "error",
			    strerror(errno));
	else if (sf.f_type != TMPFS_MAGIC && sf.f_type != RAMFS_MAGIC)
		log_warning("the secret dir is not a tmpfs: key files for helpers reach its disk "
			    "for a moment; mount a tmpfs there or set --secret-dir",
			    "dir", dir);
}

static int take_instance_lock(const char *state_dir, int *ret_fd, struct error_info *err)
{
	_cleanup_free_ char *path = strdup_printf("%s/volagent.lock", state_dir);
	_cleanup_close_ int fd = -1;
	char pid[32];

	if (!path)
		return -ENOMEM;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return err_set(err, -errno, "lock %s: %s", path, strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		return err_set(err, -EBUSY,
			       "another volagent (pid %s) is running with state dir %s; refusing "
			       "to start a second one",
			       pid[0] ? pid : "unknown", state_dir);
	}
	snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) == 0)
		(void)!pwrite(fd, pid, strlen(pid), 0);
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* READY=1 (and Probe's ready) come once the reconciler has adopted what it found and the CSI
 * server, when enabled, listens: the two start side by side, and a client started after
 * `systemctl start` returns finds the socket answering.  Each part calls readiness_done()
 * once; the last one sends READY=1.  A server that fails to start never calls it. */
struct readiness {
	atomic_int pending;
	struct csi_server *csi;
};

static void readiness_done(struct readiness *rd)
{
	if (atomic_fetch_sub(&rd->pending, 1) == 1)
		sd_notify(0, "READY=1");
}

static void reconciler_ready(void *userdata)
{
	struct readiness *rd = userdata;

	if (rd->csi)
		csi_server_set_ready(rd->csi, true);
	readiness_done(rd);
}

/* Builds the CSI server (started later by csi_server_start).  Returns 0 (also when CSI is off,
 * *ret NULL) or -errno. */
static int new_csi(const struct agent_config *cfg, struct csi_node_config *node,
		   struct csi_controller **ret_ctrl, struct csi_server **ret,
		   struct error_info *err)
{
	_cleanup_free_ char *def = NULL;
	const char *endpoint = cfg->csi_endpoint;
	struct csi_server *s;

	*ret = NULL;
	*ret_ctrl = NULL;
	if (!cfg->csi && cfg->csi_controller) /* config_parse() turned csi on for an endpoint */
		return err_set(err, -EINVAL,
			       "--controller: the Controller service is served with --csi only");
	if (!cfg->csi)
		return 0;
	if (cfg->csi_controller) {
		*ret_ctrl = csi_controller_new(
			&(struct csi_controller_config){ .reconciler = node->reconciler });
		if (!*ret_ctrl)
			return err_set(err, -ENOMEM, "out of memory");
	}
	if (!endpoint[0]) {
		def = csi_default_endpoint(cfg->kubelet_root_dir, cfg->driver_name);
		if (!def)
			return -ENOMEM;
		endpoint = csi_endpoint_from_env_or(def);
	}
	s = csi_server_new(
		&(struct csi_server_config){
			.endpoint = endpoint,
			.driver_name = cfg->driver_name,
			.node_id = cfg->node_id,
			.kubelet_root = cfg->kubelet_root_dir,
			.registration = cfg->csi_registration,
			.socket_group = cfg->csi_socket_group[0] ? cfg->csi_socket_group : NULL,
			.max_volumes_per_node = cfg->max_volumes_per_node,
			.workers = (int)cfg->csi_workers,
			.grace_ms = (int)cfg->csi_grace_ms,
			.controller = *ret_ctrl,
		},
		&csi_node_ops, node, err);
	if (!s)
		return err->code ? err->code : -ENOMEM;
	*ret = s;
	return 0;
}

/* The admin socket (volagent status) and the metrics endpoint, unless turned "off". */
static int start_local_services(const struct agent_config *cfg, struct reconciler *rec,
				struct admin_server **ret_admin,
				struct metrics_server **ret_metrics, struct error_info *err)
{
	_cleanup_free_ char *admin = NULL, *metrics = NULL;
	const char *group = cfg->admin_socket_group[0] ? cfg->admin_socket_group : NULL;
	int r;

	admin = cfg->admin_socket[0] ? strdup(cfg->admin_socket)
				     : strdup_printf("%s/admin.sock", cfg->state_dir);
	metrics = cfg->metrics_address[0] ? strdup(cfg->metrics_address)
					  : strdup_printf("unix:%s/metrics.sock", cfg->state_dir);
	if (!admin || !metrics)
		return -ENOMEM;
	if (!streq(admin, "off")) {
		r = admin_server_start(admin, group, rec, ret_admin, err);
		if (r < 0)
			return r;
	}
	if (!streq(metrics, "off")) {
		r = metrics_server_start(metrics, group, cfg->metrics_network, ret_metrics, err);
		if (r < 0)
			return r;
		log_info("metrics served", "address", metrics);
	}
	return 0;
}

/* The device monitor's events, on the reconciler's thread. */
static void devmon_on_event(void *userdata)
{
	struct error_info err = { 0 };

	if (devmon_dispatch(userdata, &err) < 0)
		log_warning("device inventory not updated, keeping the previous one", "error",
			    err_msg(&err));
}

static int wait_for_signal(struct reconciler *rec)
{
	sigset_t mask;
	int fd;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	fd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		struct signalfd_siginfo si;
		ssize_t n = read(fd, &si, sizeof(si));

		if (n < 0 && errno == EINTR)
			continue;
		if (n != sizeof(si))
			break;
		if (si.ssi_signo == SIGHUP) {
			/* Spec files are watched, so there is nothing to reload: resync instead. */
			reconciler_request_resync(rec);
			continue;
		}
		log_info("stopping", "signal", strsignal((int)si.ssi_signo));
		break;
	}
	close(fd);
	return 0;
}

/* Under systemd a failed start leaves its one-line reason in `systemctl status`; the barrier
 * makes sure systemd has read it before it sees the process exit. */
static void notify_start_failed(const struct error_info *err)
{
	if (sd_notifyf(0, "STATUS=cannot start: %s\nERRNO=%d", err_msg(err),
		       err->code < 0 ? -err->code : EINVAL) > 0)
		(void)sd_notify_barrier(0, 5 * 1000 * 1000ULL);
}

/* The helper programs, found once in the system dirs (never $PATH) and logged: what the
 * agent will run, or that it is missing (the operation that needs it then fails). */
static void log_helpers(void)
{
	static const char *const names[] = { "mkfs.ext4", "mkfs.xfs",	"mkfs.btrfs",
					     "resize2fs", "xfs_growfs", "rbd",
					     "rbd-nbd",	  "rbd-fuse",	"mount.nfs" };
	char path[PATH_MAX];

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		int r = process_find_helper(names[i], path);

		log_info("helper", "name", names[i], "path", r == 0 ? path : "(not found)");
	}
}

int cmd_run(int argc, char **argv)
{
	struct agent_config cfg;
	struct error_info err = { 0 };
	struct reconciler *rec = NULL;
	struct csi_server *csi = NULL;
	struct csi_controller *ctrl = NULL;
	bool csi_leaked = false;
	struct admin_server *admin = NULL;
	struct metrics_server *metrics = NULL;
	struct devmon *dm = NULL;
	struct reconciler_event_source dm_source = { 0 };
	struct csi_node_config node = { 0 };
	struct readiness ready = { 0 };
	_cleanup_close_ int lock_fd = -1;
	sigset_t mask;
	int r, rc = 0;

	r = config_parse(argc, argv, &cfg, &err);
	if (r == 1) {
		config_done(&cfg);
		return 0;
	}
	if (r < 0) {
		fprintf(stderr, "volagent run: %s\n", err_msg(&err));
		fprintf(stderr, "Try 'volagent run --help'.\n");
		notify_start_failed(&err);
		config_done(&cfg);
		return 2;
	}
	/* Before any thread exists, so that every thread inherits the mask. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (ensure_dir("root-dir", cfg.root_dir, 0750, &err) < 0 ||
	    ensure_dir("state-dir", cfg.state_dir, 0700, &err) < 0 ||
	    ensure_dir("pods-dir", cfg.pods_dir, 0755, &err) < 0 ||
	    ensure_dir("secret-dir", cfg.secret_dir, 0700, &err) < 0) {
		fprintf(stderr, "volagent run: %s\n", err_msg(&err));
		notify_start_failed(&err);
		config_done(&cfg);
		return 2;
	}
	r = take_instance_lock(cfg.state_dir, &lock_fd, &err);
	if (r < 0) {
		log_error("cannot start", "error", err_msg(&err));
		notify_start_failed(&err);
		config_done(&cfg);
		return 1;
	}
	/* The plugins' own options were set by config_parse; their records go below this. */
	plugin_set_state_dir(cfg.state_dir);
	plugin_set_agent_dirs(cfg.root_dir, cfg.kubelet_root_dir);
	plugin_set_secret_dir(cfg.secret_dir);
	check_secret_dir(cfg.secret_dir);
	log_info("starting", "version", VOLAGENT_VERSION, "root_dir", cfg.root_dir, "state_dir",
		 cfg.state_dir, "secret_dir", cfg.secret_dir, "pods_dir", cfg.pods_dir, "workers",
		 LOG_INT(cfg.workers));
	log_helpers();

	if (cfg.device_inventory) {
		struct error_info dm_err = { 0 };
		dm = devmon_new(cfg.state_dir, &dm_err);
		if (!dm)
			log_warning("device inventory unavailable, continuing without it", "error",
				    err_msg(&dm_err));
		else
			dm_source = (struct reconciler_event_source){ .fd = devmon_get_fd(dm),
								      .dispatch = devmon_on_event,
								      .userdata = dm };
	}
	r = reconciler_new(
		&(struct reconciler_config){
			.root_dir = cfg.root_dir,
			.state_dir = cfg.state_dir,
			.pods_dir = cfg.pods_dir,
			.insecure_pods_dir = cfg.insecure_pods_dir,
			.workers = cfg.workers,
			.backoff_initial_ms = 500,
			.backoff_max_ms = cfg.backoff_max_ms,
			.resync_ms = cfg.resync_ms,
			.mount_events_off = streq(cfg.mount_events, "off"),
			.refresh_min_interval_ms = 100,
			.sources = dm ? &dm_source : NULL,
			.n_sources = dm ? 1 : 0,
			.health_interval_ms = cfg.health_interval_ms,
			.stale_stage_after_ms = cfg.stale_stage_after_ms,
			.kubelet_root = cfg.kubelet_root_dir,
			.driver_name = cfg.kubelet_root_dir ? cfg.driver_name : NULL,
		},
		&rec, &err);
	if (r == 0) {
		node.reconciler = rec;
		node.stats_timeout_ms = (int)cfg.stats_timeout_ms;
		r = new_csi(&cfg, &node, &ctrl, &csi, &err);
	}
	if (r == 0) {
		ready = (struct readiness){ .pending = csi ? 2 : 1, .csi = csi };
		reconciler_set_on_ready(rec, reconciler_ready, &ready);
	}
	if (r == 0)
		r = start_local_services(&cfg, rec, &admin, &metrics, &err);
	if (r == 0)
		r = reconciler_start(rec, &err);
	/* The CSI server (loading gRPC, listening, registering with kubelet) starts while the
	 * reconciler thread's first pass builds the state and verifies what it found: the two
	 * are independent, and READY=1 goes out only once both are done.  A server that cannot
	 * start stops the reconciler before it goes (its ready callback points to it). */
	if (r == 0 && csi) {
		r = csi_server_start(csi, &err);
		if (r < 0) {
			reconciler_stop(rec);
			csi = csi_server_free(csi);
		} else {
			readiness_done(&ready);
		}
	}
	if (r < 0) {
		log_error("cannot start", "error", err_msg(&err));
		notify_start_failed(&err);
		rc = 1;
		goto out;
	}
	r = wait_for_signal(rec);
	if (r < 0) {
		log_error("cannot wait for signals", "error", strerror(-r));
		rc = 1;
	}
	sd_notify(0, "STOPPING=1");
out:
	/* Logged here only: the server neither logs this nor waits again when freed. */
	if (csi && csi_server_shutdown(csi, (int)cfg.csi_grace_ms) < 0) {
		log_warning("a CSI call was still running after the grace period, exiting without "
			    "it",
			    "grace_ms", LOG_INT(cfg.csi_grace_ms));
		csi_leaked = true;
	}
	csi = csi_server_free(csi);
	/* A call that never returned may still use it: left to the exit then. */
	if (!csi_leaked)
		ctrl = csi_controller_free(ctrl);
	admin = admin_server_free(admin);
	metrics = metrics_server_free(metrics);
	reconciler_free(rec);
	devmon_free(dm);
	log_info("stopped");
	config_done(&cfg);
	return rc;
}
