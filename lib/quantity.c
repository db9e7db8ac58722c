/* quantity.c - strict parsing of a Kubernetes quantity of bytes (see quantity.h).  A size a
 * user writes decides how much a volume may hold: anything that is not plainly a quantity is
 * refused rather than guessed at. */
#include <errno.h>
#include <string.h>

#include "quantity.h"

static const struct {
	const char *suffix;
	uint64_t base;
	int power;
} suffixes[] = {
	{ "", 1, 0 },	   { "k", 1000, 1 },  { "M", 1000, 2 },	 { "G", 1000, 3 },
	{ "T", 1000, 4 },  { "P", 1000, 5 },  { "E", 1000, 6 },	 { "Ki", 1024, 1 },
	{ "Mi", 1024, 2 }, { "Gi", 1024, 3 }, { "Ti", 1024, 4 }, { "Pi", 1024, 5 },
	{ "Ei", 1024, 6 },
};

#define QUANTITY_MAX ((uint64_t)INT64_MAX)

int quantity_parse_bytes(const char *s, const char *field, uint64_t *ret_bytes,
			 struct error_info *err)
{
	uint64_t whole = 0, frac = 0, frac_div = 1, mult = 1, bytes;
	const char *p = s;
	int i, n_suffix = (int)(sizeof(suffixes) / sizeof(suffixes[0]));

	if (!s || !*s)
		return err_set(err, -EINVAL, "%s: empty; give a quantity such as 512Mi or 10Gi",
			       field);
	if (*p < '0' || *p > '9')
		goto bad;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (whole > (QUANTITY_MAX - (uint64_t)(*p - '0')) / 10)
			return err_set(err, -ERANGE, "%s: \"%s\" is too large", field, s);
		whole = whole * 10 + (uint64_t)(*p - '0');
	}
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			goto bad;
		for (; *p >= '0' && *p <= '9'; p++) {
			/* 18 digits of fraction are more than a byte of an exabyte needs. */
			if (frac_div >= 1000000000000000000ULL)
				goto bad;
			frac = frac * 10 + (uint64_t)(*p - '0');
			frac_div *= 10;
		}
	}
	for (i = 0; i < n_suffix; i++)
		if (strcmp(p, suffixes[i].suffix) == 0)
			break;
	if (i == n_suffix)
		goto bad;
	for (int k = 0; k < suffixes[i].power; k++)
		mult *= suffixes[i].base;
	if (whole > QUANTITY_MAX / mult)
		return err_set(err, -ERANGE, "%s: \"%s\" is too large", field, s);
	bytes = whole * mult;
	if (frac) {
		/* frac/frac_div of mult, rounded up; the product needs more than 64 bits. */
		unsigned __int128 part = (unsigned __int128)frac * mult;
		uint64_t add = (uint64_t)((part + frac_div - 1) / frac_div);

		if (bytes > QUANTITY_MAX - add)
			return err_set(err, -ERANGE, "%s: \"%s\" is too large", field, s);
		bytes += add;
	}
	if (bytes == 0)
		return err_set(err, -EINVAL, "%s: \"%s\" is zero; a size must be positive", field,
			       s);
	*ret_bytes = bytes;
	return 0;
bad:
	return err_set(err, -EINVAL,
		       "%s: \"%s\" is not a quantity of bytes (digits with an optional suffix k, "
		       "M, G, T, P, E, Ki, Mi, Gi, Ti, Pi or Ei, e.g. 512Mi)",
		       field, s);
}
