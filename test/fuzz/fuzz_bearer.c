/*
 * fuzz_bearer.c - the Authorization header (http/auth.c), as a worker reads
 * it: auth_bearer() finds the token exactly where the header's form says
 * ("Bearer" in any case, a space, the token without the spaces around it,
 * worked out here byte by byte), inside the value; auth_find() then knows
 * it exactly when it is the one token of the table.
 */
#include <ctype.h>

#include "http/auth.h"
#include "test/fuzz/fuzz.h"

#define KNOWN "fuzz-bearer-token"

static struct auth_token token;
static struct auth_table table = {&token, 1};

/* table_init - the table holds KNOWN, by its hash as an auth file has it. */
static void
table_init(void)
{
    char text[AUTH_HASH_TEXT];

    if (token.line == 1)
        return;
    auth_hash_text(KNOWN, strlen(KNOWN), text);
    FUZZ_CHECK(strncmp(text, "sha256:", 7) == 0, "%s", text);
    for (size_t i = 0; i < AUTH_HASH_SIZE; i++) {
        unsigned byte;
        FUZZ_CHECK(sscanf(text + 7 + 2 * i, "%2x", &byte) == 1, "%s", text);
        token.hash[i] = (uint8_t)byte;
    }
    token.line = 1;
}

/* expected - where the token of value is by the header's form: 0 with
 * *start and *len, or -1 for none. */
static int
expected(const char *value, size_t *start, size_t *len)
{
    static const char scheme[] = "bearer";
    size_t n = strlen(value), i, end;

    if (n < 7 || value[6] != ' ')
        return -1;
    for (i = 0; i < 6; i++)
        if (tolower((unsigned char)value[i]) != scheme[i])
            return -1;
    for (i = 7; i < n && value[i] == ' ';)
        i++;
    for (end = n; end > i && value[end - 1] == ' ';)
        end--;
    if (end == i)
        return -1;
    *start = i;
    *len = end - i;
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *value = fuzz_cstr(data, size); /* a header value is a C string */
    const char *tok = NULL;
    size_t len = 0, want_at = 0, want_len = 0;
    int rc, want;

    table_init();
    rc = auth_bearer(value, &tok, &len);
    want = expected(value, &want_at, &want_len);
    FUZZ_CHECK(rc == want, "auth_bearer %d, the form says %d: '%s'", rc, want,
               value);
    if (rc == 0) {
        FUZZ_CHECK(tok == value + want_at && len == want_len,
                   "token at %td (%zu bytes), the form says %zu (%zu): '%s'",
                   tok - value, len, want_at, want_len, value);
        int known = len == strlen(KNOWN) && memcmp(tok, KNOWN, len) == 0;
        FUZZ_CHECK((auth_find(&table, tok, len) != NULL) == known,
                   "auth_find says %s known: '%.*s'", known ? "not" : "",
                   (int)len, tok);
    }
    FUZZ_CHECK(auth_bearer(NULL, &tok, &len) == -1, "NULL has a token");
    free(value);
    return 0;
}
