/* exec-util.c - see exec-util.h. */
#include "exec-util.h"
#include "process.h"

int exec_capture_timeout(const char *const argv[], uint64_t timeout_ms, char *out, size_t outlen)
{
	return process_run(argv,
			   &(struct process_options){ .timeout_ms = timeout_ms,
						      .output_max = outlen ? outlen - 1 : 0 },
			   out, outlen);
}

int exec_capture(const char *const argv[], char *out, size_t outlen)
{
	return exec_capture_timeout(argv, EXEC_DEFAULT_TIMEOUT_MS, out, outlen);
}
