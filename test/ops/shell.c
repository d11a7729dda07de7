/*
 * shell.c - see shell.h.
 */
#include "test/ops/shell.h"

#include <sys/wait.h>

#include <stdio.h>
#include <stdlib.h>

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
