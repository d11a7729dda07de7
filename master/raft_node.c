/*
 * raft_node.c - drive the raft core from the master's loop and apply what
 * commits to the declared queues.
 *
 * The core's nodes are the members, numbered alike on every node
 * (membership.c).  Each committed declare/delete updates the declared set,
 * which is then published whole into the catalog (workers look options up
 * there when a queue is created) and pushed into the queues this node
 * already holds, so a declaration takes effect on the next push or pop.
 * The board (membership.c publishes it) gets role, term, leader and
 * commit after every input that changed them.
 *
 * A proposal is answered once every member that owns partitions has
 * applied it, not when it commits: a push that follows the answer may land
 * on any owner, and must find the declaration there (SPEC: "every node
 * applies them").  Followers say what they applied in their answers to
 * the leader's appends (consensus/raft_msg.h); the core sends a commit to
 * every follower as soon as it moves.
 */
#include "master/raft_node.h"

#include <sys/random.h>
#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "consensus/store.h"
#include "master/cluster_client.h"
#include "master/master.h"
#include "master/membership.h"
#include "master/queue_sync.h"
#include "master/view.h"
#include "shm/board.h"
#include "shm/catalog.h"
#include "shm/log.h"

/* snapshot - the raft core's snapshot callback: the declared set. */
static int
snapshot(void *arg, void **data, size_t *len)
{
    struct master *m = arg;
    return decl_snapshot(&m->raft.decl, data, len);
}

/* publish_catalog - the declared set into the catalog and the held queues. */
static void
publish_catalog(struct master *m, const struct decl_cmd *changed)
{
    struct decl_set *d = &m->raft.decl;
    struct shm_catalog_entry *e = calloc(d->n ? d->n : 1, sizeof(*e));

    if (e == NULL) {
        log_error(ENOMEM, "cannot publish the catalog");
        return;
    }
    for (size_t i = 0; i < d->n; i++)
        e[i] = (struct shm_catalog_entry){d->q[i].name, d->q[i].len,
                                          d->q[i].opts, d->q[i].dl};
    int rc = shm_catalog_publish(m->seg.catalog, e, (uint32_t)d->n);
    if (rc != 0)
        log_error(-rc, "cannot publish the catalog (%zu queues)", d->n);
    free(e);
    if (changed == NULL)
        return;
    struct shm_name q = {changed->name, changed->len};
    if (changed->op == DECL_DECLARE)
        master_queue_declare(m, q, &changed->opts);
    else
        master_queue_delete(m, q);
}

/* resolve - proposals at index end: committed if the term matches (then
 * they wait for the members to apply: settle), else lost. */
static void
resolve(struct master_raft *r, uint64_t index, uint64_t term)
{
    struct master_proposal **pp = &r->pending;

    while (*pp != NULL) {
        struct master_proposal *p = *pp;
        if (p->index == index && p->term == term) {
            p->committed = 1;
            pp = &p->next;
        } else if (p->index == index) {
            *pp = p->next;
            p->done(p->arg, -ECANCELED);
            free(p);
        } else {
            pp = &p->next;
        }
    }
}

/*
 * laggard - a member that has yet to apply index: one live or starting
 * (it owns partitions, or is about to) that has not said it applied it.
 * Dead and leaving members are not waited for: they own none.  -1: none.
 */
static int
laggard(const struct master *m, uint64_t index, uint64_t now)
{
    for (int i = 0; i < m->members.n; i++) {
        if (i == m->members.self)
            continue;
        enum shm_member_state s = master_membership_state(m, i, now);
        if ((s == SHM_MEMBER_LIVE || s == SHM_MEMBER_STARTING) &&
            raft_peer_applied(m->raft.core, i) < index)
            return i;
    }
    return -1;
}

/*
 * settle - answer the committed proposals that every member has applied.
 * At the deadline one is answered all the same (and a warning names the
 * member): it is committed, and applied here and by every member that
 * said so.  A member that has not said so by then is silent, so on its way
 * to dead (member_ttl_ms unheard), after which its partitions start again
 * on the others, which hold the entry; or it is slow, and applies the
 * entry with the next append it takes; or it is of an earlier build that
 * never says (consensus/raft_msg.h).  That answer does not promise that a
 * push to that member's partitions meets the entry.  A node that no longer
 * leads cannot hear who applied what: it answers at once.
 */
static void
settle(struct master *m, uint64_t now)
{
    struct master_proposal **pp = &m->raft.pending;
    int lag;

    while (*pp != NULL) {
        struct master_proposal *p = *pp;
        if (!p->committed) {
            pp = &p->next;
            continue;
        }
        lag = m->raft.st.role == RAFT_LEADER ? laggard(m, p->index, now) : -1;
        if (lag >= 0 && now < p->deadline) {
            pp = &p->next;
            continue;
        }
        if (lag >= 0)
            log_warn(0,
                     "raft: entry %llu answered before member %s said it "
                     "applied it",
                     (unsigned long long)p->index,
                     m->members.id[lag][0] ? m->members.id[lag]
                                           : m->members.addr[lag]);
        *pp = p->next;
        p->done(p->arg, 0);
        free(p);
        pp = &m->raft.pending; /* done may have dropped others */
    }
}

