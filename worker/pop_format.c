/*
 * pop_format.c - see pop_format.h.
 *
 * Consecutive messages of one partition (the usual batch) share their
 * entry's head but for the id's digits: it is escaped once per run and
 * copied from the entry before; a sequence one past the previous one is
 * that id's digits plus one, counted in place (struct pop_run).
 *
 * Written as the pop takes (struct pop_fmt): the ring counts each message
 * against the room by a bound (every name byte escaped to six), and put
 * writes one take's entries (one partition's: one run) from the cells,
 * under the partition lock, so it allocates nothing: pop_fmt_begin
 * reserved the room before the round.
 */
#include "worker/pop_format.h"

#include <errno.h>
#include <string.h>

#include "http/buf.h"
#include "http/ids.h"
#include "worker/authz.h"

static const char id_key[] = "{\"id\":", part_key[] = ",\"partition\":\"",
                  payload_key[] = "\",\"payload\":",
                  attempts_key[] = ",\"attempts\":",
                  reply_key[] = ",\"replyTo\":\"";

#define HEAD_MAX(esc) (sizeof("{\"queue\":\"\",\"messages\":[") + (esc))

/*
 * A run of entries of one partition.  Their heads differ in the id's
 * digits alone: '{"id":"e:<inc>:<partition>:' <digits> '","partition":"
 * <partition>","payload":' (the partition escaped), so each is the one
 * before copied, with its digits counted up when its sequence is one more
 * (nearly always), else written between the copied prefix and suffix.
 */
struct pop_run {
    const char *head;  /* the last entry's (NULL: none yet) */
    size_t digits;     /* where its id's digits start in it */
    size_t digits_end; /* where they end: the suffix starts */
    size_t len;        /* its head's bytes */
    uint64_t seq;      /* its sequence */
    const char *part;  /* its partition's name (raw sinks compare it) */
    uint32_t part_len;
};

/* head - the answer's opening for queue at o; returns the end. */
static char *
head(char *o, struct shm_name shown)
{
    memcpy(o, "{\"queue\":\"", 10);
    o = http_put_json_esc(o + 10, shown.ptr, shown.len);
    memcpy(o, "\",\"messages\":[", 14);
    return o + 14;
}

/* head_new - the head of m's entry at o, the first of a run (m's
 * partition's name at part); returns the end. */
static char *
head_new(char *o, struct pop_run *run, const struct shm_popped *m,
         const char *part, uint64_t incarnation)
{
    char *e = o, *id, *d;
    size_t esc;

    memcpy(o, id_key, sizeof(id_key) - 1);
    id = o + sizeof(id_key) - 1;
    d = http_id_put_prefix(id, incarnation, part, m->part_len);
    esc = (size_t)(d - id) - HTTP_ID_PREFIX_LEN(0);
    o = http_id_put_seq(d, m->seq);
    run->digits = (size_t)(d - e);
    run->digits_end = (size_t)(o - 1 - e);
    memcpy(o, part_key, sizeof(part_key) - 1);
    o += sizeof(part_key) - 1;
    memcpy(o, id + HTTP_ID_PREFIX_HEAD, esc); /* as the id holds it */
    o += esc;
    memcpy(o, payload_key, sizeof(payload_key) - 1);
    o += sizeof(payload_key) - 1;
    run->part = part;
    run->part_len = m->part_len;
    return o;
}

/* head_next - the head of m's entry at o, of the run's partition, from
 * the head before; returns the end. */
static inline char *
head_next(char *o, struct pop_run *run, const struct shm_popped *m)
{
    const char *h = run->head;
    char *d, *first;
    size_t suffix;

    if (m->seq == run->seq + 1) {
        memcpy(o, h, run->len);
        first = o + run->digits;
        for (d = o + run->digits_end - 1; *d == '9' && d > first; d--)
            *d = '0';
        if (*d != '9') {
            (*d)++;
            return o + run->len;
        }
        /* all nines: one digit more */
    }
    memcpy(o, h, run->digits);
    d = http_put_u64(o + run->digits, m->seq);
    suffix = run->len - run->digits_end;
    memcpy(d, h + run->digits_end, suffix);
    run->digits_end = (size_t)(d - o);
    return d + suffix;
}

/*
 * entry - message m's entry at o (its partition's name at part, its data
 * at data), the run updated; returns the end.  compare 0: m is of the
 * run's partition if the run has one (the caller knows).
 */
