/*
 * tokens.h - bearer tokens for the suites that run nodes with an auth file
 * (SPEC §10): the file, written as the node reads it (a hash and the
 * token's rights a line), and requests that carry a token.
 */
#ifndef MAYFLY_TEST_INTEGRATION_TOKENS_H
#define MAYFLY_TEST_INTEGRATION_TOKENS_H

#include <stddef.h>

#include "test/integration/node.h"

/*
 * itest_token_file - write dir/tokens with toks[i] = {token, rights} for
 * each i < n whose bit is set in mask (all: ~0u; i < 32), after a comment
 * line; its path into out.
 */
void itest_token_file(const char *dir, const char *const toks[][2], size_t n,
                      unsigned mask, char *out, size_t len);

/* itest_req_bearer - itest_req_with() with "Authorization: Bearer tok"
 * (tok NULL: no such header). */
long itest_req_bearer(const struct itest_node *n, const char *tok,
                      const char *method, const char *path, const char *body,
                      struct itest_resp *r);

#endif
