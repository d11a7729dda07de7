/*
 * pop_format.h - the JSON a pop answers with (pop_format.c):
 * {"queue", "messages": [{"id", "partition", "payload", "replyTo"?,
 * "attempts"}]}, names as the client knows them, written while the pop
 * takes (struct pop_fmt: the sink's fmt, broker.h), each payload copied
 * once, from its cells into the answer.  (The raw kinds, whose records
 * carry their data, answer their own way: pop_inbox.c.)
 */
#ifndef MAYFLY_WORKER_POP_FORMAT_H
#define MAYFLY_WORKER_POP_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "http/buf.h"
#include "shm/broker.h"

/*
 * struct pop_fmt - an answer written as the pop takes: set a sink's fmt to
 * &f->hook, and call pop_fmt_begin before each shm_pop into it.  Its
 * fields are its own (process memory; the hook's put writes out under the
 * partition lock).
 */
struct pop_fmt {
    struct shm_sink_fmt hook; /* first: put finds f by it; hook.need: the
                                 bound of a message room refused, else 0 */
    struct http_buf out;      /* the head, then the entries so far */
    uint64_t incarnation;
    size_t tail;      /* room kept after the entries (pop_fmt_begin) */
    size_t limit;     /* the answer's bytes the room stops at, but for
                         what pop_fmt_begin was asked for */
    uint32_t entries; /* written, every round */
};

/* pop_fmt_init - f empty, for ids of incarnation, its answer bounded to
 * limit bytes (pop_fmt_begin may be asked past it for one message). */
void pop_fmt_init(struct pop_fmt *f, uint64_t incarnation, size_t limit);

/*
 * pop_fmt_begin - before a round: the head written (queue's name as the
 * client knows it) if it is not yet, at least room bytes free for entries
 * beyond tail, which stays free after them (the answer's closing, and what
 * is spliced in after it); the round may take past room up to f's limit.
 * 0 or -ENOMEM: then f is as it was (what it holds is still answered).
 */
int pop_fmt_begin(struct pop_fmt *f, struct shm_name queue, size_t room,
                  size_t tail);

/* pop_fmt_finish - the answer, closed, moved into b (empty); f's buffer is
 * empty after.  Without memory b is left short (http_reply answers 500). */
void pop_fmt_finish(struct pop_fmt *f, struct shm_name queue,
                    struct http_buf *b);

#endif
