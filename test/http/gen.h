/*
 * gen.h - random text for the parser tests: an xorshift generator (the
 * same seed gives the same documents on every machine) and the growing,
 * NUL-terminated buffer a document is written into.
 */
#ifndef MAYFLY_TEST_HTTP_GEN_H
#define MAYFLY_TEST_HTTP_GEN_H

#include <stddef.h>
#include <stdint.h>

struct test_gen {
    uint64_t s; /* generator state, non-zero */
    char *p;    /* the document, NUL-terminated; free() it */
    size_t n, cap;
};

/* test_gen_next - the next 64 random bits. */
uint64_t test_gen_next(struct test_gen *g);

/* test_gen_pick - a number below n (> 0). */
unsigned test_gen_pick(struct test_gen *g, unsigned n);

/* test_gen_put - append n bytes of s to the document. */
void test_gen_put(struct test_gen *g, const char *s, size_t n);

/* test_gen_puts - append the string s to the document. */
void test_gen_puts(struct test_gen *g, const char *s);

#endif
