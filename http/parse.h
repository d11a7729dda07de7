/*
 * parse.h - request bodies into C structs (http/ never hands json-c objects
 * to the worker).  Implemented by parse_push.c, parse_ack.c, parse_pop.c,
 * parse_extend.c, parse_reset.c and parse_configure.c.
 *
 * Push and ack bodies (one per drained batch) go through the strict scanner
 * of http/json_scan.h, without a tree; the small control bodies (extend,
 * reset, configure) through json-c with JSON_TOKENER_STRICT.  Strings are
 * unescaped into memory the struct owns (free it with the matching _free after
 * a parse that succeeded; a failed parse holds nothing); payload spans point
 * into the body, which must outlive the struct.  Names are not validated here: the caller runs http_name_valid()
 * and answers 400 invalid_name naming the field.
 *
 * Each parser returns 0, -EINVAL with err filled (400, a code and a sentence
 * naming the field: "field 'messages[3].payload' is required"), or -ENOMEM
 * with err filled (500 internal).  An optional field given as null counts as
 * absent.  No locking.
 */
#ifndef MAYFLY_HTTP_PARSE_H
#define MAYFLY_HTTP_PARSE_H

#include <stddef.h>
#include <stdint.h>

struct http_buf;
struct http_error;

/* Most entries one push, ack or extend may carry (SPEC §2). */
#define HTTP_BATCH_MAX 10000

/* The longest lease a queue may declare (leaseSeconds) or an extend ask. */
#define HTTP_LEASE_MAX_S 86400

/* A byte string: unescaped text, or a span of JSON text in the body. */
struct http_str {
    const char *ptr;
    size_t len;
};

/* ---- push (json_scan) ----------------------------------------------- */

/* The longest dedupe key (SPEC §13), and the largest delayMs and
 * ttlSeconds a message may say before a ceiling (the node's, the queue's)
 * is applied. */
#define HTTP_KEY_MAX       256
#define HTTP_MSG_DELAY_MAX UINT32_MAX
#define HTTP_MSG_TTL_MAX   UINT32_MAX

/* What a message may carry besides its payload (SPEC §13). */
struct http_push_extra {
    struct http_str key; /* has_key: 1..HTTP_KEY_MAX bytes, unescaped */
    int has_key;
    uint32_t delay_ms; /* 0: none */
    uint32_t ttl_s;    /* has_ttl: its own ttlSeconds */
    int has_ttl;
};

struct http_push {
    struct http_str queue;     /* required */
    struct http_str partition; /* has_partition 0: absent (Default) */
    int has_partition;
    uint32_t n;                /* 0 .. HTTP_BATCH_MAX */
    struct http_str *payloads; /* owned: n spans of JSON text in the body */
    struct http_push_extra *extras; /* owned: n entries, or NULL when no
                                       message carries any */
    char *mem;                      /* owned: unescaped names and keys */
};

/*
 * http_parse_push - {"queue", "partition"?, "messages": [{"payload": any,
 * "key"?, "delayMs"?, "ttlSeconds"?}, ...]}.  Unknown top-level keys and
 * extra keys in messages are validated as JSON and ignored; a repeated key
 * keeps its last value, as json-c does.  The whole body is validated
 * before a shape error is reported.
 */
int http_parse_push(const char *body, size_t len, struct http_push *out,
                    struct http_error *err);
void http_push_free(struct http_push *p);

/* ---- ack (json_scan) ------------------------------------------------ */

enum http_ack_status {
    HTTP_ACK_COMPLETED, /* absent, completed, success, acked, ok */
    HTTP_ACK_RETRY,     /* retry */
    HTTP_ACK_FAILED,    /* any other string */
};

struct http_ack_entry {
    struct http_str id;
    enum http_ack_status status;
    int has_attempts; /* 0: bare id, acts on the current delivery */
    uint32_t attempts;
    struct http_str reply; /* has_reply: JSON text in the body (SPEC §9) */
    int has_reply;
    int has_delay; /* retry: "delayMs" (SPEC §13); else the queue's */
    uint32_t delay_ms;
    int upto; /* "upTo": true: every lease of the partition up to id's
                 (SPEC §14) */
};

struct http_ack {
    struct http_str queue;
    struct http_str group; /* has_group 0: queue mode */
    int has_group;
    uint32_t n;
    struct http_ack_entry *entries;
    char *mem; /* owned */
};

/*
 * http_parse_ack - {"queue", "group"?, "acks": [...]} ("messages" is taken
 * when "acks" is absent).  An entry is a bare id string or an object with
 * "id", "status"?, "attempts"? and anything else (a popped message sent back
 * as it is).
 */
int http_parse_ack(const char *body, size_t len, struct http_ack *out,
                   struct http_error *err);
void http_ack_free(struct http_ack *a);

/*
 * http_parse_pop_acks - the queue, group and acks of a POST pop's body
 * (SPEC §14), as http_parse_ack reads them, except that "acks" may be
 * absent (n 0) and "messages" never stands for it.
 */
int http_parse_pop_acks(const char *body, size_t len, struct http_ack *out,
                        struct http_error *err);

/* ---- pop (json_scan) ------------------------------------------------ */

enum http_pop_from { HTTP_POP_FROM_ALL, HTTP_POP_FROM_NEW, HTTP_POP_FROM_LAST };

struct http_pop {
    struct http_ack ack;       /* queue, group, and the acks to apply first */
    struct http_str partition; /* has_partition 0: any */
    int has_partition;
    uint32_t batch;   /* 1 .. HTTP_BATCH_MAX (clamped; default 1) */
    int wait;         /* default false */
    uint32_t timeout; /* ms, clamped to max_wait_ms (default 30000) */
    int auto_ack;     /* autoAck or commitOnDelivery */
    enum http_pop_from from;
    char *mem; /* owned: the partition, scratch */
};

