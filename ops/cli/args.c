/*
 * args.c - see args.h.
 */
#include "ops/cli/args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cli_args_find - the option called name (n bytes) in opts, or NULL. */
static const struct cli_opt *
cli_args_find(const struct cli_opt *opts, const char *name, size_t n)
{
    for (const struct cli_opt *o = opts; o != NULL && o->name != NULL; o++)
        if (strlen(o->name) == n && memcmp(o->name, name, n) == 0)
            return o;
    return NULL;
}

/* cli_args_parse - see args.h. */
int
cli_args_parse(int argc, char **argv, const struct cli_opt *opts,
               struct cli_globals *g, struct cli_operands *ops)
{
    const struct cli_opt globals[] = {{"url", NULL, &g->url},
                                      {"token", NULL, &g->token},
                                      {"json", &g->json, NULL},
                                      {NULL, NULL, NULL}};
    int ended = 0;

    ops->v = argv;
    ops->n = 0;
    for (int i = 0; i < argc; i++) {
        char *a = argv[i];
        if (ended || a[0] != '-' || a[1] == '\0' ||
            (a[1] != '-' && strcmp(a, "-h") != 0)) {
            ops->v[ops->n++] = a; /* operands move left over what was read */
            continue;
        }
        if (strcmp(a, "--") == 0) {
            ended = 1;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
            return 1;
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t n = eq ? (size_t)(eq - name) : strlen(name);
        const struct cli_opt *o = cli_args_find(opts, name, n);
        if (o == NULL)
            o = cli_args_find(globals, name, n);
        if (o == NULL) {
            fprintf(stderr, "mayfly: unknown option --%.*s\n", (int)n, name);
            return -1;
        }
        if (o->flag != NULL) {
            if (eq != NULL) {
                fprintf(stderr, "mayfly: --%s takes no value\n", o->name);
                return -1;
            }
            *o->flag = 1;
        } else if (eq != NULL) {
            *o->value = eq + 1;
        } else if (i + 1 < argc) {
            *o->value = argv[++i];
        } else {
            fprintf(stderr, "mayfly: --%s needs a value\n", o->name);
            return -1;
        }
    }
    return 0;
}

/* cli_args_long - see args.h. */
int
cli_args_long(const char *name, const char *s, long min, long max, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
        fprintf(stderr,
                "mayfly: --%s wants a whole number from %ld to %ld, not '%s'\n",
                name, min, max, s);
        return -1;
    }
    *out = v;
    return 0;
}
