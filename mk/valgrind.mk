# valgrind.mk - `make check` runs the daemon's integration tests once more with every agent
# process under valgrind's memcheck (scripts/valgrind-check): any memory error or definite
# leak in the agent fails them.  Skipped under SANITIZE=1 (valgrind cannot run ASan binaries).
CHECK_SCRIPTS += scripts/valgrind-check
