/*
 * dead.c - dead letters: this process's sink and its flush (dead.h).
 *
 * A dead letter is an envelope around the dropped message's payload; the
 * payload was validated JSON when pushed, so it goes in as it is, and names
 * (valid UTF-8 without control characters, SPEC §1) need only '"' and '\'
 * escaped.  The envelope is built in process memory after the locks are
 * released, and stored with shm_push like any push: the dead-letter queue
 * is bounded as any queue is, and a refused one is counted lost.
 *
 * Locking: none of its own (shm_push takes its locks).  One thread a
 * process.
 */
#include "shm/dead.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shm/catalog.h"
#include "shm/stats.h"

#define DEAD_SINK_MIN ((size_t)64 << 10)

static uint64_t dead_incarnation;
static struct shm_sink dead_sink;
static char *env_buf;
static size_t env_cap;

static void grow(size_t need);

/* shm_dead_init - see dead.h. */
void
shm_dead_init(uint64_t incarnation)
{
    dead_incarnation = incarnation;
}

/* shm_dead_sink - see dead.h. */
struct shm_sink *
shm_dead_sink(void)
{
    if (dead_sink.cap == 0)
        grow(DEAD_SINK_MIN);
    return &dead_sink;
}

/* grow - make the sink hold at least need bytes (kept as it was when
 * memory is short: the message waits as one that did not fit). */
static void
grow(size_t need)
{
    size_t cap = dead_sink.cap > 0 ? dead_sink.cap : DEAD_SINK_MIN;
    unsigned char *p;

    while (cap < need)
        cap *= 2;
    if (cap == dead_sink.cap || (p = realloc(dead_sink.buf, cap)) == NULL)
        return;
    dead_sink.buf = p;
    dead_sink.cap = cap;
}

/* put_esc - s[0..len) escaped for a JSON string at o; returns the end. */
static char *
put_esc(char *o, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '"' || s[i] == '\\')
            *o++ = '\\';
        *o++ = s[i];
    }
    return o;
}

/* put_name - s[0..len) as a JSON string at o; returns the end. */
static char *
put_name(char *o, const char *s, size_t len)
{
    *o++ = '"';
    o = put_esc(o, s, len);
    *o++ = '"';
    return o;
}

/* envelope - the dead letter of record r (dropped from queue) into
 * env_buf; its length, or 0 when memory is short. */
static size_t
envelope(struct shm_name queue, const struct shm_popped *r)
{
    const char *part = (const char *)(r + 1);
    const char *payload =
        part + r->part_len + (r->reply_len & SHM_DEAD_REPLY_LEN);
    size_t plen = r->len - (r->reply_len & SHM_DEAD_REPLY_LEN);
    /* Names at most double when escaped; the rest is under 200 bytes. */
    size_t need = 2 * queue.len + 4 * (size_t)r->part_len + plen + 256;
    char *o;

    if (need > env_cap) {
        char *p = realloc(env_buf, need);
        if (p == NULL)
            return 0;
        env_buf = p;
        env_cap = need;
    }
    o = env_buf;
    o += sprintf(o, "{\"queue\":");
    o = put_name(o, queue.ptr, queue.len);
    o += sprintf(o, ",\"partition\":");
    o = put_name(o, part, r->part_len);
    /* The id as the origin's pops gave it: e:<incarnation>:<part>:<seq>. */
    o += sprintf(o, ",\"id\":\"e:%016" PRIx64 ":", dead_incarnation);
    o = put_esc(o, part, r->part_len);
    o += sprintf(o,
                 ":%" PRIu64 "\",\"attempts\":%u,\"reason\":\"%s\","
                 "\"payload\":",
                 r->seq, r->attempts,
                 r->reply_len & SHM_DEAD_TTL ? "ttl" : "retry_limit");
    memcpy(o, payload, plen);
    o += plen;
    *o++ = '}';
    return (size_t)(o - env_buf);
}

/* shm_dead_flush - see dead.h. */
uint32_t
shm_dead_flush(struct shm_seg *seg, int w, struct shm_name queue, uint64_t now)
{
    char dl[SHM_NAME_MAX];
    size_t dlen = 0;
    uint32_t n = dead_sink.count;
    const struct shm_popped *r = NULL;

    if (n > 0 && seg->catalog != NULL)
        dlen = shm_catalog_dead_letter(seg->catalog, queue.ptr, queue.len, dl);
    while ((r = shm_popped_next(&dead_sink, r)) != NULL) {
        struct shm_name part = {(const char *)(r + 1), r->part_len};
        struct shm_msg_in m = {env_buf, 0};
        uint64_t seq;

        shm_count(seg, w,
                  r->reply_len & SHM_DEAD_TTL ? SHM_C_DEAD_TTL
                                              : SHM_C_DEAD_RETRY_LIMIT,
                  1);
        if (dlen == 0 || (m.len = (uint32_t)envelope(queue, r)) == 0) {
            shm_count(seg, w, SHM_C_DEAD_LOST, 1);
            continue;
        }
        m.payload = env_buf;
        if (shm_push(seg, w, (struct shm_name){dl, dlen}, part, &m, 1, now,
                     &seq) != 0)
            shm_count(seg, w, SHM_C_DEAD_LOST, 1);
    }
    dead_sink.used = 0;
    dead_sink.count = 0;
    if (dead_sink.need > dead_sink.cap || dead_sink.cap == 0)
        grow(dead_sink.need > DEAD_SINK_MIN ? dead_sink.need : DEAD_SINK_MIN);
    dead_sink.need = 0;
    return n;
}
