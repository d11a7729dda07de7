/*
 * top.c - see top.h.
 *
 * Each second it reads GET /health (members, role, leader), the queue
 * listing (its first page: the node's default scope, the cluster's when it
 * has peers) and GET /metrics (the answering node's push, pop and memory
 * counters), and draws them with ncurses, which also redraws on a resize.
 * Rates are differences between two reads over the monotonic time between
 * them: a queue's RATE is how fast its depth grows (negative: it drains).
 * A node that stops answering shows as the error line while the next URL
 * is tried; the view comes back when one answers.
 */
#include "ops/cli/top.h"

#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cli/cmd.h"
#include "ops/cli/out.h"

#define CLI_TOP_PERIOD_MS 1000

/* One queue row. */
struct cli_top_row {
    const char *name; /* points into the read's listing */
    const char *tier;
    int64_t depth, leased, waiting, bytes, drops;
    double rate; /* depth change per second since the last read */
};

/* One read of the node. */
struct cli_top_read {
    struct json_object *health;  /* GET /health, or NULL */
    struct json_object *listing; /* GET queues, or NULL */
    struct cli_top_row *rows;    /* the listing's queues, sorted by name */
    size_t nrows;
    double push, pop, mem_used, mem_limit; /* from /metrics; -1 when absent */
    long at_ms;                            /* monotonic time of the read */
    char err[1100];                        /* why something is missing */
};

/* cli_top_metric - the sum of text's samples of series name whose labels
 * hold label (NULL: any); -1 when there is none. */
static double
cli_top_metric(const char *text, const char *name, const char *label)
{
    size_t n = strlen(name);
    double sum = -1;

    for (const char *l = text; l != NULL && *l != '\0';) {
        const char *eol = strchr(l, '\n');
        size_t len = eol ? (size_t)(eol - l) : strlen(l);
        if (len > n && strncmp(l, name, n) == 0 &&
            (l[n] == ' ' || l[n] == '{')) {
            const char *sp = memrchr(l, ' ', len);
            char *lab = strndup(l, len);
            if (sp != NULL && lab != NULL &&
                (label == NULL || strstr(lab, label) != NULL))
                sum = (sum < 0 ? 0 : sum) + strtod(sp + 1, NULL);
            free(lab);
        }
        l = eol ? eol + 1 : NULL;
    }
    return sum;
}

/* cli_top_by_name - qsort order of rows by queue name. */
static int
cli_top_by_name(const void *a, const void *b)
{
    return strcmp(((const struct cli_top_row *)a)->name,
                  ((const struct cli_top_row *)b)->name);
}

