/* bench-util.h - what the benchmark programs of tests/bench share: dying with a message, the
 * clocks, medians and whether a path is a mount root.  Only libc, like volagent-bench. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* Names the program in die()'s messages; on_die (may be NULL) runs before it exits, e.g. to
 * stop a child the benchmark started. */
void bench_init(const char *name, void (*on_die)(void));

/* Prints "<name>: <message>" to stderr and exits 1. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* clk (CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID, ...) in ns; bench_now_ns: the monotonic one. */
uint64_t bench_clock_ns(clockid_t clk);
uint64_t bench_now_ns(void);

/* qsort's comparison of doubles, ascending. */
int bench_cmp_double(const void *a, const void *b);

/* Sorts v[0..n) and returns its median; n > 0. */
double bench_median(double *v, int n);

/* Whether path is the root of a mount (false when it does not exist). */
bool bench_is_mount_root(const char *path);
