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

/* test_same_text - see gen.h. */
int
test_same_text(const char *ours, size_t n, const char *theirs, size_t m)
{
    const unsigned char *a = (const unsigned char *)ours;
    const unsigned char *b = (const unsigned char *)theirs;

    if (n != m)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (a[i] == 0xed && i + 2 < n && (a[i + 1] & 0xe0) == 0xa0) {
            if (b[i] != 0xef || b[i + 1] != 0xbf || b[i + 2] != 0xbd)
                return 0;
            i += 2;
        } else if (a[i] != b[i]) {
            return 0;
        }
    }
    return 1;
}
