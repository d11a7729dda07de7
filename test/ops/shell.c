/*
 * shell.c - see shell.h.
 */
#include "test/ops/shell.h"

#include <sys/wait.h>

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
ops_vsh(const char *dir, char *out, size_t cap, const char *fmt, va_list ap)
{
    char cmd[4096], path[512], full[sizeof(cmd) + sizeof(path) + 32];
    size_t n;
    FILE *f;
    int st;

    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    snprintf(path, sizeof(path), "%s/out", dir);
    snprintf(full, sizeof(full), "(%s) >%s 2>&1 </dev/null", cmd, path);
    st = system(full);
    f = fopen(path, "r");
    n = f ? fread(out, 1, cap - 1, f) : 0;
    if (f)
        fclose(f);
    out[n] = '\0';
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int
ops_repo_root(char *root, size_t len)
{
    const char *bin = getenv("MAYFLYD");
    char real[PATH_MAX];

    if (bin == NULL) {
        errno = EINVAL;
        return -1;
    }
    if (realpath(bin, real) == NULL)
        return -1;
    snprintf(root, len, "%s", dirname(dirname(dirname(real))));
    return 0;
}

int
ops_pid_alive(pid_t pid)
{
    char path[64], buf[512];
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "pid (comm) S ...": comm may hold spaces and parentheses. */
    const char *st = strrchr(buf, ')');
    return st != NULL && st[1] == ' ' && st[2] != 'Z' && st[2] != 'X';
}

int
ops_pid_ours(pid_t pid, const char *needle)
{
    char path[64], buf[4096];
    size_t n;
    FILE *f;

    if (!ops_pid_alive(pid))
        return 0;
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
        if (strstr(buf + i, needle) != NULL)
            return 1;
    return 0;
}
