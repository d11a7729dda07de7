/*
 * oracle.c - json-c as the oracle of the push scanner (oracle.h).
 */
#include "test/http/oracle.h"

#include <errno.h>
#include <regex.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "http/errors.h"
#include "http/json_scan.h"
#include "http/parse.h"

/* oracle_jc_parse - json-c strict with the scanner's depth; NULL if rejected.  A
 * NUL goes after the text so a top-level number can end. */
struct json_object *
oracle_jc_parse(const char *p, size_t n, int *ok)
{
    struct json_tokener *t = json_tokener_new_ex(HTTP_JSON_MAX_DEPTH);
    char *copy = malloc(n + 1);
    struct json_object *o;

    memcpy(copy, p, n);
    copy[n] = '\0';
    json_tokener_set_flags(t, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    o = json_tokener_parse_ex(t, copy, (int)n + 1);
    *ok = json_tokener_get_error(t) == json_tokener_success &&
          json_tokener_get_parse_end(t) >= n && memchr(p, '\0', n) == NULL;
    json_tokener_free(t);
    free(copy);
    if (!*ok) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

/* oracle_push_shape - the tree is a push body (json-c's view of parse.h). */
int
oracle_push_shape(struct json_object *o)
{
    struct json_object *q, *m, *v;
    size_t i, n;

    if (!json_object_is_type(o, json_type_object))
        return 0;
    if (!json_object_object_get_ex(o, "queue", &q) ||
        !json_object_is_type(q, json_type_string))
        return 0;
    if (json_object_object_get_ex(o, "partition", &v) && v != NULL &&
        !json_object_is_type(v, json_type_string))
        return 0;
    if (!json_object_object_get_ex(o, "messages", &m) ||
        !json_object_is_type(m, json_type_array))
        return 0;
    n = json_object_array_length(m);
    if (n > HTTP_BATCH_MAX)
        return 0;
    for (i = 0; i < n; i++) {
        v = json_object_array_get_idx(m, i);
        if (!json_object_is_type(v, json_type_object) ||
            !json_object_object_get_ex(v, "payload", NULL))
            return 0;
    }
    return 1;
}

/* oracle_utf8_ok_at - Unicode Table 3-7, written as the table. */
int
oracle_utf8_ok_at(const unsigned char *p, const unsigned char *end)
{
    static const struct {
        unsigned char lo0, hi0, lo1, hi1;
        int n;
    } rows[] = {
        {0xc2, 0xdf, 0x80, 0xbf, 2}, {0xe0, 0xe0, 0xa0, 0xbf, 3},
        {0xe1, 0xec, 0x80, 0xbf, 3}, {0xed, 0xed, 0x80, 0x9f, 3},
        {0xee, 0xef, 0x80, 0xbf, 3}, {0xf0, 0xf0, 0x90, 0xbf, 4},
        {0xf1, 0xf3, 0x80, 0xbf, 4}, {0xf4, 0xf4, 0x80, 0x8f, 4},
    };
    size_t r;
    int i;

    if (p[0] < 0x80)
        return 1;
    for (r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
        if (p[0] < rows[r].lo0 || p[0] > rows[r].hi0)
            continue;
        if (end - p < rows[r].n || p[1] < rows[r].lo1 || p[1] > rows[r].hi1)
            return 0;
        for (i = 2; i < rows[r].n; i++)
            if (p[i] < 0x80 || p[i] > 0xbf)
                return 0;
        return 1;
    }
    return 0;
}

/* rfc_number_bad_at - the number-ish token at p is not RFC 8259's. */
static int
rfc_number_bad_at(const char *p, const char *end)
{
    static regex_t re;
    static int ready;
    size_t n = 0;
    char *tok;
    int bad;

    if (!ready) {
        if (regcomp(&re, "^-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?$",
                    REG_EXTENDED | REG_NOSUB) != 0)
            abort();
        ready = 1;
    }
    if (end - p > 1 && p[0] == '-' && (p[1] == 'I' || p[1] == 'N'))
        return 1;
    /* the whole token, however long: its flaw may be past any fixed cut */
    while (p + n < end && strchr("-+.0123456789eE", p[n]) != NULL &&
           p[n] != '\0')
        n++;
    if ((tok = malloc(n + 1)) == NULL)
        abort();
    memcpy(tok, p, n);
    tok[n] = '\0';
    bad = regexec(&re, tok, 0, NULL, 0) != 0;
    free(tok);
    return bad;
}

/* why_is - why names reason, alone or followed by the field it was in
 * (" in field 'queue'": the parsers name it, SPEC §2). */
static int
why_is(const char *why, const char *reason)
{
    size_t n = strlen(reason);

    return strncmp(why, reason, n) == 0 &&
           (why[n] == '\0' || strncmp(why + n, " in field '", 11) == 0);
}

/* oracle_gap_confirmed - the scanner rejected at off for why, json-c accepted:
 * allowed only where json-c is laxer than the RFC, checked here on the
 * bytes themselves. */
int
oracle_gap_confirmed(const char *doc, size_t n, size_t off, const char *why)
{
    const char *p = doc + off, *end = doc + n;

    if (off >= n)
        return 0;
    if (why_is(why, "control character in string"))
        return (unsigned char)*p < 0x20;
    if (why_is(why, "invalid UTF-8"))
        return !oracle_utf8_ok_at((const unsigned char *)p,
                                  (const unsigned char *)end);
    if (why_is(why, "invalid number"))
        return rfc_number_bad_at(p, end);
    if (why_is(why, "expected a value"))
        return (end - p >= 3 && memcmp(p, "NaN", 3) == 0) ||
               (end - p >= 8 && memcmp(p, "Infinity", 8) == 0);
    return 0;
}

/* hex4_at - four hex digits at p, or -1. */
static long
hex4_at(const char *p)
{
    char tmp[5], *end;
    long v;

    memcpy(tmp, p, 4);
    tmp[4] = '\0';
    v = strtol(tmp, &end, 16);
    return end == tmp + 4 && tmp[0] != '-' && tmp[0] != '+' ? v : -1;
}

/*
 * oracle_pair_bug - json-c 0.16 turns a surrogate pair into U+FFFD when the code
 * point's low 16 bits fall in D800-DFFF (U+1D800..U+1DFFF, ...): 1 in 32
 * pairs.  The scanner decodes them right, so names holding one are left
 * out of the comparison with json-c's strings.
 */
int
oracle_pair_bug(const char *doc, size_t n)
{
    size_t i;

    for (i = 0; i + 12 <= n; i++) {
        long hi, lo, cp;

        if (doc[i] != '\\' || doc[i + 1] != 'u' || doc[i + 6] != '\\' ||
            doc[i + 7] != 'u')
            continue;
        hi = hex4_at(doc + i + 2);
        lo = hex4_at(doc + i + 8);
        if (hi < 0xd800 || hi > 0xdbff || lo < 0xdc00 || lo > 0xdfff)
            continue;
        cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
        if ((cp & 0xffff) >= 0xd800 && (cp & 0xffff) <= 0xdfff)
            return 1;
    }
    return 0;
}

/*
 * oracle_nul_key - json-c keeps object keys as C strings, so it reads the key
 * "queue\u0000x" as "queue"; the scanner compares whole keys.  Documents
 * where that json-c bug would name a push field are left out of the shape
 * comparison.
 */
int
oracle_nul_key(const char *doc, size_t n)
{
    static const char *const keys[] = {"\"queue\\u0000", "\"partition\\u0000",
                                       "\"messages\\u0000", "\"payload\\u0000"};
    size_t i;

    for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (memmem(doc, n, keys[i], strlen(keys[i])) != NULL)
            return 1;
    return 0;
}

/* test_same_text - see oracle.h. */
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

/* mismatch - say why in why[0..len) and return -1. */
static int mismatch(char *why, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
mismatch(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return -1;
}

/* oracle_check_valid - see oracle.h. */
int
oracle_check_valid(const char *doc, size_t n, struct oracle_tally *t, char *why,
                   size_t whylen)
{
    struct http_json j;
    int ok, jc, rc = 0;
    struct json_object *o = oracle_jc_parse(doc, n, &jc);

    http_json_init(&j, doc, n);
    ok = http_json_value(&j) == 0;
    if (ok) {
        http_json_ws(&j);
        if (j.p != j.end) {
            ok = 0;
            j.why = "trailing";
        }
    }
    if (ok && !jc) {
        rc = mismatch(why, whylen, "scanner accepts what json-c rejects: %.*s",
                      (int)n, doc);
    } else if (!ok && jc) {
        if (!oracle_gap_confirmed(doc, n, (size_t)(j.p - doc), j.why))
            rc = mismatch(why, whylen,
                          "scanner rejects (%s at %zu) what json-c accepts: "
                          "%.*s",
                          j.why, (size_t)(j.p - doc), (int)n, doc);
        t->gaps++;
    } else if (ok) {
        t->both_ok++;
    } else {
        t->both_bad++;
    }
    json_object_put(o);
    return rc;
}

/* same_name - a scanner name reads as json-c's string. */
static int
same_name(struct http_str s, struct json_object *v)
{
    return test_same_text(s.ptr, s.len, json_object_get_string(v),
                          (size_t)json_object_get_string_len(v));
}

/* push_accepted_agrees - names and payloads agree with json-c's tree. */
static int
push_accepted_agrees(const struct http_push *p, struct json_object *o,
                     const char *doc, size_t n, char *why, size_t whylen)
{
    struct json_object *v, *m;
    int ok, names = !oracle_pair_bug(doc, n);

    json_object_object_get_ex(o, "queue", &v);
    if (names && !same_name(p->queue, v))
        return mismatch(why, whylen, "queue differs from json-c's: %.*s",
                        (int)n, doc);
    if (json_object_object_get_ex(o, "partition", &v) && v != NULL) {
        if (!p->has_partition || (names && !same_name(p->partition, v)))
            return mismatch(why, whylen,
                            "partition differs from json-c's: %.*s", (int)n,
                            doc);
    } else if (p->has_partition) {
        return mismatch(why, whylen, "a partition json-c does not see: %.*s",
                        (int)n, doc);
    }
    json_object_object_get_ex(o, "messages", &m);
    if (p->n != json_object_array_length(m))
        return mismatch(why, whylen, "%u messages, json-c %zu: %.*s", p->n,
                        json_object_array_length(m), (int)n, doc);
    for (uint32_t i = 0; i < p->n; i++) {
        struct json_object *want, *got;
        const struct http_str *s = &p->payloads[i];

        json_object_object_get_ex(json_object_array_get_idx(m, i), "payload",
                                  &want);
        if (s->ptr < doc || s->ptr + s->len > doc + n)
            return mismatch(why, whylen, "payload %u outside the body", i);
        got = oracle_jc_parse(s->ptr, s->len, &ok);
        if (!ok || !json_object_equal(want, got)) {
            json_object_put(got);
            return mismatch(why, whylen, "payload %u (%.*s) differs: %.*s", i,
                            (int)s->len, s->ptr, (int)n, doc);
        }
        json_object_put(got);
    }
    return 0;
}

/* push_refusal_agrees - the push parser refused doc with err: a 400, and
 * if json-c reads a push there, only where json-c is laxer. */
static int
push_refusal_agrees(const struct http_error *err, int shape, const char *doc,
                    size_t n, char *why, size_t whylen)
{
    size_t off;
    char at[128];

    if (err->status != 400 || strcmp(err->code, "ephemeral_bad_request") != 0)
        return mismatch(why, whylen, "refused as %u %s: %.*s", err->status,
                        err->code, (int)n, doc);
    if (shape && (sscanf(err->msg, "malformed JSON at byte %zu: %127[^\n]",
                         &off, at) != 2 ||
                  !oracle_gap_confirmed(doc, n, off, at)))
        return mismatch(why, whylen, "push refused (%s), json-c accepts: %.*s",
                        err->msg, (int)n, doc);
    return 0;
}

/* oracle_check_push - see oracle.h. */
int
oracle_check_push(const char *doc, size_t n, struct oracle_tally *t, char *why,
                  size_t whylen)
{
    struct http_push p;
    struct http_error err;
    int jc, shape, rc;
    struct json_object *o;

    if (oracle_nul_key(doc, n)) {
        t->nul_keys++;
        return 0;
    }
    o = oracle_jc_parse(doc, n, &jc);
    shape = jc && oracle_push_shape(o);
    memset(&err, 0, sizeof(err));
    rc = http_parse_push(doc, n, &p, &err);
    if (rc == 0) {
        rc = shape ? push_accepted_agrees(&p, o, doc, n, why, whylen)
                   : mismatch(why, whylen,
                              "push accepted, json-c says no: "
                              "%.*s",
                              (int)n, doc);
        t->push_ok++;
    } else if (rc == -EINVAL) {
        rc = push_refusal_agrees(&err, shape, doc, n, why, whylen);
        t->push_bad++;
    } else {
        rc = mismatch(why, whylen, "push parse returned %d", rc);
    }
    http_push_free(&p);
    json_object_put(o);
    return rc;
}