static inline char *
entry(char *o, struct pop_run *run, const struct shm_popped *m,
      const char *part, const char *data, uint64_t incarnation, int compare)
{
    char *e = o;

    if (run->head == NULL ||
        (compare && (m->part_len != run->part_len ||
                     memcmp(part, run->part, run->part_len) != 0)))
        o = head_new(o, run, m, part, incarnation);
    else
        o = head_next(o, run, m);
    run->head = e;
    run->len = (size_t)(o - e);
    run->seq = m->seq;
    memcpy(o, data + m->reply_len, m->len - m->reply_len);
    o += m->len - m->reply_len;
    if (m->reply_len > 0) { /* as its requester's tenant knows it */
        struct shm_name to =
            worker_client_name((struct shm_name){data, m->reply_len});
        memcpy(o, reply_key, sizeof(reply_key) - 1);
        o = http_put_json_esc(o + sizeof(reply_key) - 1, to.ptr, to.len);
        *o++ = '"';
    }
    memcpy(o, attempts_key, sizeof(attempts_key) - 1);
    o += sizeof(attempts_key) - 1;
    if (m->attempts < 10) /* nearly always: a first delivery */
        *o++ = (char)('0' + m->attempts);
    else
        o = http_put_u64(o, m->attempts);
    *o++ = '}';
    return o;
}

/* room_left - the room for entries now: what the buffer has beyond the
 * tail, within f's limit. */
static size_t
room_left(const struct pop_fmt *f)
{
    size_t room = f->out.cap - f->out.len - 1 - f->tail;
    size_t below = f->limit > f->out.len ? f->limit - f->out.len : 0;

    return room < below ? room : below;
}

/* fmt_put - shm_sink_fmt.put: the entries of n records of one partition
 * (one run), each after a comma but for the answer's first; the room left
 * is then exact again. */
static void
fmt_put(struct shm_sink_fmt *h, const struct shm_sink *k,
        const struct shm_popped *r, uint32_t n)
{
    struct pop_fmt *f = (struct pop_fmt *)(void *)h;
    struct pop_run run = {0};
    char *o = http_buf_tail(&f->out);
    const size_t step = shm_popped_size(k, r); /* one partition's records */

    if (f->entries > 0)
        *o++ = ',';
    f->entries += n;
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0)
            *o++ = ',';
        o = entry(o, &run, r, (const char *)(r + 1), shm_popped_data(r),
                  f->incarnation, 0);
        r = (const void *)((const unsigned char *)r + step);
    }
    f->out.len = (size_t)(o - f->out.data);
    h->room = room_left(f);
}

/* pop_fmt_init - see pop_format.h. */
void
pop_fmt_init(struct pop_fmt *f, uint64_t incarnation, size_t limit)
{
    /* an entry beside its data and names, at most: its comma, keys,
     * quotes, the id's incarnation and sequence, and attempts */
    const size_t fixed = 1 + sizeof(id_key) + HTTP_ID_PREFIX_LEN(0) +
                         HTTP_ID_SEQ_MAX + sizeof(part_key) +
                         sizeof(payload_key) + sizeof(reply_key) + 1 +
                         sizeof(attempts_key) + HTTP_PUT_U64_MAX + 1;

    *f = (struct pop_fmt){.hook = {.fixed = fixed, .put = fmt_put},
                          .incarnation = incarnation,
                          .limit = limit};
}

/* pop_fmt_begin - see pop_format.h. */
int
pop_fmt_begin(struct pop_fmt *f, struct shm_name queue, size_t room,
              size_t tail)
{
    struct shm_name shown = {0};
    size_t at;

    f->hook.need = 0;
    if (f->out.len > 0) {
        at = 0;
    } else {
        shown = worker_client_name(queue);
        at = HEAD_MAX(http_json_esc_len(shown.ptr, shown.len));
    }
    if (http_buf_reserve(&f->out, at + room + tail) != 0) {
        /* not the buffer's sticky oom: what it holds is whole, and a
         * later round's failure answers it (200), not 500 */
        f->out.oom = 0;
        return -ENOMEM;
    }
    if (f->out.len == 0)
        http_buf_commit(&f->out, head(http_buf_tail(&f->out), shown));
    f->tail = tail;
    f->hook.room = room_left(f);
    if (f->hook.room < room) /* asked past the limit: one big message */
        f->hook.room = room;
    return 0;
}

/* pop_fmt_finish - see pop_format.h. */
void
pop_fmt_finish(struct pop_fmt *f, struct shm_name queue, struct http_buf *b)
{
    if (f->out.len == 0)
        (void)pop_fmt_begin(f, queue, 0, 2);
    http_buf_append(&f->out, "]}", 2);
    http_buf_free(b);
    *b = f->out;
    f->out = (struct http_buf){0};
    f->entries = 0;
}
