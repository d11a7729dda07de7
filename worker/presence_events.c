/*
 * presence_events.c - see presence_events.h.
 */
#include "worker/presence_events.h"

#include <errno.h>
#include <string.h>

#include "shm/tenants.h"
#include "worker/worker_int.h"

/* shown - the channel's client name in a presence name. */
static struct shm_name
shown(struct shm_name pres)
{
    const char *sep = memchr(pres.ptr, SHM_TENANT_SEP, pres.len);
    size_t at = sep != NULL ? (size_t)(sep - pres.ptr) + 1 : 0;

    if (at < pres.len && pres.ptr[at] == SHM_PRES_MARK)
        at++;
    return (struct shm_name){pres.ptr + at, pres.len - at};
}

/* worker_presence_event_json - see presence_events.h. */
void
worker_presence_event_json(struct http_buf *b, const struct shm_pres_event *ev)
{
    static const char *const said[] = {"none", "enter", "leave", "update"};
    struct shm_name c = shown(ev->channel);

    http_buf_append_str(b, "{\"channel\":");
    http_buf_append_json_str(b, c.ptr, c.len);
    http_buf_printf(b, ",\"action\":\"%s\",\"member\":", said[ev->action]);
    http_buf_append_json_str(b, ev->member.ptr, ev->member.len);
    http_buf_append_str(b, ",\"data\":");
    if (ev->data.len > 0)
        http_buf_append(b, ev->data.ptr, ev->data.len);
    else
        http_buf_append_str(b, "null");
    http_buf_append_str(b, "}");
}

/* worker_presence_publish - see presence_events.h. */
int
worker_presence_publish(struct shm_seg *seg, int slot,
                        const struct shm_pres_event *ev)
{
    struct http_buf b = {0};
    uint64_t seq;
    int rc = -ENOMEM;

    worker_presence_event_json(&b, ev);
    if (!b.oom) {
        struct shm_msg_in m = {b.data, (uint32_t)b.len};
        rc = shm_push(seg, slot, ev->channel, (struct shm_name){"Default", 7},
                      &m, 1, shm_now_ms(), &seq);
    }
    http_buf_free(&b);
    return rc;
}

/* worker_presence_event - see presence_events.h. */
void
worker_presence_event(void *arg, const struct shm_pres_event *ev)
{
    struct worker *w = arg;

    worker_presence_publish(w->seg, w->set.slot, ev);
}
