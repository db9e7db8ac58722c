/* fuzz-mount-options.c - libFuzzer target for mount option strings (agent/mount-options.h):
 * a CSI volume_context's "mountOptions", an nfs spec's options and the caller's
 * "sensitiveMountOptions" list are all outside input.
 *
 * Input: the bytes up to the first NUL are the option list, the rest the extra sensitive
 * names.  Checked: split and join are inverse; no option holds a comma outside quotes;
 * lookups agree with the vector; and after mount_options_mask_text() no sensitive value is
 * left in a message that echoed the options (values that hold the mask character aside, whose
 * "****" would match themselves). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mount-options.h"

#define FUZZ_CHECK(cond)                  \
	do {                              \
		if (!(cond))              \
			__builtin_trap(); \
	} while (0)

/* Whether s has a comma outside double quotes (an option may quote one: an SELinux
 * context="...:s0:c1,c2" label). */
static int comma_outside_quotes(const char *s)
{
	int quoted = 0;

	for (; *s; s++) {
		if (*s == '"')
			quoted = !quoted;
		else if (*s == ',' && !quoted)
			return 1;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 2), *list, *extra, *joined, *masked;
	char **v = NULL;
	char text[1024];
	size_t n;
	int r;

	if (!buf)
		abort();
	memcpy(buf, data, size);
	buf[size] = buf[size + 1] = '\0';
	list = buf;
	extra = buf + strlen(buf) + 1;
	if (extra > buf + size)
		extra = NULL;

	r = mount_options_split(list, &v);
	if (r < 0) {
		FUZZ_CHECK(r == -EINVAL || r == -ENOMEM);
		FUZZ_CHECK(v == NULL);
		free(buf);
		return 0;
	}
	n = mount_options_count(v);
	joined = mount_options_join(v);
	FUZZ_CHECK(joined && strcmp(joined, list) == 0);
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(v[i], '=');
		size_t klen = eq ? (size_t)(eq - v[i]) : strlen(v[i]);
		char key[256];
		const char *got;

		FUZZ_CHECK(*v[i] && !comma_outside_quotes(v[i]));
		if (klen >= sizeof(key))
			continue;
		memcpy(key, v[i], klen);
		key[klen] = '\0';
		got = mount_options_get(v, key);
		FUZZ_CHECK(got != NULL);
	}
	masked = mount_options_mask(v, extra);
	FUZZ_CHECK(masked != NULL);

	/* A message that echoes the whole list, as a helper's error might. */
	snprintf(text, sizeof(text), "mount failed: -o %s: %s", joined, list);
	mount_options_mask_text(text, sizeof(text), v, extra);
	FUZZ_CHECK(memchr(text, '\0', sizeof(text)) != NULL);
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(v[i], '='), *val = eq ? eq + 1 : v[i];

		if (!mount_option_is_sensitive(v[i], extra) || !*val || strchr(val, '*'))
			continue;
		FUZZ_CHECK(strstr(text, val) == NULL);
	}
	/* A small buffer: truncated, still a string. */
	snprintf(text, 16, "%s", list);
	mount_options_mask_text(text, 16, v, extra);
	FUZZ_CHECK(memchr(text, '\0', 16) != NULL);

	free(masked);
	free(joined);
	mount_options_free(v);
	free(buf);
	return 0;
}
