/*
 * tokens.c - auth files and bearer requests for the suites that need
 * them (see tokens.h).
 */
#include "test/integration/tokens.h"

#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "http/auth.h"

void
itest_token_file(const char *dir, const char *const toks[][2], size_t n,
                 unsigned mask, char *out, size_t len)
{
    char hash[AUTH_HASH_TEXT];
    FILE *f;

    snprintf(out, len, "%s/tokens", dir);
    f = fopen(out, "w");
    cr_assert_not_null(f, "%s", out);
    fprintf(f, "# the tokens of this test\n");
    for (size_t i = 0; i < n; i++) {
        if (i < 32 && !(mask & (1u << i)))
            continue;
        auth_hash_text(toks[i][0], strlen(toks[i][0]), hash);
        fprintf(f, "%s %s\n", hash, toks[i][1]);
    }
    cr_assert_eq(fclose(f), 0);
}

long
itest_req_bearer(const struct itest_node *n, const char *tok,
                 const char *method, const char *path, const char *body,
                 struct itest_resp *r)
{
    char h[4200];
    const char *hdrs[] = {h, NULL};

    snprintf(h, sizeof(h), "Authorization: Bearer %s", tok ? tok : "");
    return itest_req_with(n, method, path, body, tok ? hdrs : NULL, r);
}
