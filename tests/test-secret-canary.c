/* test-secret-canary.c - a sensitive mount option given to a real agent goes nowhere in clear:
 * not its log, not a file under its state dir, not `volagent status` (text or JSON), not the
 * metrics, not a CSI error.  Canary values come in through a pod spec file (mountOptions, one
 * of them named in sensitiveMountOptions) and through CSI (the capability's mount_flags, the
 * volume_context's mountOptions, and the request's secrets), for nfs volumes whose server is
 * down or never answers, so that the failure paths (which echo options) run.  And the
 * service-account token kubelet passes in a publish's volume_context
 * (csi.storage.k8s.io/serviceAccount.tokens) next to the pod info that is kept (name,
 * namespace, uid, service account: in status, the log, the journal, across a SIGKILL).
 *
 * Root, private mount namespace; the CSI part uses the Python grpcio client. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "check-util.h"
#include "csi-env.h"
#include "testlib.h"

#define WAIT_MS 15000

#define CANARY_POD_PW "canaryPodPw-9d1e"
#define CANARY_POD_TICKET "canaryPodTicket-4b7c"
#define CANARY_CSI_FLAG "canaryCsiFlag-2a6f"
#define CANARY_CSI_CTX "canaryCsiCtx-8e3b"
#define CANARY_CSI_SECRET "canaryCsiSecret-c05d"
#define CANARY_SA_TOKEN "canarySaToken-71fa"

static const char *const canaries[] = {
	CANARY_POD_PW,	CANARY_POD_TICKET, CANARY_CSI_FLAG,
	CANARY_CSI_CTX, CANARY_CSI_SECRET, CANARY_SA_TOKEN,
};

static int setup(void **state)
{
	*state = fixture_new("canary");
	return 0;
}

/* The CSI client the test started, if it still runs (a failed assertion left it). */
static pid_t csi_pid;

static int teardown(void **state)
{
	if (csi_pid > 0) {
		kill(csi_pid, SIGKILL);
		waitpid(csi_pid, NULL, 0);
		csi_pid = 0;
	}
	fixture_free(*state);
	return 0;
}

/* Fails naming where a canary showed up, with the text around it. */
static void assert_no_canary(const char *where, const char *text)
{
	assert_no_canary_in(where, text, canaries, sizeof(canaries) / sizeof(canaries[0]));
}

/* Every place the agent writes to: log, state dir, status (both forms), metrics. */
static void assert_no_canary_anywhere(struct agent_fixture *f, const char *volume)
{
	struct canary_outputs o;

	assert_no_canary_anywhere_in(f, canaries, sizeof(canaries) / sizeof(canaries[0]), &o);
	/* Not vacuous: the volume is there, its options shown masked. */
	assert_non_null(strstr(o.status_json, volume));
	assert_non_null(strstr(o.status_json, "password=****"));
	assert_non_null(strstr(o.status, "password=****"));
	assert_non_null(strstr(o.metrics, "volagent_operations_started_total"));
	canary_outputs_free(&o);
}

static int closed_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port;

	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* A server that never answers: a listener with backlog 0 whose accept queue this test fills,
 * so that the kernel drops every further SYN and the agent's connect hangs until its connect
 * timeout.  The fds are returned in fds[0..2] for the caller to close. */
static int hung_server(int fds[3])
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);

	fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(fds[0], (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fds[0], 0), 0);
	assert_int_equal(getsockname(fds[0], (struct sockaddr *)&a, &len), 0);
	for (int i = 1; i < 3; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		(void)connect(fds[i], (struct sockaddr *)&a, sizeof(a));
	}
	return ntohs(a.sin_port);
}

/* (a) A pod spec file: nfs, server down, a password= option and one named in
 * sensitiveMountOptions. */
static void test_pod_spec_file(void **state)
{
	struct agent_fixture *f = *state;
	int port = closed_port();

	assert_int_equal(
		fixture_write_podf(
			f, "canary.json",
			"{\"pod\": {\"uid\": \"pod-canary\"}, \"volumes\": ["
			"{\"name\": \"share\", \"nfs\": {\"server\": \"127.0.0.1\", \"path\": \"/export\","
			" \"sensitiveMountOptions\": [\"ticket\"]},"
			" \"mountOptions\": [\"port=%d\", \"vers=4.1\", \"password=" CANARY_POD_PW
			"\","
			" \"ticket=" CANARY_POD_TICKET "\"]}]}",
			port),
		0);
	assert_int_equal(fixture_start(f, (const char *const[]){ "--log-level", "debug",
								 "--nfs-connect-timeout", "300ms",
								 "--device-inventory", "false",
								 NULL }),
			 0);
	assert_true(fixture_wait_log(f, "operation failed", WAIT_MS));
	assert_true(fixture_wait_log(f, "Connection refused", WAIT_MS));
	assert_no_canary_anywhere(f, "pod-canary");
	/* The journal kept nothing but what it needs; the agent stops cleanly. */
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
	{
		char *log = test_read_file(f->agent.log_path);
		assert_no_canary("agent log after stop", log);
		free(log);
	}
}

