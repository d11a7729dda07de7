/*
 * test_crash.c - a worker process SIGKILLed again and again under push and
 * pop load (SPEC §6, §8): the node keeps answering, the master brings the
 * worker back (two workers again, mayfly_worker_restarts_total up), and
 * every message whose push was answered 201 is delivered — at least once:
 * leases held by a killed connection run out (lease_s=2) and come back, so
 * consumers deduplicate by id.
 *
 * Threads never call cr_assert; they record and the main thread asserts.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "test/integration/node.h"

#define KILLS   10
#define PUSHERS 3
#define POPPERS 3

/* A growable list of ids, shared under lock. */
struct idlist {
    pthread_mutex_t lock;
    char **v;
    size_t len, cap;
};

static void
idlist_add(struct idlist *l, const char *id)
{
    pthread_mutex_lock(&l->lock);
    if (l->len == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 4096;
        l->v = realloc(l->v, l->cap * sizeof(*l->v));
        if (!l->v)
            abort();
    }
    l->v[l->len] = strdup(id);
    if (!l->v[l->len])
        abort();
    l->len++;
    pthread_mutex_unlock(&l->lock);
}

static size_t
idlist_len(struct idlist *l)
{
    size_t k;

    pthread_mutex_lock(&l->lock);
    k = l->len;
    pthread_mutex_unlock(&l->lock);
    return k;
}

struct load {
    const struct itest_node *n;
    atomic_int stop_push;
    atomic_int stop_pop;
    atomic_int push_failures; /* not 201: a retry, not an error */
    atomic_int pop_failures;
    struct idlist pushed; /* ids answered 201 */
    struct idlist popped; /* ids delivered in a 200 answer */
};

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void *
pusher(void *arg)
{
    struct load *l = arg;
    CURL *h = itest_handle();

    for (int k = 0; !atomic_load(&l->stop_push); k++) {
        struct itest_resp r;
        char body[1024];
        size_t o;

        o = (size_t)snprintf(body, sizeof(body),
                             "{\"queue\":\"crash\",\"messages\":[");
        for (int j = 0; j < 10; j++)
            o += (size_t)snprintf(body + o, sizeof(body) - o,
                                  "%s{\"payload\":{\"k\":%d,\"j\":%d}}",
                                  j ? "," : "", k, j);
        snprintf(body + o, sizeof(body) - o, "]}");
        itest_req_on(h, l->n, "POST", "/api/v1/ephemeral/push", body, &r);
        if (r.status == 201 && itest_jlen(r.json, "ids") == 10) {
            for (int j = 0; j < 10; j++) {
                char key[16];

                snprintf(key, sizeof(key), "ids.%d", j);
                idlist_add(&l->pushed, itest_jstr(r.json, key));
            }
        } else {
            atomic_fetch_add(&l->push_failures, 1);
        }
        itest_resp_free(&r);
        itest_sleep_ms(10);
    }
    curl_easy_cleanup(h);
    return NULL;
}

static void *
popper(void *arg)
{
    struct load *l = arg;
    CURL *h = itest_handle();

    while (!atomic_load(&l->stop_pop)) {
        struct itest_resp r, a;
        int k;

        itest_req_on(h, l->n, "GET",
                     "/api/v1/ephemeral/pop?queue=crash&group=g&batch=50"
                     "&wait=true&timeout=500",
                     NULL, &r);
        k = itest_jlen(r.json, "messages");
        if (r.status != 200 || k < 0) {
            atomic_fetch_add(&l->pop_failures, 1);
            itest_resp_free(&r);
            itest_sleep_ms(10);
            continue;
        }
        for (int i = 0; i < k; i++) {
            char key[32];

            snprintf(key, sizeof(key), "messages.%d.id", i);
            idlist_add(&l->popped, itest_jstr(r.json, key));
        }
        if (k > 0) {
            char *body = NULL;

            if (asprintf(&body,
                         "{\"queue\":\"crash\",\"group\":\"g\",\"acks\":%s}",
                         json_object_to_json_string_ext(
                             itest_jget(r.json, "messages"),
                             JSON_C_TO_STRING_PLAIN)) < 0)
                abort();
            itest_req_on(h, l->n, "POST", "/api/v1/ephemeral/ack", body, &a);
            itest_resp_free(&a);
            free(body);
        }
        itest_resp_free(&r);
    }
    curl_easy_cleanup(h);
    return NULL;
}

/*
 * Wait until the node runs two workers again, none of them the dead one,
 * and the new one serves: a connection lands on it and is answered.
 */
