/*
 * shell.h - what the ops suites run commands with: a shell line whose
 * output (stdout and stderr) is kept for the assertions that follow.
 */
#ifndef MAYFLY_TEST_OPS_SHELL_H
#define MAYFLY_TEST_OPS_SHELL_H

#include <sys/types.h>

#include <stdarg.h>
#include <stddef.h>

/*
 * ops_vsh - run the printf-style command fmt with stdin from /dev/null and
 * its output into dir/out, then read that (at most cap - 1 bytes) into out,
 * NUL-terminated.  Returns the exit status, or 128 + the killing signal.
 */
int ops_vsh(const char *dir, char *out, size_t cap, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/* ops_repo_root - the repository the server under test was built in, from
 * MAYFLYD (ROOT/build/<mode>/mayflyd), into root.  0, or -1 when MAYFLYD is
 * not set (errno EINVAL) or not there. */
int ops_repo_root(char *root, size_t len);

/* ops_pid_alive - pid exists and is not a zombie (or dead). */
int ops_pid_alive(pid_t pid);

/* ops_pid_ours - pid is alive and one of its arguments holds needle (the
 * test's scratch directory): a pid read earlier may have been reused by
 * another run's process, which a teardown must not kill. */
int ops_pid_ours(pid_t pid, const char *needle);

#endif
