/*
 * oracle.h - json-c as the oracle of the push scanner (http/json_scan.c,
 * parse_push.c), and the independent checks of where the scanner may differ
 * from it: used by test/http/test_json_scan.c and the push fuzz target.
 * Plain C (no Criterion): a failed check is a return value.
 */
#ifndef MAYFLY_TEST_HTTP_ORACLE_H
#define MAYFLY_TEST_HTTP_ORACLE_H

#include <stddef.h>

struct json_object;

/* oracle_jc_parse - p[0..n) through json-c strict, UTF-8 checked, the
 * scanner's depth; the tree with *ok = 1, or NULL with *ok = 0. */
struct json_object *oracle_jc_parse(const char *p, size_t n, int *ok);

/* oracle_push_shape - the tree is a push body (json-c's view of parse.h). */
int oracle_push_shape(struct json_object *o);

/* oracle_utf8_ok_at - the UTF-8 sequence at p (before end) is well formed
 * by Unicode Table 3-7 (an ASCII byte is). */
int oracle_utf8_ok_at(const unsigned char *p, const unsigned char *end);

/*
 * oracle_gap_confirmed - the scanner rejected doc[0..n) at off for why and
 * json-c accepted it: 1 if that is where json-c is laxer than RFC 8259
 * (checked on the bytes themselves), else 0.
 */
int oracle_gap_confirmed(const char *doc, size_t n, size_t off,
                         const char *why);

/* oracle_pair_bug - doc holds a surrogate pair json-c 0.16 decodes wrong
 * (names holding one cannot be compared with json-c's). */
int oracle_pair_bug(const char *doc, size_t n);

/* oracle_nul_key - doc holds a push key with a \u0000 in it, which json-c
 * cuts there (such documents cannot be compared for shape). */
int oracle_nul_key(const char *doc, size_t n);

/*
 * test_same_text - whether the scanner's decoded string (ours) reads as
 * json-c's (theirs): equal, but for a lone surrogate, which the scanner
 * keeps in its three-byte form (ED A0..BF xx) and json-c turns into U+FFFD
 * (EF BF BD), three bytes as well.
 */
int test_same_text(const char *ours, size_t n, const char *theirs, size_t m);

/* What the checks below saw, for a test to judge its generator by. */
struct oracle_tally {
    unsigned docs, both_ok, both_bad, gaps, push_ok, push_bad, nul_keys;
};

/*
 * oracle_check_valid - the scanner (http_json_value() and only whitespace
 * after) accepts doc[0..n) exactly when json-c does, but where json-c is
 * laxer than the RFC.  0, or -1 with the difference in why[0..whylen).
 */
int oracle_check_valid(const char *doc, size_t n, struct oracle_tally *t,
                       char *why, size_t whylen);

/*
 * oracle_check_push - http_parse_push() accepts doc[0..n) exactly when
 * json-c reads a push body there (but where json-c is laxer); what it
 * accepts reads as json-c reads it: the same names, as many payloads, each
 * span inside the body and re-parsing to json-c's value.  Documents with a
 * NUL in a push key are only counted.  0, or -1 with why filled.
 */
int oracle_check_push(const char *doc, size_t n, struct oracle_tally *t,
                      char *why, size_t whylen);

#endif