static void
wait_two_workers(const struct itest_node *n, pid_t dead, pid_t survivor,
                 pid_t *w)
{
    int64_t deadline = itest_now_ms() + 30000;
    pid_t fresh = 0, got = 0;
    CURL *h;

    for (;;) {
        int k = itest_node_workers(n, w, ITEST_NODE_MAX_WORKERS);

        if (k == 2 && w[0] != dead && w[1] != dead)
            break;
        cr_assert(itest_now_ms() < deadline,
                  "30 s after worker %d was killed the node runs %d workers",
                  (int)dead, k);
        itest_sleep_ms(20);
    }
    fresh = w[0] == survivor ? w[1] : w[0];
    h = itest_handle_on_worker(n, fresh, &got);
    curl_easy_cleanup(h);
    cr_assert_eq(itest_node_workers(n, w, ITEST_NODE_MAX_WORKERS), 2,
                 "a replacement worker died");
}

/* Wait until pushes have been answered 201 for want more messages. */
static void
wait_progress(struct load *l, size_t want, const char *when)
{
    size_t from = idlist_len(&l->pushed);
    int64_t deadline = itest_now_ms() + 30000;

    while (idlist_len(&l->pushed) < from + want) {
        cr_assert(itest_now_ms() < deadline,
                  "%s: no %zu pushes answered 201 within 30 s", when, want);
        itest_sleep_ms(20);
    }
}

Test(crash, killed_workers_come_back_and_lose_no_answered_push, .timeout = 240)
{
    /* Static: threads may outlive a failed assertion of this function. */
    static struct itest_node n;
    static struct load l = {.pushed.lock = PTHREAD_MUTEX_INITIALIZER,
                            .popped.lock = PTHREAD_MUTEX_INITIALIZER};
    pthread_t push_th[PUSHERS], pop_th[POPPERS];
    pid_t w[ITEST_NODE_MAX_WORKERS];
    double restarts0 = 0, restarts1 = 0;
    size_t missing = 0;
    int64_t deadline;
    int hits = 0;
    char first_missing[128] = "";

    l.n = &n;
    itest_node_start(&n, "workers=2 lease_s=2 retry_limit=1000");
    cr_assert_eq(itest_node_workers(&n, w, ITEST_NODE_MAX_WORKERS), 2);
    cr_assert_eq(itest_metric(&n, "mayfly_worker_restarts_total", &restarts0),
                 0, "no mayfly_worker_restarts_total in /metrics");
    for (int i = 0; i < PUSHERS; i++)
        cr_assert_eq(pthread_create(&push_th[i], NULL, pusher, &l), 0);
    for (int i = 0; i < POPPERS; i++)
        cr_assert_eq(pthread_create(&pop_th[i], NULL, popper, &l), 0);
    wait_progress(&l, 200, "before the first kill");
    for (int k = 0; k < KILLS; k++) {
        /* The worker serving more of the load, so in-flight work dies. */
        int c0 = itest_worker_conns(&n, w[0]),
            c1 = itest_worker_conns(&n, w[1]);
        int pick = c0 == c1 ? k % 2 : c1 > c0;
        pid_t victim = w[pick], survivor = w[!pick];
        struct itest_resp r;
        char when[64];

        hits += (pick ? c1 : c0) > 0;
        cr_assert_eq(kill(victim, SIGKILL), 0);
        deadline = itest_now_ms() + 10000;
        while (itest_get(&n, &r, "/health") != 200) {
            itest_resp_free(&r);
            cr_assert(itest_now_ms() < deadline,
                      "/health unanswered 10 s after killing a worker");
            itest_sleep_ms(20);
        }
        itest_resp_free(&r);
        wait_two_workers(&n, victim, survivor, w);
        snprintf(when, sizeof(when), "after kill %d", k + 1);
        wait_progress(&l, 200, when);
    }
    atomic_store(&l.stop_push, 1);
    for (int i = 0; i < PUSHERS; i++)
        pthread_join(push_th[i], NULL);
    /* Consume until every answered push has been delivered. */
    deadline = itest_now_ms() + 60000;
    for (;;) {
        pthread_mutex_lock(&l.popped.lock);
        qsort(l.popped.v, l.popped.len, sizeof(char *), cmp_str);
        missing = 0;
        for (size_t i = 0; i < l.pushed.len; i++)
            if (!bsearch(&l.pushed.v[i], l.popped.v, l.popped.len,
                         sizeof(char *), cmp_str) &&
                missing++ == 0)
                snprintf(first_missing, sizeof(first_missing), "%s",
                         l.pushed.v[i]);
        pthread_mutex_unlock(&l.popped.lock);
        if (missing == 0 || itest_now_ms() > deadline)
            break;
        itest_sleep_ms(200);
    }
    atomic_store(&l.stop_pop, 1);
    for (int i = 0; i < POPPERS; i++)
        pthread_join(pop_th[i], NULL);
    cr_assert_eq(missing, 0,
                 "%zu of %zu messages answered 201 were never delivered "
                 "(first %s)",
                 missing, l.pushed.len, first_missing);
    cr_assert_eq(itest_metric(&n, "mayfly_worker_restarts_total", &restarts1),
                 0);
    cr_assert(restarts1 >= restarts0 + KILLS,
              "mayfly_worker_restarts_total went %g -> %g over %d kills",
              restarts0, restarts1, KILLS);
    cr_assert(hits >= KILLS / 2,
              "only %d of %d kills hit a worker holding a load connection",
              hits, KILLS);
    cr_log_info("crash: %zu messages pushed, %zu deliveries, %d push and %d "
                "pop failures around %d kills (%d on a worker with load)",
                l.pushed.len, l.popped.len, atomic_load(&l.push_failures),
                atomic_load(&l.pop_failures), KILLS, hits);
    for (size_t i = 0; i < l.pushed.len; i++)
        free(l.pushed.v[i]);
    for (size_t i = 0; i < l.popped.len; i++)
        free(l.popped.v[i]);
    free(l.pushed.v);
    free(l.popped.v);
}

