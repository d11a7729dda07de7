/*
 * gen.c - random text for the parser tests (gen.h).
 */
#include "test/http/gen.h"

#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

uint64_t
test_gen_next(struct test_gen *g)
{
    g->s ^= g->s << 13;
    g->s ^= g->s >> 7;
    g->s ^= g->s << 17;
    return g->s;
}

unsigned
test_gen_pick(struct test_gen *g, unsigned n)
{
    return (unsigned)(test_gen_next(g) % n);
}

void
test_gen_put(struct test_gen *g, const char *s, size_t n)
{
    if (g->n + n + 1 > g->cap) {
        g->cap = (g->n + n + 1) * 2;
        g->p = realloc(g->p, g->cap);
        cr_assert_not_null(g->p);
    }
    memcpy(g->p + g->n, s, n);
    g->n += n;
    g->p[g->n] = '\0';
}

void
test_gen_puts(struct test_gen *g, const char *s)
{
    test_gen_put(g, s, strlen(s));
}