/*
 * http_parse_pop - POST /api/v1/ephemeral/pop's body (SPEC §14):
 * {"queue", "partition"?, "group"?, "batch"?, "wait"?, "timeout"?,
 * "autoAck"?, "from"?, "acks"?}; numbers clamp as the GET query's do
 * (timeout to max_wait_ms).
 */
int http_parse_pop(const char *body, size_t len, uint32_t max_wait_ms,
                   struct http_pop *out, struct http_error *err);
void http_pop_free(struct http_pop *p);

/* ---- extend (json-c) ------------------------------------------------ */

struct http_extend_entry {
    struct http_str id;
    int has_attempts;
    uint32_t attempts;
    uint32_t seconds;
};

struct http_extend {
    struct http_str queue;
    struct http_str group;
    int has_group;
    uint32_t n;
    struct http_extend_entry *entries;
    char *mem; /* owned */
};

/* http_parse_extend - {"queue", "group"?, "messages": [{"id", "attempts"?,
 * "seconds"}, ...]}. */
int http_parse_extend(const char *body, size_t len, struct http_extend *out,
                      struct http_error *err);
void http_extend_free(struct http_extend *e);

/* ---- reset (json-c) ------------------------------------------------- */

struct http_reset {
    struct http_str queue;
    char *mem; /* owned */
};

/* http_parse_reset - {"queue"}. */
int http_parse_reset(const char *body, size_t len, struct http_reset *out,
                     struct http_error *err);
void http_reset_free(struct http_reset *r);

/* ---- redrive (json-c; SPEC §13) -------------------------------------- */

struct http_redrive {
    struct http_str queue; /* the dead-letter queue */
    uint64_t max;          /* "max"; 0 when absent (every one) */
    char *mem;             /* owned */
};

/* http_parse_redrive - {"queue", "max"?}: max a positive integer, or 400
 * naming it. */
int http_parse_redrive(const char *body, size_t len, struct http_redrive *out,
                       struct http_error *err);
void http_redrive_free(struct http_redrive *r);

/* A dead letter's envelope {"queue", "partition", "payload", ...}, each
 * malloc'd (NUL-terminated); payload is JSON text. */
struct http_dead_letter {
    char *queue, *partition, *payload;
    size_t queue_len, partition_len, payload_len;
};

/* http_dead_letter_parse - an envelope out of a dead-letter queue's
 * message: 0, or -EINVAL (not one: a field missing or of another type),
 * -ENOMEM.  Free with http_dead_letter_free whatever it returned. */
int http_dead_letter_parse(const char *msg, size_t len,
                           struct http_dead_letter *out);
void http_dead_letter_free(struct http_dead_letter *d);

/* ---- configure (json-c) --------------------------------------------- */

/* Presence bits of struct http_configure.present. */
#define HTTP_OPT_MAX_LENGTH    (1u << 0)
#define HTTP_OPT_MAX_BYTES     (1u << 1)
#define HTTP_OPT_POLICY        (1u << 2)
#define HTTP_OPT_WINDOW_BUFFER (1u << 3)
#define HTTP_OPT_TTL_SECONDS   (1u << 4)
#define HTTP_OPT_LEASE_SECONDS (1u << 5)
#define HTTP_OPT_RETRY_LIMIT   (1u << 6)
#define HTTP_OPT_DEAD_LETTER   (1u << 7)
#define HTTP_OPT_DL_EXPIRED    (1u << 8)
#define HTTP_OPT_DEDUPE_S      (1u << 9)
#define HTTP_OPT_RETRY_DELAY   (1u << 10)
#define HTTP_OPT_CONFLATE      (1u << 11)

/* Ceilings of the SPEC §13 options: dedupeSeconds, retryDelayMs (and a
 * retry ack's delayMs). */
#define HTTP_DEDUPE_MAX_S    3600
#define HTTP_RETRY_DELAY_MAX 3600000

enum http_policy { HTTP_POLICY_REJECT, HTTP_POLICY_DROP_OLDEST };

struct http_configure {
    struct http_str queue;
    unsigned present; /* HTTP_OPT_* given in "options" */
    uint64_t max_length;
    uint64_t max_bytes;
    enum http_policy policy;
    uint64_t window_ms;    /* windowBuffer.ms (0 if not given) */
    uint64_t window_count; /* windowBuffer.count (0 if not given) */
    uint64_t ttl_seconds;
    uint64_t lease_seconds;
    uint64_t retry_limit;
    uint64_t dedupe_s;           /* dedupeSeconds */
    uint64_t retry_delay_ms;     /* retryDelayMs */
    struct http_str dead_letter; /* deadLetter, unescaped (in dl_mem) */
    int dl_expired;              /* deadLetterExpired */
    int conflate;                /* conflate */
    char *mem;                   /* owned */
    char *dl_mem;                /* owned */
};

/*
 * http_parse_configure - {"queue", "options": {...}} with the closed option
 * list of SPEC §4; without "options", 400 naming it.  An unknown option is 400 unknown_option naming it
 * ("windowBuffer.size" inside windowBuffer); a wrong type or a negative
 * number is 400 invalid_option naming it.  Ceilings are the caller's.
 */
int http_parse_configure(const char *body, size_t len,
                         struct http_configure *out, struct http_error *err);
void http_configure_free(struct http_configure *c);

/* http_configure_renamed - the configure body again with its "queue" set
 * to name[0..len) (json-c writes it: one "queue" member, whatever the
 * client sent), appended to out: what a worker passes on to its master
 * once the tenant is known.  0, or -ENOMEM (also for a body that does not
 * parse: the caller parsed it already). */
int http_configure_renamed(const char *body, size_t blen, const char *name,
                           size_t len, struct http_buf *out);

#endif