/* shared_sockets - how many sockets pid holds that the master also holds,
 * and (in *in_dir) how many of its descriptors above the standard three
 * name a file under the node's data dir (the raft log). */
static int
shared_sockets(const struct itest_node *n, pid_t pid, int *in_dir)
{
    char master[256][512], path[64], link[512];
    int nm = 0, shared = 0;

    *in_dir = 0;
    for (int pass = 0; pass < 2; pass++) {
        pid_t p = pass == 0 ? n->pid : pid;
        for (int fd = 3; fd < 256; fd++) {
            snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)p, fd);
            ssize_t k = readlink(path, link, sizeof(link) - 1);
            if (k <= 0)
                continue;
            link[k] = '\0';
            if (pass == 0 && strncmp(link, "socket:", 7) == 0 && nm < 256)
                snprintf(master[nm++], sizeof(master[0]), "%s", link);
            if (pass == 1 && strncmp(link, n->dir, strlen(n->dir)) == 0)
                (*in_dir)++;
            for (int i = 0; pass == 1 && i < nm; i++)
                shared += strcmp(master[i], link) == 0;
        }
    }
    return shared;
}

/* settled_sockets - shared_sockets once pid has closed what it inherited:
 * a worker closes the master's other descriptors as it starts, which may
 * be after its sibling already answers, so wait (5 s at most) for that. */
static int
settled_sockets(const struct itest_node *n, pid_t pid, int *in_dir)
{
    int64_t deadline = itest_now_ms() + 5000;
    int k;

    while ((k = shared_sockets(n, pid, in_dir)) != 1 &&
           itest_now_ms() < deadline)
        itest_sleep_ms(20);
    return k;
}

/* A worker, first forked or forked again after a crash, holds of the
 * master's descriptors only the client listening socket: a copy of a
 * cluster socket would keep it open after the master closes it. */
Test(crash, workers_hold_only_the_client_socket_of_the_masters)
{
    struct itest_node n;
    pid_t w[ITEST_NODE_MAX_WORKERS], old[2];
    int in_dir;

    itest_node_start(&n, "workers=2");
    cr_assert_eq(itest_node_workers(&n, w, ITEST_NODE_MAX_WORKERS), 2);
    for (int i = 0; i < 2; i++) {
        int k = settled_sockets(&n, w[i], &in_dir);
        cr_assert_eq(k, 1, "worker %d shares %d sockets with the master",
                     (int)w[i], k);
        cr_assert_eq(in_dir, 0, "worker %d holds %d files of the data dir",
                     (int)w[i], in_dir);
    }
    old[0] = w[0];
    old[1] = w[1];
    cr_assert_eq(kill(old[0], SIGKILL), 0);
    wait_two_workers(&n, old[0], old[1], w);
    pid_t fresh = w[0] == old[1] ? w[1] : w[0];
    int k = settled_sockets(&n, fresh, &in_dir);
    cr_assert_eq(k, 1, "the respawned worker shares %d sockets with the master",
                 k);
    cr_assert_eq(in_dir, 0,
                 "the respawned worker holds %d files of the data "
                 "dir",
                 in_dir);
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}
