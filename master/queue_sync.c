/*
 * queue_sync.c - see queue_sync.h.
 */
#include "master/queue_sync.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "master/master.h"
#include "shm/log.h"
#include "shm/queue_admin.h"
#include "shm/stats.h"

/* One declare or delete owed to the segment. */
struct owed {
    struct owed *next;
    int del;
    struct shm_qopts opts; /* a declare's */
    size_t len;
    char name[];
};

static struct owed *head, **tail = &head;

/* attempt - carry o out; -ETIMEDOUT when a held lock kept it back (what it
 * did stays done: doing it again finishes it). */
static int
attempt(struct master *m, const struct owed *o)
{
    struct shm_name q = {o->name, o->len};
    int rc = o->del
                 ? shm_queue_delete(&m->seg, SHM_STATS_MASTER, q, shm_now_ms())
                 : shm_queue_declare(&m->seg, SHM_STATS_MASTER, q, &o->opts);

    if (rc == -ETIMEDOUT)
        return rc;
    if (rc < 0)
        log_warn(-rc, "cannot %s queue '%.*s' here",
                 o->del ? "delete" : "declare", (int)o->len, o->name);
    return 0;
}

/* owe - o now, or after the ones owed before it. */
static void
owe(struct master *m, int del, struct shm_name queue,
    const struct shm_qopts *opts)
{
    struct owed *o = malloc(sizeof(*o) + queue.len);

    if (o == NULL) {
        log_error(ENOMEM, "cannot %s queue '%.*s' here",
                  del ? "delete" : "declare", (int)queue.len, queue.ptr);
        return;
    }
    o->next = NULL;
    o->del = del;
    if (opts != NULL)
        o->opts = *opts;
    o->len = queue.len;
    memcpy(o->name, queue.ptr, queue.len);
    if (head == NULL && attempt(m, o) == 0) {
        free(o);
        return;
    }
    *tail = o;
    tail = &o->next;
}

void
master_queue_declare(struct master *m, struct shm_name queue,
                     const struct shm_qopts *opts)
{
    owe(m, 0, queue, opts);
}

void
master_queue_delete(struct master *m, struct shm_name queue)
{
    owe(m, 1, queue, NULL);
}

void
master_queue_sync_tick(struct master *m)
{
    while (head != NULL && attempt(m, head) == 0) {
        struct owed *o = head;
        head = o->next;
        if (head == NULL)
            tail = &head;
        free(o);
    }
}

void
master_queue_sync_stop(void)
{
    while (head != NULL) {
        struct owed *o = head;
        head = o->next;
        free(o);
    }
    tail = &head;
}