/* cli_top_by_depth - qsort order of rows by depth, deepest first. */
static int
cli_top_by_depth(const void *a, const void *b)
{
    const struct cli_top_row *x = a, *y = b;
    if (x->depth != y->depth)
        return x->depth > y->depth ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* cli_top_rows - r's rows from its listing, sorted by name. */
static void
cli_top_rows(struct cli_top_read *r)
{
    struct json_object *qs = cli_jget(r->listing, "queues");
    size_t n = json_object_array_length(qs);

    r->rows = calloc(n ? n : 1, sizeof(*r->rows));
    if (r->rows == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        struct json_object *q = json_object_array_get_idx(qs, i),
                           *d = cli_jget(q, "drops");
        struct cli_top_row *row = &r->rows[r->nrows++];
        row->name = cli_jstr(q, "queue", "");
        row->tier = cli_jstr(q, "tier", "");
        row->depth = cli_jint(q, "depth", 0);
        row->leased = cli_jint(q, "leased", 0);
        row->waiting = cli_jint(q, "waiting", 0);
        row->bytes = cli_jint(q, "bytes", 0);
        row->drops = cli_jint(d, "bounds", 0) + cli_jint(d, "ttl", 0) +
                     cli_jint(d, "retry", 0);
    }
    qsort(r->rows, r->nrows, sizeof(*r->rows), cli_top_by_name);
}

/* cli_top_fetch - read the node into r; what failed goes to r->err. */
static void
cli_top_fetch(struct cli_conn *c, struct cli_top_read *r)
{
    struct cli_answer a;

    memset(r, 0, sizeof(*r));
    r->push = r->pop = r->mem_used = r->mem_limit = -1;
    if (cli_call(c, "GET", "/health", NULL, 5000, &a) != 0 && a.json) {
        r->health = json_object_get(a.json);
    } else {
        snprintf(r->err, sizeof(r->err), "no node answered: %.1000s", c->err);
        cli_answer_free(&a);
        r->at_ms = cli_cmd_now_ms();
        return;
    }
    cli_answer_free(&a);
    if (cli_call(c, "GET", "/api/v1/ephemeral/queues?limit=1000", NULL, 5000,
                 &a) == 200)
        r->listing = json_object_get(a.json);
    else
        snprintf(r->err, sizeof(r->err), "queue listing: %.1000s",
                 a.status ? cli_jstr(a.json, "error", "refused") : c->err);
    cli_answer_free(&a);
    if (cli_call(c, "GET", "/metrics", NULL, 5000, &a) == 200) {
        r->push =
            cli_top_metric(a.body, "mayfly_push_total", "result=\"accepted\"");
        r->pop = cli_top_metric(a.body, "mayfly_pop_total", NULL);
        r->mem_used = cli_top_metric(a.body, "mayfly_memory_used_bytes", NULL);
        r->mem_limit =
            cli_top_metric(a.body, "mayfly_memory_limit_bytes", NULL);
    }
    cli_answer_free(&a);
    r->at_ms = cli_cmd_now_ms();
    cli_top_rows(r);
}

/* cli_top_rates - each row's depth rate against the read before, walking
 * both name-sorted lists together. */
static void
cli_top_rates(struct cli_top_read *now, const struct cli_top_read *before)
{
    double secs = (double)(now->at_ms - before->at_ms) / 1000.0;
    size_t j = 0;

    for (size_t i = 0; i < now->nrows && secs > 0; i++) {
        int cmp = 1;
        while (j < before->nrows &&
               (cmp = strcmp(before->rows[j].name, now->rows[i].name)) < 0)
            j++;
        int64_t was = j < before->nrows && cmp == 0 ? before->rows[j].depth : 0;
        now->rows[i].rate = (double)(now->rows[i].depth - was) / secs;
    }
}

/* cli_top_free - release a read. */
static void
cli_top_free(struct cli_top_read *r)
{
    json_object_put(r->health);
    json_object_put(r->listing);
    free(r->rows);
    memset(r, 0, sizeof(*r));
}

/* cli_top_size - n bytes as a short figure ("512", "1.5K", "256.0M"). */
static const char *
cli_top_size(double n, char *buf, size_t len)
{
    const char *unit = "KMGT";
    int u = -1;

    if (n < 0)
        return "-";
    while (n >= 1024 && u < 3)
        n /= 1024, u++;
    if (u < 0)
        snprintf(buf, len, "%.0f", n);
    else
        snprintf(buf, len, "%.1f%c", n, unit[u]);
    return buf;
}

/* cli_top_rate - the counter's rate between two reads, as text. */
static const char *
cli_top_rate(double now, double before, double secs, char *buf, size_t len)
{
    if (now < 0 || before < 0 || secs <= 0)
        return "-";
    snprintf(buf, len, "%.1f/s", (now - before) / secs);
    return buf;
}

/* cli_top_header - the node lines; returns the next free row. */
static int
cli_top_header(const struct cli_conn *c, const struct cli_top_read *r,
               const struct cli_top_read *before)
{
    double secs = (double)(r->at_ms - before->at_ms) / 1000.0;
    char b1[32], b2[32], b3[32], b4[32];

    attron(A_REVERSE);
    mvprintw(0, 0, "%-*.*s", COLS, COLS, "");
    mvprintw(0, 0, " mayfly top  %s  node %s  %s  term %s  leader %s",
             cli_conn_base(c), cli_jstr(r->health, "node", "?"),
             cli_jstr(r->health, "role", "?"), cli_jnum(r->health, "term"),
             cli_jstr(r->health, "leader", "-"));
    attroff(A_REVERSE);
    mvprintw(1, 0,
             " status %s   push %s   pop %s   memory %s / %s   queues %zu",
             cli_jstr(r->health, "status", "-"),
             cli_top_rate(r->push, before->push, secs, b1, sizeof(b1)),
             cli_top_rate(r->pop, before->pop, secs, b2, sizeof(b2)),
             cli_top_size(r->mem_used, b3, sizeof(b3)),
             cli_top_size(r->mem_limit, b4, sizeof(b4)), r->nrows);
    return 3;
}

/* cli_top_members - the members table from row y; returns the next row. */
static int
cli_top_members(const struct cli_top_read *r, int y)
{
    struct json_object *ms = cli_jget(r->health, "members");
    const char *leader = cli_jstr(r->health, "leader", "");

    attron(A_BOLD);
    mvprintw(y++, 0, " %-40s %-10s %s", "MEMBER", "STATE", "ROLE");
    attroff(A_BOLD);
    for (size_t i = 0; i < json_object_array_length(ms) && y < LINES - 3; i++) {
        struct json_object *m = json_object_array_get_idx(ms, i);
        const char *node = cli_jstr(m, "node", "");
        mvprintw(y++, 0, " %-40.40s %-10s %s%s", node, cli_jstr(m, "state", ""),
                 strcmp(node, leader) == 0 ? "leader" : "-",
                 json_object_get_boolean(cli_jget(m, "self")) ? " (self)" : "");
    }
    return y + 1;
}

/* cli_top_queues - the queues, deepest first, from row y to the screen's
 * last row but one. */
static void
cli_top_queues(struct cli_top_read *r, int y)
{
    struct cli_top_row *rows = calloc(r->nrows ? r->nrows : 1, sizeof(*rows));
    char b[32];

    if (rows == NULL)
        return;
    memcpy(rows, r->rows, r->nrows * sizeof(*rows));
    qsort(rows, r->nrows, sizeof(*rows), cli_top_by_depth);
    attron(A_BOLD);
    mvprintw(y++, 0, " %-32s %10s %10s %8s %8s %9s %8s %s", "QUEUE", "DEPTH",
             "RATE", "LEASED", "WAITING", "BYTES", "DROPS", "TIER");
    attroff(A_BOLD);
    for (size_t i = 0; i < r->nrows && y < LINES - 1; i++) {
        const struct cli_top_row *q = &rows[i];
        mvprintw(y++, 0, " %-32.32s %10lld %8.1f/s %8lld %8lld %9s %8lld %s",
                 q->name, (long long)q->depth, q->rate, (long long)q->leased,
                 (long long)q->waiting, cli_top_size((double)q->bytes, b, 32),
                 (long long)q->drops, q->tier);
    }
    free(rows);
}

/* cli_top_draw - the whole screen for read r. */
static void
cli_top_draw(const struct cli_conn *c, struct cli_top_read *r,
             const struct cli_top_read *before)
{
    int y;

    erase();
    y = cli_top_header(c, r, before);
    if (r->health != NULL) {
        y = cli_top_members(r, y);
        cli_top_queues(r, y);
    }
    attron(A_REVERSE);
    mvprintw(LINES - 1, 0, "%-*.*s", COLS, COLS, "");
    mvprintw(LINES - 1, 0, " q quit  %.*s", COLS > 10 ? COLS - 10 : 0, r->err);
    attroff(A_REVERSE);
    refresh();
}

/* cli_top - see top.h. */
int
cli_top(int argc, char **argv, struct cli_globals *g)
{
    const struct cli_opt opts[] = {{NULL, NULL, NULL}};
    struct cli_top_read now = {0}, before = {0};
    struct cli_operands ops;
    struct cli_conn c;
    int rc, quit = 0;

    rc = cli_cmd_start("top", argc, argv, opts, g, &ops, 0, 0, &c);
    if (rc >= 0)
        return rc;
    if (initscr() == NULL) {
        cli_conn_close(&c);
        fputs("mayfly: top needs a terminal\n", stderr);
        return CLI_EXIT_REFUSED;
    }
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
    cli_top_fetch(&c, &before);
    now = before;
    memset(&before, 0, sizeof(before));
    before.push = before.pop = -1;
    before.at_ms = now.at_ms;
    while (!quit) {
        long due = now.at_ms + CLI_TOP_PERIOD_MS;
        cli_top_draw(&c, &now, &before);
        /* Wait for the next read, redrawing on a resize, quitting on q. */
        for (long left; !quit && (left = due - cli_cmd_now_ms()) > 0;) {
            timeout((int)left);
            int ch = getch();
            if (ch == 'q' || ch == 'Q')
                quit = 1;
            else if (ch == KEY_RESIZE)
                cli_top_draw(&c, &now, &before);
        }
        if (quit)
            break;
        cli_top_free(&before);
        before = now;
        cli_top_fetch(&c, &now);
        cli_top_rates(&now, &before);
    }
    endwin();
    cli_top_free(&now);
    cli_top_free(&before);
    cli_conn_close(&c);
    return 0;
}
