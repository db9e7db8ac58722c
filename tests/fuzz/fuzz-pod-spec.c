/* fuzz-pod-spec.c - libFuzzer target for pod spec files: the bytes of a file through
 * pod_spec_parse_string(), the parser the spec source runs on every file in the pods dir, and
 * an accepted spec into the desired state (as the spec source does), then out again.
 *
 * A spec that parses must hold what the parser promises: a safe uid, DNS-label volume names
 * unique in the pod, a plugin and a node-wide name for each volume.  A rejected one must say
 * why. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "desired-state.h"
#include "hashmap.h"
#include "pod-spec.h"

#define FUZZ_CHECK(cond)                  \
	do {                              \
		if (!(cond))              \
			__builtin_trap(); \
	} while (0)

static bool uid_safe(const char *u)
{
	if (!u || !*u || !strcmp(u, ".") || !strcmp(u, ".."))
		return false;
	return strspn(u, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
	       strlen(u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct desired_state *dsw;
	struct error_info err = { 0 };
	struct pod_spec *spec = NULL;
	char *text;
	int r;

	if (size > POD_SPEC_MAX_BYTES)
		return 0;
	if (!dsw)
		dsw = dsw_new("/fuzz/root");
	text = malloc(size + 1);
	if (!text || !dsw)
		abort();
	memcpy(text, data, size);
	text[size] = '\0';

	r = pod_spec_parse_string(text, "fuzz.json", &spec, &err);
	if (r < 0) {
		FUZZ_CHECK(spec == NULL);
		FUZZ_CHECK(r == -ENOMEM || err.msg[0] != '\0');
	} else {
		FUZZ_CHECK(spec && uid_safe(spec->uid));
		for (size_t i = 0; i < spec->n_volumes; i++) {
			const struct pod_volume *v = &spec->volumes[i];

			FUZZ_CHECK(pod_volume_name_is_valid(v->name));
			FUZZ_CHECK(v->spec && v->plugin && v->volume_name && *v->volume_name);
			for (size_t k = 0; k < i; k++)
				FUZZ_CHECK(strcmp(spec->volumes[k].name, v->name) != 0);
		}
		/* The spec source's next step; a rejection here is -EEXIST only. */
		err.msg[0] = '\0';
		r = dsw_set_pod(dsw, spec, &err);
		FUZZ_CHECK(r == 0 || r == -EEXIST || r == -ENOMEM);
		if (r == 0)
			FUZZ_CHECK(dsw_remove_pod(dsw, spec->uid) >= 0);
		FUZZ_CHECK(hashmap_size(dsw_pod_volumes(dsw)) == 0);
	}
	pod_spec_free(spec);
	free(text);
	return 0;
}
