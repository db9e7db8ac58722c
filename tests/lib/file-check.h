/* file-check.h - the check tests make of a file's content (a volume's data seen through a
 * mount, a host file the agent must not touch): read whole and compared, failing the running
 * cmocka test with both texts when it differs or cannot be read. */
#pragma once

/* Fails the test unless the file <dir>/<name> holds exactly text (name NULL: dir is the
 * file). */
void assert_file_text(const char *dir, const char *name, const char *text);