struct csi_call {
	char out[700];
};

/* Starts the CSI client on the calls in the background; its answers go to c->out. */
static void csi_start(struct agent_fixture *f, const char *sock, const char *calls,
		      struct csi_call *c)
{
	char input[700], stubs[700];

	snprintf(input, sizeof(input), "%s/calls.txt", f->dir);
	snprintf(stubs, sizeof(stubs), "%s/stubs", f->dir);
	snprintf(c->out, sizeof(c->out), "%s/answers.txt", f->dir);
	assert_int_equal(test_write_file(input, calls), 0);
	csi_pid = fork();
	assert_true(csi_pid >= 0);
	if (csi_pid == 0) {
		int fd = open(c->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || dup2(fd, 1) < 0)
			_exit(126);
		execl("/usr/bin/python3", "/usr/bin/python3", "tests/csi/csi_client.py", "--socket",
		      sock, "--stub-dir", stubs, "--timeout", "60", "--input", input, (char *)NULL);
		_exit(127);
	}
}

/* Waits for the client; returns its answers (caller frees). */
static char *csi_finish(struct csi_call *c)
{
	int status;

	assert_int_equal(waitpid(csi_pid, &status, 0), csi_pid);
	csi_pid = 0;
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return test_read_file(c->out);
}

static bool socket_exists(void *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

#define CAP_FLAGS                                                             \
	"{\"mount\": {\"mount_flags\": [\"password=" CANARY_CSI_FLAG "\"]}, " \
	"\"access_mode\": {\"mode\": \"SINGLE_NODE_WRITER\"}}"

#define CONTEXT                                                                                \
	"\"volume_context\": {\"type\": \"nfs\", \"server\": \"127.0.0.1\", \"path\": "        \
	"\"/export\", \"mountOptions\": \"port=%d,secret=" CANARY_CSI_CTX "\"}, \"secrets\": " \
	"{\"token\": \"" CANARY_CSI_SECRET "\"}"

/* Starts the agent with --csi in the given nfs mode; the kubelet dir is in ret_kubelet. */
static void csi_agent_start(struct agent_fixture *f, const char *nfs_mode, char *kubelet,
			    char *sock)
{
	long off = fixture_log_size(f);

	snprintf(kubelet, 600, "%s/kubelet", fixture_short_dir(f));
	snprintf(sock, 700, "%s/plugins/csi.volagent.io/csi.sock", kubelet);
	assert_int_equal(fixture_start(f, (const char *const[]){ "--csi", "--kubelet-root-dir",
								 kubelet, "--device-inventory",
								 "false", "--log-level", "debug",
								 "--nfs-mode", nfs_mode,
								 "--nfs-connect-timeout", "8s",
								 NULL }),
			 0);
	assert_true(test_wait_until(socket_exists, sock, WAIT_MS));
	assert_true(fixture_wait_log_after(f, off, "startup reconstruction complete", WAIT_MS));
}

/* Runs calls, whose last one reaches a server that never answers; while it is in flight
 * (the journal holds journal_text) and after it failed, no canary is anywhere. */
static void csi_check(struct agent_fixture *f, const char *sock, const char *calls,
		      const char *journal_text, const char *volume, int n_ok)
{
	char journal[700], *out, *line;
	struct csi_call c;
	int ok = 0, n = 0;

	snprintf(journal, sizeof(journal), "%s/journal.json", f->state);
	csi_start(f, sock, calls, &c);
	assert_true(test_wait_file_text(journal, journal_text, true, WAIT_MS));
	assert_no_canary_anywhere(f, volume);

	out = csi_finish(&c);
	assert_non_null(out);
	assert_no_canary("CSI answers", out);
	/* The first n_ok calls succeed; the last fails, as its server never answers. */
	for (line = out; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : "") {
		n++;
		ok += strncmp(line, "OK ", 3) == 0;
	}
	if (ok != n_ok || n != n_ok + 1)
		fail_msg("expected %d answers OK then one error: %s", n_ok, out);
	free(out);
	{
		char *log = test_read_file(f->agent.log_path), *j = test_read_file(journal);
		assert_no_canary("agent log", log);
		assert_no_canary("journal", j);
		free(log);
		free(j);
	}
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

/* (b) CSI, stage: NodeStageVolume (nfs shared mode mounts the share when staging) with the
 * canaries in the capability's mount_flags, the volume_context's mountOptions and secrets,
 * its server never answering: checked while the call is in flight (status and journal hold
 * the volume) and after it failed. */
/* The one NodeStageVolume call (with every canary) of volume nfs-NAME to port, into calls;
 * its staging dir (pv NAME) is made. */
static void stage_call(const char *kubelet, const char *name, int port, char *calls, size_t size)
{
	char stg[700];

	snprintf(stg, sizeof(stg), "%s/plugins/kubernetes.io/csi/csi.volagent.io/%s/globalmount",
		 kubelet, name);
	assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", stg, NULL }), 0);
	snprintf(calls, size,
		 "Node/NodeStageVolume {\"volume_id\": \"nfs-%s\", \"staging_target_path\": "
		 "\"%s\", \"volume_capability\": " CAP_FLAGS ", " CONTEXT "}\n",
		 name, stg, port);
}

static void test_csi_stage(void **state)
{
	struct agent_fixture *f = *state;
	char kubelet[600], sock[700], calls[4096];
	int fds[3], hung = hung_server(fds);

	csi_agent_start(f, "shared", kubelet, sock);
	stage_call(kubelet, "hung", hung, calls, sizeof(calls));
	csi_check(f, sock, calls, "\"volume_id\":\"nfs-hung\"", "csi:nfs-hung", 0);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
}

/* (b) CSI, publish: in nfs direct mode the stage mounts nothing and NodePublishVolume mounts
 * the share at the target; the same canaries, the server never answering. */
static void test_csi_publish(void **state)
{
	struct agent_fixture *f = *state;
	char kubelet[600], sock[700], stg[700], tgt[700], calls[4096];
	int fds[3], hung = hung_server(fds);

	csi_agent_start(f, "direct", kubelet, sock);
	snprintf(stg, sizeof(stg), "%s/plugins/kubernetes.io/csi/csi.volagent.io/pv/globalmount",
		 kubelet);
	snprintf(tgt, sizeof(tgt), "%s/pods/pod-c/volumes/kubernetes.io~csi/pv", kubelet);
	assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", stg, tgt, NULL }), 0);
	snprintf(calls, sizeof(calls),
		 "Node/NodeStageVolume {\"volume_id\": \"nfs-pub\", \"staging_target_path\": "
		 "\"%s\", \"volume_capability\": " CAP_FLAGS ", " CONTEXT "}\n"
		 "Node/NodePublishVolume {\"volume_id\": \"nfs-pub\", \"staging_target_path\": "
		 "\"%s\", \"target_path\": \"%s/mount\", \"volume_capability\": " CAP_FLAGS
		 ", " CONTEXT "}\n",
		 stg, hung, stg, tgt, hung);
	csi_check(f, sock, calls, "\"pod_uid\":\"pod-c\"", "csi:nfs-pub", 1);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
}

/* kubelet's publish context with podInfoOnMount and a token request (CSIDriver
 * tokenRequests): the pod's identity and a token for audience "vault". */
#define POD_CTX                                                                                    \
	"\"volume_capability\": {\"mount\": {}, \"access_mode\": {\"mode\": "                      \
	"\"SINGLE_NODE_WRITER\"}}, \"volume_context\": {\"type\": \"local\", "                     \
	"\"csi.storage.k8s.io/ephemeral\": \"true\", \"csi.storage.k8s.io/pod.name\": \"web-0\", " \
	"\"csi.storage.k8s.io/pod.namespace\": \"shop\", \"csi.storage.k8s.io/pod.uid\": "         \
	"\"pod-w\", \"csi.storage.k8s.io/serviceAccount.name\": \"sa-web\", "                      \
	"\"csi.storage.k8s.io/serviceAccount.tokens\": "                                           \
	"\"{\\\"vault\\\":{\\\"token\\\":\\\"" CANARY_SA_TOKEN                                     \
	"\\\",\\\"expirationTimestamp\\\":\\\"2030-01-01T00:00:00Z\\\"}}\"}"

static void assert_json_str(json_t *o, const char *key, const char *want)
{
	const char *v = json_string_value(json_object_get(o, key));

	if (!v || strcmp(v, want) != 0)
		fail_msg("status --json: pod.%s is \"%s\", expected \"%s\"", key, v ? v : "(none)",
			 want);
}

/* status --json and text show the pod info of target; the token is nowhere. */
static void assert_pod_info_shown(struct csi_env *e, const char *target)
{
	char sock[700], *out = NULL;
	json_t *root, *pod;

	snprintf(sock, sizeof(sock), "%s/admin.sock", e->f->state);
	assert_int_equal(test_volagent((const char *const[]){ "status", "--json", "--socket", sock,
							      NULL },
				       &out),
			 0);
	assert_no_canary("status --json", out);
	root = json_loads(out, 0, NULL);
	assert_non_null(root);
	pod = json_object_get(status_pod_volume(root, target), "pod");
	if (!json_is_object(pod))
		fail_msg("no pod info for %s in status --json", target);
	assert_json_str(pod, "name", "web-0");
	assert_json_str(pod, "namespace", "shop");
	assert_json_str(pod, "uid", "pod-w");
	assert_json_str(pod, "service_account", "sa-web");
	assert_int_equal(json_object_size(pod), 4);
	json_decref(root);
	free(out);
	assert_int_equal(test_volagent((const char *const[]){ "status", "--socket", sock, NULL },
				       &out),
			 0);
	assert_no_canary("status", out);
	if (!strstr(out, "pod: shop/web-0 uid pod-w service account sa-web"))
		fail_msg("no pod info in status: %s", out);
	free(out);
}

/* (c) CSI, pod info: a publish whose volume_context carries kubelet's pod.* keys and a
 * service-account token, through the real client.  The pod info is in status, the journal
 * and the "volume mounted" line, and again after a SIGKILL and restart (read back from the
 * journal); the token is in none of the agent's outputs, nor in any CSI answer.  A pod name
 * with a control character is refused naming the key. */
static void test_csi_pod_info(void **state)
{
	struct csi_env *e = *state;
	char t[700], bad[700], calls[4096], journal[700], *out, *log, *j;

	csi_env_start(e);
	csi_env_target(e, "pod-w", "eph", t);
	csi_env_target(e, "pod-x", "eph", bad);
	snprintf(calls, sizeof(calls),
		 "Node/NodePublishVolume {\"volume_id\": \"csi-pod\", \"target_path\": \"%s\", "
		 "%s}\n"
		 "Node/NodePublishVolume {\"volume_id\": \"csi-bad\", \"target_path\": \"%s\", "
		 "\"volume_capability\": {\"mount\": {}, \"access_mode\": {\"mode\": "
		 "\"SINGLE_NODE_WRITER\"}}, \"volume_context\": {\"type\": \"local\", "
		 "\"csi.storage.k8s.io/ephemeral\": \"true\", \"csi.storage.k8s.io/pod.name\": "
		 "\"a\\nb\"}}\n",
		 t, POD_CTX, bad);
	out = csi_env_call(e, calls);
	assert_no_canary("CSI answers", out);
	assert_line(out, 0, "OK {}");
	assert_line(out, 1, "INVALID_ARGUMENT");
	assert_line(out, 1,
		    "volume_context.csi.storage.k8s.io/pod.name: holds a control character");
	free(out);
	assert_false(test_is_mountpoint(bad));

	assert_pod_info_shown(e, t);
	snprintf(journal, sizeof(journal), "%s/journal.json", e->f->state);
	assert_true(test_wait_file_text(journal, "\"service_account\":\"sa-web\"", true, WAIT_MS));
	log = test_read_file(e->f->agent.log_path);
	assert_non_null(strstr(log, "pod=pod-w pod_name=shop/web-0"));
	free(log);
	assert_true(assert_no_canary_in_files(e->f->state, canaries,
					      sizeof(canaries) / sizeof(canaries[0])) >= 1);

	/* The journal keeps it: a restarted agent shows the same. */
	fixture_stop(e->f, SIGKILL);
	csi_env_start(e);
	assert_pod_info_shown(e, t);

	snprintf(calls, sizeof(calls),
		 "Node/NodeUnpublishVolume {\"volume_id\": \"csi-pod\", \"target_path\": "
		 "\"%s\"}\n",
		 t);
	out = csi_env_call(e, calls);
	assert_line(out, 0, "OK {}");
	free(out);
	assert_int_equal(fixture_stop(e->f, SIGTERM), 0);
	log = test_read_file(e->f->agent.log_path);
	j = test_read_file(journal);
	assert_no_canary("agent log", log);
	assert_no_canary("journal", j);
	free(log);
	free(j);
}

static int csi_setup(void **state)
{
	*state = csi_env_new("canary-pod");
	return 0;
}

static int csi_teardown(void **state)
{
	csi_env_free(*state);
	return 0;
}

/* (d) A core dump of the agent taken while a NodeStageVolume with secrets is in flight (its
 * server never answers) holds them only where gRPC received them: the request's secrets are
 * copied into memory left out of core dumps once the request is decoded and validated, and
 * the copies the agent owns (the decoded message's strings, the request's bytes as gRPC
 * handed them over) are wiped.  What stays is gRPC's own receive buffers, freed but not wiped
 * (docs/hardening.md): there the secret is in the request's encoding, after its map entry's
 * tag and length (0x12, 20 bytes), and only there.  Not vacuous: the same request's
 * volume_context canary, which is no secret, is in the dump.  Skipped when core_pattern does
 * not write a plain file in the agent's cwd. */
static void test_csi_secret_not_in_core(void **state)
{
	struct agent_fixture *f = *state;
	char kubelet[600], sock[700], calls[4096], journal[700], cwd[PATH_MAX];
	struct rlimit old, unlimited = { RLIM_INFINITY, RLIM_INFINITY };
	char bin[PATH_MAX], asan[512], asan_was[400];
	bool had_asan = getenv("ASAN_OPTIONS") != NULL;
	int fds[3], hung, files, secrets, encoded, contexts;
	struct csi_call c;

	if (!test_core_pattern_is_plain())
		skip();
	assert_non_null(realpath(test_volagent_bin(), bin)); /* the agent starts in f->dir */
	hung = hung_server(fds);
	assert_int_equal(setenv("VOLAGENT_BIN", bin, 1), 0);
	/* The sanitizer build dumps no core unless asked (its shadow memory is left out). */
	snprintf(asan_was, sizeof(asan_was), "%s", had_asan ? getenv("ASAN_OPTIONS") : "");
	snprintf(asan, sizeof(asan), "%s%sdisable_coredump=0", asan_was, *asan_was ? ":" : "");
	assert_int_equal(setenv("ASAN_OPTIONS", asan, 1), 0);
	assert_int_equal(getrlimit(RLIMIT_CORE, &old), 0);
	assert_int_equal(setrlimit(RLIMIT_CORE, &unlimited), 0);
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(f->dir), 0);
	csi_agent_start(f, "shared", kubelet, sock);
	assert_int_equal(chdir(cwd), 0);
	assert_int_equal(setrlimit(RLIMIT_CORE, &old), 0);
	if (had_asan)
		setenv("ASAN_OPTIONS", asan_was, 1);
	else
		unsetenv("ASAN_OPTIONS");

	stage_call(kubelet, "core", hung, calls, sizeof(calls));
	snprintf(journal, sizeof(journal), "%s/journal.json", f->state);
	csi_start(f, sock, calls, &c);
	assert_true(test_wait_file_text(journal, "\"volume_id\":\"nfs-core\"", true, WAIT_MS));
	assert_int_equal(fixture_stop(f, SIGABRT), 128 + SIGABRT);
	kill(csi_pid, SIGKILL);
	waitpid(csi_pid, NULL, 0);
	csi_pid = 0;

	secrets = test_core_files_count(f->dir, CANARY_CSI_SECRET, &files);
	encoded = test_core_files_count(f->dir, "\x12\x14" CANARY_CSI_SECRET, &files);
	contexts = test_core_files_count(f->dir, CANARY_CSI_CTX, &files);
	print_message("%d core file(s): the secret %d times (%d in gRPC's encoding), the "
		      "volume_context canary %d times\n",
		      files, secrets, encoded, contexts);
	assert_int_equal(files, 1);
	assert_true(contexts > 0);
	assert_int_equal(secrets, encoded);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_pod_spec_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_csi_stage, setup, teardown),
		cmocka_unit_test_setup_teardown(test_csi_publish, setup, teardown),
		cmocka_unit_test_setup_teardown(test_csi_pod_info, csi_setup, csi_teardown),
		cmocka_unit_test_setup_teardown(test_csi_secret_not_in_core, setup, teardown),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
