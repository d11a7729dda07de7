/*
 * fuzz_rpc.c - the request verb's body (http/parse_rpc.c) against json-c:
 * what the parser accepts json-c reads as such a body, with the same
 * queue, partition, replyTo and timeout and a payload span inside the body
 * that re-parses to json-c's payload; what json-c reads as one the parser
 * accepts, but where json-c is laxer than RFC 8259 (test/http/oracle.h).
 * A refusal is a readable 400; the strings end inside the parser's memory.
 */
#include <json-c/json.h>

#include "http/json_scan.h"
#include "http/parse_rpc.h"
#include "test/fuzz/fuzz.h"

/* The keys the parser reads. */
static const char *const known[] = {"queue", "partition", "replyTo", "timeout",
                                    "payload"};
#define NKNOWN (sizeof(known) / sizeof(known[0]))

/*
 * unsure - 1 when json-c and the parser may read doc differently for want
 * of a rule, not of a bug: a key the parser reads given twice (json-c keeps
 * the last, the parser refuses a wrong first), or a key holding \u0000
 * (json-c cuts a key there).  Keys are found with the scanner; a document
 * it cannot walk is refused anyway.
 */
static int
unsure(const char *doc, size_t n)
{
    unsigned seen[NKNOWN] = {0};
    struct http_json j;
    char *key;
    size_t klen;
    int more, twice = 0;

    if (memmem(doc, n, "\\u0000", 6) != NULL)
        return 1;
    if ((key = malloc(n + 1)) == NULL)
        return 1;
    http_json_init(&j, doc, n);
    more = http_json_peek(&j) == '{' ? http_json_enter(&j) : 0;
    while (more > 0 && http_json_key(&j, key, &klen) == 0 &&
           http_json_value(&j) == 0) {
        for (size_t k = 0; k < NKNOWN; k++)
            if (http_json_key_is(key, klen, known[k]) && seen[k]++ > 0)
                twice = 1;
        more = http_json_next(&j, '}');
    }
    free(key);
    return twice;
}

/* string_or_null - absent, null or a string. */
static int
string_or_null(struct json_object *o, const char *key)
{
    struct json_object *v;

    return !json_object_object_get_ex(o, key, &v) || v == NULL ||
           json_object_is_type(v, json_type_string);
}

/* ms_shape - a count of ms as the parser reads one: 1, 0 refused, -1
 * cannot tell (0 may be written -0, which the parser refuses; one past
 * INT64_MAX is json-c's uint64, near the parser's bound). */
static int
ms_shape(struct json_object *v)
{
    int64_t t;

    if (!json_object_is_type(v, json_type_int))
        return 0;
    t = json_object_get_int64(v);
    return t < 0 ? 0 : t == 0 || t == INT64_MAX ? -1 : 1;
}

/* gather_shape - the body's gather (absent or null: fine) as the parser
 * takes it: {"max": 1..10000, "quietMs"?: ms}, no other member. */
static int
gather_shape(struct json_object *o)
{
    struct json_object *g, *v;
    int64_t max;

    if (!json_object_object_get_ex(o, "gather", &g) || g == NULL)
        return 1;
    if (!json_object_is_type(g, json_type_object))
        return 0;
    json_object_object_foreach(g, key, val)
    {
        (void)val;
        if (strcmp(key, "max") != 0 && strcmp(key, "quietMs") != 0)
            return 0;
    }
    if (!json_object_object_get_ex(g, "max", &v) || v == NULL ||
        !json_object_is_type(v, json_type_int))
        return 0;
    max = json_object_get_int64(v);
    if (max < 1 || max > 10000)
        return 0;
    if (!json_object_object_get_ex(g, "quietMs", &v) || v == NULL)
        return 1;
    return ms_shape(v);
}

/* rpc_shape - json-c's tree is a request body: 1 yes, 0 no, -1 cannot
 * tell (ms_shape). */
static int
rpc_shape(struct json_object *o)
{
    struct json_object *v;
    int timeout = 1, gather;

    if (!json_object_is_type(o, json_type_object) ||
        !json_object_object_get_ex(o, "queue", &v) ||
        !json_object_is_type(v, json_type_string) ||
        !json_object_object_get_ex(o, "payload", NULL) ||
        !string_or_null(o, "partition") || !string_or_null(o, "replyTo"))
        return 0;
    if (json_object_object_get_ex(o, "timeout", &v) && v != NULL)
        timeout = ms_shape(v);
    gather = gather_shape(o);
    if (timeout == 0 || gather == 0)
        return 0;
    return timeout < 0 || gather < 0 ? -1 : 1;
}