/* apply - one committed entry. */
static void
apply(struct master *m, const struct raft_entry *e)
{
    struct decl_cmd c;
    int changed = 0;

    if (e->type == RAFT_ENTRY_DATA) {
        if (decl_decode(e->data, e->len, &c) != 0)
            log_error(0, "raft entry %llu is not a command; skipped",
                      (unsigned long long)e->index);
        else if (decl_apply(&m->raft.decl, &c, &changed) != 0)
            log_error(ENOMEM, "cannot apply raft entry %llu",
                      (unsigned long long)e->index);
        else if (changed)
            publish_catalog(m, &c);
    }
    resolve(&m->raft, e->index, e->term);
}

/* restore - a snapshot replaces the declared set: queues it no longer has
 * are undeclared (their contents dropped), the rest (re)declared. */
static void
restore(struct master *m, const struct raft_ready *rd)
{
    struct decl_set old = m->raft.decl;

    m->raft.decl = (struct decl_set){0};
    if (decl_restore(&m->raft.decl, rd->snapshot, rd->snapshot_len) != 0) {
        log_error(0, "raft snapshot at %llu is malformed; ignored",
                  (unsigned long long)rd->snapshot_index);
        decl_free(&m->raft.decl);
        m->raft.decl = old;
        return;
    }
    publish_catalog(m, NULL);
    for (size_t i = 0; i < old.n; i++) {
        if (decl_find(&m->raft.decl, old.q[i].name, old.q[i].len) == NULL)
            master_queue_delete(m,
                                (struct shm_name){old.q[i].name, old.q[i].len});
    }
    for (size_t i = 0; i < m->raft.decl.n; i++) {
        const struct decl_queue *q = &m->raft.decl.q[i];
        master_queue_declare(m, (struct shm_name){q->name, q->len}, &q->opts);
    }
    decl_free(&old);
}

/* process - everything the core has for us after an input. */
static void
process(struct master *m)
{
    struct raft_ready rd;

    if (raft_ready_take(m->raft.core, &rd) != 0)
        return;
    if (rd.has_snapshot)
        restore(m, &rd);
    for (size_t i = 0; i < rd.n_entries; i++)
        apply(m, &rd.entries[i]);
    for (size_t i = 0; i < rd.n_msgs; i++)
        master_cluster_client_send_raft(m, &rd.msgs[i]);
    struct raft_status old = m->raft.st;
    m->raft.st = rd.status;
    if (old.role != rd.status.role || old.term != rd.status.term ||
        old.leader != rd.status.leader)
        log_info(0, "raft: %s in term %llu, leader %s",
                 rd.status.role == RAFT_LEADER         ? "leader"
                 : rd.status.role == RAFT_CANDIDATE    ? "candidate"
                 : rd.status.role == RAFT_PRECANDIDATE ? "pre-candidate"
                                                       : "follower",
                 (unsigned long long)rd.status.term,
                 rd.status.leader >= 0 ? m->members.addr[rd.status.leader]
                                       : "unknown");
    if (rd.status_changed || old.commit != rd.status.commit)
        master_membership_publish(m);
    raft_ready_release(&rd);
    settle(m, shm_now_ms());
    master_view_check_ready(m, shm_now_ms());
}

/*
 * clock_in - bring the core's clock to now before an input, and handle
 * what the tick did.  The core acts at its last tick's time, and the loop
 * ticks a follower only at its election deadline: without this a
 * heartbeat resets that timer from the time of the last deadline, which
 * then fires under a live leader (a pre-vote every 1-2 s, and now and then
 * a new term).
 */
static void
clock_in(struct master *m)
{
    if (raft_tick(m->raft.core, shm_now_ms()) != 0)
        log_fatal(0, "the raft log store failed; stopping");
    process(m);
}

