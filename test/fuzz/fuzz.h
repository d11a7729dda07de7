/*
 * fuzz.h - what every libFuzzer target of test/fuzz/ shares: the entry
 * points' prototypes and the check that turns a broken property into a
 * crash (libFuzzer keeps the input; the replay names the file).
 *
 * A target is test/fuzz/fuzz_<name>.c defining LLVMFuzzerTestOneInput (and
 * LLVMFuzzerInitialize when it needs set-up); its seeds and regressions are
 * test/fuzz/<name>/.  fuzz.mk builds it with clang for libFuzzer and, with
 * the two entry points renamed, into the replay test make test runs.
 */
#ifndef MAYFLY_TEST_FUZZ_FUZZ_H
#define MAYFLY_TEST_FUZZ_FUZZ_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/errors.h"
#include "test/http/oracle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* FUZZ_CHECK - abort with the sentence when cond is false. */
#define FUZZ_CHECK(cond, ...)                                                  \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz check failed: %s: ", #cond);                 \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* fuzz_cstr - data[0..size) as a NUL-terminated copy (free it), for the
 * decoders that read C strings (headers, lines). */
static inline char *
fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);

    FUZZ_CHECK(s != NULL, "out of memory");
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* fuzz_utf8 - p[0..n) is well-formed UTF-8 (Unicode Table 3-7). */
static inline int
fuzz_utf8(const char *p, size_t n)
{
    const unsigned char *u = (const unsigned char *)p, *end = u + n;

    while (u < end) {
        if (!oracle_utf8_ok_at(u, end))
            return 0;
        u += *u < 0x80 ? 1 : *u < 0xe0 ? 2 : *u < 0xf0 ? 3 : 4;
    }
    return 1;
}

/* fuzz_check_refusal - a parser's refusal (rc) is one a client can read:
 * 400 with a code and a sentence, or 500 out of memory, in valid UTF-8 (it
 * goes out in a JSON string). */
static inline void
fuzz_check_refusal(int rc, const struct http_error *err)
{
    FUZZ_CHECK(rc == -EINVAL || rc == -ENOMEM, "rc %d", rc);
    FUZZ_CHECK(err->status == (rc == -EINVAL ? 400u : 500u), "status %u",
               err->status);
    FUZZ_CHECK(err->code != NULL && err->msg[0] != '\0', "code or sentence");
    FUZZ_CHECK(fuzz_utf8(err->msg, strlen(err->msg)), "sentence not UTF-8: %s",
               err->msg);
}

#endif