/* check_inside - s ends with a NUL inside the parser's memory (len + 8). */
static void
check_inside(const struct http_rpc *r, size_t size, struct http_str s,
             const char *what)
{
    FUZZ_CHECK(s.ptr >= r->mem && s.ptr + s.len < r->mem + size + 8 &&
                   s.ptr[s.len] == '\0',
               "%s outside the parser's memory", what);
}

/* check_same_string - ours (present or not) reads as json-c's key. */
static void
check_same_string(struct json_object *o, const char *key, int has,
                  struct http_str s, int names)
{
    struct json_object *v = NULL;
    int theirs = json_object_object_get_ex(o, key, &v) && v != NULL;

    FUZZ_CHECK(has == theirs, "%s: %d, json-c %d", key, has, theirs);
    if (has && names)
        FUZZ_CHECK(test_same_text(s.ptr, s.len, json_object_get_string(v),
                                  (size_t)json_object_get_string_len(v)),
                   "%s differs from json-c's", key);
}

/* check_accepted - what the parser took agrees with json-c's tree. */
static void
check_accepted(const struct http_rpc *r, struct json_object *o, const char *doc,
               size_t size)
{
    struct json_object *v = NULL, *got;
    int names = !oracle_pair_bug(doc, size), ok;

    check_same_string(o, "queue", 1, r->queue, names);
    check_same_string(o, "partition", r->has_partition, r->partition, names);
    check_same_string(o, "replyTo", r->has_reply_to, r->reply_to, names);
    if (r->has_timeout) {
        FUZZ_CHECK(json_object_object_get_ex(o, "timeout", &v) &&
                       json_object_is_type(v, json_type_int) &&
                       json_object_get_uint64(v) == r->timeout_ms,
                   "timeout %llu, json-c %s", (unsigned long long)r->timeout_ms,
                   json_object_to_json_string(v));
    } else {
        FUZZ_CHECK(!json_object_object_get_ex(o, "timeout", &v) || v == NULL,
                   "a timeout json-c sees, the parser not");
    }
    json_object_object_get_ex(o, "payload", &v);
    got = oracle_jc_parse(r->payload.ptr, r->payload.len, &ok);
    FUZZ_CHECK(ok && json_object_equal(v, got), "payload %.*s differs",
               (int)r->payload.len, r->payload.ptr);
    json_object_put(got);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *doc = (const char *)data;
    struct http_error err = {0};
    struct http_rpc r;
    struct json_object *o;
    int jc, shape, rc;
    size_t off;
    char at[128];

    o = oracle_jc_parse(doc, size, &jc);
    shape = !jc ? 0 : unsure(doc, size) ? -1 : rpc_shape(o);
    rc = http_parse_rpc(doc, size, &r, &err);
    if (rc != 0) {
        fuzz_check_refusal(rc, &err);
        FUZZ_CHECK(shape != 1 || rc != -EINVAL ||
                       (sscanf(err.msg, "malformed JSON at byte %zu: %127[^\n]",
                               &off, at) == 2 &&
                        oracle_gap_confirmed(doc, size, off, at)),
                   "refused (%s), json-c reads a request body", err.msg);
        json_object_put(o);
        return 0;
    }
    FUZZ_CHECK(jc, "accepted what json-c rejects");
    FUZZ_CHECK(shape != 0, "accepted what json-c reads as no request body");
    check_inside(&r, size, r.queue, "queue");
    if (r.has_partition)
        check_inside(&r, size, r.partition, "partition");
    if (r.has_reply_to)
        check_inside(&r, size, r.reply_to, "replyTo");
    FUZZ_CHECK(r.payload.ptr >= doc && r.payload.len > 0 &&
                   r.payload.ptr + r.payload.len <= doc + size &&
                   http_json_valid(r.payload.ptr, r.payload.len),
               "payload span");
    if (shape == 1)
        check_accepted(&r, o, doc, size);
    http_rpc_free(&r);
    json_object_put(o);
    return 0;
}
