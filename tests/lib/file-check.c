/* file-check.c - a file's content checked (see file-check.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>

#include "file-check.h"
#include "testlib.h"

void assert_file_text(const char *dir, const char *name, const char *text)
{
	char path[1200];
	char *s;

	snprintf(path, sizeof(path), "%s%s%s", dir, name ? "/" : "", name ? name : "");
	s = test_read_file(path);
	if (!s)
		fail_msg("%s cannot be read, expected \"%s\"", path, text);
	assert_string_equal(s, text);
	free(s);
}
