/* cmd-probe.c - `volagent probe`: calls the CSI Identity Probe of a running agent, for
 * liveness checks (a DaemonSet's exec probe) and people.  Exit 0 when ready, 1 when not
 * ready or unreachable, 2 on bad usage. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "config.h"
#include "csi-server.h"
#include "csi.pb-c.h"
#include "grpc-core.h"
#include "macro.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: volagent probe [--csi-endpoint unix:///path/csi.sock] [--timeout SECONDS]\n"
		"                      [--config FILE] [--kubelet-root-dir DIR] [--driver-name NAME]\n\n"
		"Asks a running agent's CSI Identity service whether it is ready.\n"
		"The endpoint is found as `volagent run` finds it: --csi-endpoint (or --endpoint),\n"
		"else the config file's csi-endpoint, else $CSI_ENDPOINT, else\n"
		"unix://<kubelet-root-dir>/plugins/<driver-name>/csi.sock (default %s).\n",
		"unix:///var/lib/kubelet/plugins/csi.volagent.io/csi.sock");
}

/* The endpoint `volagent run` with these settings (the flags of run, NULL-terminated pairs)
 * serves.  Returns 0 and the endpoint (caller frees), or -EINVAL with err set. */
static int run_endpoint(const char *const *flags, char **ret, struct error_info *err)
{
	const char *argv[16] = { "probe" };
	struct agent_config cfg;
	int argc = 1, r;

	for (; *flags && argc < 14; flags += 2)
		if (flags[1]) {
			argv[argc++] = flags[0];
			argv[argc++] = flags[1];
		}
	r = config_parse(argc, (char **)argv, &cfg, err);
	if (r == 0) {
		const char *env = csi_endpoint_from_env_or(NULL);

		*ret = cfg.csi_endpoint[0] ? strdup(cfg.csi_endpoint)
		       : env		   ? strdup(env)
			     : csi_default_endpoint(cfg.kubelet_root_dir, cfg.driver_name);
		if (!*ret)
			r = -ENOMEM;
	}
	config_done(&cfg);
	return r;
}

int cmd_probe(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "csi-endpoint", required_argument, NULL, 'e' },
		{ "endpoint", required_argument, NULL, 'e' },
		{ "timeout", required_argument, NULL, 't' },
		{ "config", required_argument, NULL, 'c' },
		{ "kubelet-root-dir", required_argument, NULL, 'k' },
		{ "driver-name", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *config = NULL, *kubelet_root = NULL, *driver = NULL;
	_cleanup_free_ char *found = NULL;
	_cleanup_free_ char *path = NULL;
	_cleanup_free_ void *resp = NULL;
	const char *endpoint = NULL;
	Csi__V1__ProbeRequest req = CSI__V1__PROBE_REQUEST__INIT;
	Csi__V1__ProbeResponse *pr;
	struct error_info err = { 0 };
	uint8_t buf[16];
	char message[256] = "";
	size_t len = 0;
	int c, code = 0, timeout_s = 5, r;
	bool ready;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'e':
			endpoint = optarg;
			break;
		case 't':
			timeout_s = atoi(optarg);
			if (timeout_s <= 0) {
				fprintf(stderr,
					"volagent probe: --timeout: \"%s\" is not a number of "
					"seconds\n",
					optarg);
				return 2;
			}
			break;
		case 'c':
			config = optarg;
			break;
		case 'k':
			kubelet_root = optarg;
			break;
		case 'n':
			driver = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "volagent probe: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!endpoint) {
		if (run_endpoint((const char *const[]){ "--config", config, "--kubelet-root-dir",
							kubelet_root, "--driver-name", driver,
							NULL },
				 &found, &err) < 0) {
			fprintf(stderr, "volagent probe: %s\n", err_msg(&err));
			return 2;
		}
		endpoint = found;
	}
	if (csi_endpoint_parse(endpoint, &path, &err) < 0) {
		fprintf(stderr, "volagent probe: --endpoint: %s\n", err_msg(&err));
		return 2;
	}
	len = csi__v1__probe_request__pack(&req, buf);
	r = gcore_unary_call(path, "/csi.v1.Identity/Probe", buf, len, timeout_s * 1000, &code,
			     message, sizeof(message), &resp, &len);
	if (r < 0 || code != GCORE_OK) {
		fprintf(stderr, "volagent probe: %s: %s\n", endpoint,
			r < 0	     ? "the call failed"
			: message[0] ? message
				     : gcore_status_name(code));
		return 1;
	}
	pr = csi__v1__probe_response__unpack(NULL, len, resp);
	if (!pr) {
		fprintf(stderr, "volagent probe: %s: malformed answer\n", endpoint);
		return 1;
	}
	ready = pr->ready && pr->ready->value;
	csi__v1__probe_response__free_unpacked(pr, NULL);
	printf("%s\n", ready ? "ready" : "not ready");
	return ready ? 0 : 1;
}
