/*
 * jwt.h - signed tokens (SPEC §11): a page's short-lived token, minted by
 * the application's backend with the secret of jwt_secret_file, verified
 * here with libjwt (never by hand).
 *
 * HS256 only; "exp" is required.  The claims map onto a struct auth_token
 * as an auth_file line would give it: "tenant" (as tenant=), "sub" (the
 * member id presence uses), and the permissions "push", "pop", "request",
 * "subscribe", "presence", "read" and "admin", each an array of the globs
 * auth_allows() matches.  An absent permission, or an empty array, is not
 * granted.  No state; no locking.
 */
#ifndef MAYFLY_HTTP_JWT_H
#define MAYFLY_HTTP_JWT_H

#include <stddef.h>
#include <stdint.h>

struct auth_token;

/* RFC 7518 §3.2: an HS256 key has at least the hash's 256 bits. */
#define HTTP_JWT_KEY_MIN 32
#define HTTP_JWT_KEY_MAX 1024

/* The secret, by value: it travels to the workers in their settings. */
struct http_jwt_key {
    size_t len; /* 0: none loaded */
    unsigned char bytes[HTTP_JWT_KEY_MAX];
};

/*
 * http_jwt_key_load - the secret in the file at path into k: its bytes,
 * trailing white space (a newline) dropped.  0, or -1 with a sentence
 * naming jwt_secret_file and path in err when the file cannot be read,
 * holds nothing, or holds fewer than HTTP_JWT_KEY_MIN or more than
 * HTTP_JWT_KEY_MAX bytes; k is then untouched.
 */
int http_jwt_key_load(const char *path, struct http_jwt_key *k, char *err,
                      size_t errlen);

/* http_jwt_shaped - 1 if tok[0..len) has a JWT's form: three parts of
 * base64url characters joined by '.', the first two not empty. */
int http_jwt_shaped(const char *tok, size_t len);

/*
 * http_jwt_verify - verify tok[0..len) with k at now (seconds since the
 * epoch) and fill out (empty on entry; the caller frees it with
 * auth_token_clear()).  0; -EKEYEXPIRED when exp has passed (or nbf has
 * not come); -EPERM when it is not an HS256 token signed with k, or its
 * claims are missing or of the wrong type; -ENOMEM.  On failure out is
 * empty and why holds a sentence for the 401 (never the token).
 */
int http_jwt_verify(const struct http_jwt_key *k, const char *tok, size_t len,
                    int64_t now, struct auth_token *out, char *why,
                    size_t whylen);

#endif