int
master_raft_open(struct master *m, uint64_t now)
{
    struct master_raft *r = &m->raft;
    char dir[CONFIG_PATH_MAX + 8];
    int rc;

    snprintf(dir, sizeof(dir), "%s/raft", m->cfg.data_dir);
    if (mkdir(dir, 0700) == -1 && errno != EEXIST) {
        rc = -errno;
        log_error(-rc, "mkdir(%s) failed", dir);
        return rc;
    }
    if ((rc = raft_store_open(dir, 0, &r->store)) != 0) {
        log_error(-rc, "cannot open the raft log in %s", dir);
        return rc;
    }
    struct raft_config cfg = {
        .self = m->members.self,
        .n = m->members.n,
        .election_ms = MASTER_RAFT_ELECTION_MS,
        .heartbeat_ms = 100,
        .snapshot = snapshot,
        .arg = m,
    };
    if (getrandom(&cfg.seed, sizeof(cfg.seed), 0) != sizeof(cfg.seed))
        cfg.seed = now ^ (uint64_t)m->members.self << 32;
    if ((rc = raft_create(&cfg, r->store, now, &r->core)) != 0) {
        log_error(-rc, "cannot start raft over %s", dir);
        raft_store_close(r->store);
        r->store = NULL;
        return rc;
    }
    raft_status(r->core, &r->st);
    /* A single voter elects itself at its first timeout; replay now. */
    process(m);
    return 0;
}

void
master_raft_close(struct master *m)
{
    struct master_raft *r = &m->raft;

    while (r->pending != NULL) {
        struct master_proposal *p = r->pending;
        r->pending = p->next;
        p->done(p->arg, p->committed ? 0 : -ESHUTDOWN);
        free(p);
    }
    raft_free(r->core);
    r->core = NULL;
    if (r->store)
        raft_store_close(r->store);
    r->store = NULL;
    decl_free(&r->decl);
}

void
master_raft_tick(struct master *m, uint64_t now)
{
    struct master_proposal **pp = &m->raft.pending;

    if (m->raft.core == NULL)
        return;
    if (raft_tick(m->raft.core, now) != 0)
        log_fatal(0, "the raft log store failed; stopping");
    process(m);
    while (*pp != NULL) {
        struct master_proposal *p = *pp;
        if (!p->committed && now >= p->deadline) {
            *pp = p->next;
            p->done(p->arg, -ETIMEDOUT);
            free(p);
        } else {
            pp = &p->next;
        }
    }
}

uint64_t
master_raft_deadline(const struct master *m)
{
    return m->raft.core ? raft_deadline(m->raft.core) : UINT64_MAX;
}

int
master_raft_receive(struct master *m, const void *buf, size_t len,
                    const struct master_peer_word *pw)
{
    struct raft_msg msg;
    int rc = raft_msg_decode(buf, len, &msg);

    if (rc != 0)
        return -EBADMSG;
    if (msg.to == m->members.self && msg.from >= 0 && msg.from < m->members.n &&
        msg.from != m->members.self) {
        master_membership_heard(m, msg.from, pw);
        clock_in(m);
        rc = raft_step(m->raft.core, &msg);
    } else {
        rc = -EINVAL;
    }
    raft_msg_free(&msg);
    if (rc != 0 && rc != -EINVAL)
        log_fatal(-rc, "the raft log store failed; stopping");
    if (rc == 0)
        process(m);
    return rc;
}

int
master_raft_propose(struct master *m, const struct decl_cmd *cmd,
                    uint64_t deadline, master_raft_done_fn *done, void *arg,
                    uint64_t *index)
{
    struct master_proposal *p;
    void *buf;
    size_t len;
    int rc;

    if (shm_now_ms() >= deadline)
        return -ETIMEDOUT;
    if ((p = calloc(1, sizeof(*p))) == NULL)
        return -ENOMEM;
    if ((rc = decl_encode(cmd, &buf, &len)) != 0) {
        free(p);
        return rc;
    }
    clock_in(m);
    rc = raft_propose(m->raft.core, buf, len, &p->index);
    free(buf);
    if (rc != 0) {
        free(p);
        return rc;
    }
    *index = p->index;
    raft_status(m->raft.core, &m->raft.st);
    p->term = m->raft.st.term;
    p->deadline = deadline;
    p->done = done;
    p->arg = arg;
    p->next = m->raft.pending;
    m->raft.pending = p;
    process(m);
    return 0;
}

void
master_raft_cancel(struct master *m, void *arg)
{
    struct master_proposal **pp = &m->raft.pending;

    while (*pp != NULL) {
        struct master_proposal *p = *pp;
        if (p->arg == arg) {
            *pp = p->next;
            free(p);
        } else {
            pp = &p->next;
        }
    }
}

const char *
master_raft_leader_addr(const struct master *m)
{
    int l = m->raft.st.leader;
    return l >= 0 && l < m->members.n ? m->members.addr[l] : NULL;
}

int
master_raft_is_leader(const struct master *m)
{
    return m->raft.core != NULL && m->raft.st.role == RAFT_LEADER;
}

int
master_raft_hand_off(struct master *m)
{
    if (!master_raft_is_leader(m) || m->members.n < 2)
        return 0;
    clock_in(m);
    if (raft_transfer_leadership(m->raft.core, RAFT_TRANSFER_AUTO) != 0)
        return 0;
    process(m);
    return 1;
}
