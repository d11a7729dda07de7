/*
 * test_dashboard.c - the Grafana dashboard (ops/grafana/mayfly.json)
 * cannot drift from the metrics: every metric name a panel's query (or a
 * template variable's) uses is one a running node serves on /metrics, every
 * query parses as PromQL (promtool, with Grafana's variables given values),
 * and the panels the operators' questions need are there.
 *
 * Names are compared with the sample names of the exposition, so a
 * histogram is used through its _bucket, _sum and _count series (its bare
 * name is no series in Prometheus, and is refused here too).
 */
#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include "test/integration/node.h"
#include "test/ops/shell.h"

#define DB_EXPRS_MAX 128
#define DB_NAME_MAX  128

struct db_expr {
    const char *panel; /* its panel's title, or the variable's name */
    const char *expr;
};

static struct json_object *db_json;
static struct db_expr db_exprs[DB_EXPRS_MAX];
static int db_nexprs;
static char db_dir[256]; /* scratch: promtool's rule file and output */
static char db_out[65536];

/* db_add - one query of the dashboard. */
static void
db_add(const char *panel, const char *expr)
{
    cr_assert_lt(db_nexprs, DB_EXPRS_MAX, "more than %d queries", db_nexprs);
    db_exprs[db_nexprs++] = (struct db_expr){panel, expr};
}

/* db_panels - every target's expr of panels, rows' own panels included. */
static void
db_panels(struct json_object *panels)
{
    for (size_t i = 0; i < json_object_array_length(panels); i++) {
        struct json_object *p = json_object_array_get_idx(panels, i), *v;
        const char *title = itest_jstr(p, "title");

        if (json_object_object_get_ex(p, "panels", &v))
            db_panels(v);
        if (!json_object_object_get_ex(p, "targets", &v))
            continue;
        for (size_t k = 0; k < json_object_array_length(v); k++) {
            const char *e = itest_jstr(json_object_array_get_idx(v, k), "expr");
            cr_assert_neq(e[0], '\0', "panel '%s': target %zu has no expr",
                          title, k);
            db_add(title, e);
        }
    }
}

/* db_setup - read the dashboard and list its queries. */
static void
db_setup(void)
{
    char root[PATH_MAX - 64], path[PATH_MAX];
    struct json_object *v;

    cr_assert_eq(ops_repo_root(root, sizeof(root)), 0,
                 "MAYFLYD is not set (test/run-all.sh sets it)");
    snprintf(path, sizeof(path), "%s/ops/grafana/mayfly.json", root);
    db_json = json_object_from_file(path);
    cr_assert_not_null(db_json, "%s: %s", path, json_util_get_last_err());
    cr_assert(json_object_object_get_ex(db_json, "panels", &v));
    db_panels(v);
    v = itest_jget(db_json, "templating.list");
    for (int i = 0; v && i < (int)json_object_array_length(v); i++) {
        struct json_object *t = json_object_array_get_idx(v, i);
        const char *q = itest_jstr(t, "query.query");
        if (q[0] != '\0')
            db_add(itest_jstr(t, "name"), q);
    }
    itest_test_dir(db_dir, sizeof(db_dir));
}

static void
db_teardown(void)
{
    json_object_put(db_json);
    db_nexprs = 0;
}

TestSuite(dashboard, .init = db_setup, .fini = db_teardown, .timeout = 60);

/* db_names - the mayfly_ metric names in expr, each with its NUL, one
 * after the other in out (ended by an empty one); how many. */
static int
db_names(const char *expr, char out[][DB_NAME_MAX], int max)
{
    int n = 0;

    for (const char *p = expr; (p = strstr(p, "mayfly_")) != NULL;) {
        size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyz_");
        /* the start of a name, not the inside of another word */
        if (p == expr || !(p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z') ||
                           (p[-1] >= 'A' && p[-1] <= 'Z') ||
                           (p[-1] >= '0' && p[-1] <= '9'))) {
            cr_assert_lt(n, max);
            cr_assert_lt(len, DB_NAME_MAX);
            snprintf(out[n++], DB_NAME_MAX, "%.*s", (int)len, p);
        }
        p += len;
    }
    return n;
}

/* db_served - whether the exposition text has a sample named name. */
static int
db_served(const char *text, const char *name)
{
    size_t n = strlen(name);

    for (const char *l = text; *l; l += strcspn(l, "\n"), l += *l == '\n') {
        if (*l == '#')
            continue;
        if (strncmp(l, name, n) == 0 && (l[n] == '{' || l[n] == ' '))
            return 1;
    }
    return 0;
}

Test(dashboard, every_metric_a_query_uses_is_served_by_a_node)
{
    struct itest_node n;
    struct itest_resp r;
    char names[16][DB_NAME_MAX];
    int used = 0;

    cr_assert_gt(db_nexprs, 20, "only %d queries in the dashboard", db_nexprs);
    itest_node_start(&n, "workers=1");
    cr_assert_eq(itest_req(&n, "GET", "/metrics", NULL, &r), 200);
    for (int i = 0; i < db_nexprs; i++) {
        int k = db_names(db_exprs[i].expr, names, 16);
        cr_assert_gt(k, 0, "'%s': no mayfly metric in %s", db_exprs[i].panel,
                     db_exprs[i].expr);
        for (int j = 0; j < k; j++, used++)
            cr_assert(db_served(r.body, names[j]),
                      "panel '%s' uses %s, which the node does not serve "
                      "(query: %s)",
                      db_exprs[i].panel, names[j], db_exprs[i].expr);
    }
    cr_log_info("%d metric uses in %d queries, all served", used, db_nexprs);
    itest_resp_free(&r);
    cr_assert_eq(itest_node_stop(&n, 30000), 0);
}

/* db_uses - whether some query of the dashboard names metric. */
static int
db_uses(const char *metric)
{
    char names[16][DB_NAME_MAX];

    for (int i = 0; i < db_nexprs; i++) {
        int k = db_names(db_exprs[i].expr, names, 16);
        for (int j = 0; j < k; j++)
            if (strcmp(names[j], metric) == 0)
                return 1;
    }
    return 0;
}

Test(dashboard, has_the_panels_operators_ask_for)
{
    /* rates by verb and result, request latency, memory against the cap,
     * parked pops, members and raft role, hand-overs and wipes */
    static const char *const want[] = {
        "mayfly_push_total",
        "mayfly_pop_total",
        "mayfly_ack_total",
        "mayfly_requests_total",
        "mayfly_request_duration_seconds_bucket",
        "mayfly_memory_used_bytes",
        "mayfly_memory_limit_bytes",
        "mayfly_parked_pops",
        "mayfly_members",
        "mayfly_raft_leader",
        "mayfly_handover_total",
        "mayfly_wipes_total",
    };

    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        cr_assert(db_uses(want[i]), "no panel uses %s", want[i]);
    cr_assert_str_eq(itest_jstr(db_json, "uid"), "mayfly-node");
}

Test(dashboard, panels_have_unique_ids_and_fit_the_grid)
{
    struct json_object *panels = itest_jget(db_json, "panels");
    int ids[256], nids = 0;

    cr_assert_not_null(panels);
    for (size_t i = 0; i < json_object_array_length(panels); i++) {
        struct json_object *p = json_object_array_get_idx(panels, i);
        const char *title = itest_jstr(p, "title");
        int64_t id = itest_jint(p, "id"), x = itest_jint(p, "gridPos.x"),
                w = itest_jint(p, "gridPos.w");

        cr_assert_neq(title[0], '\0', "panel %zu has no title", i);
        cr_assert_gt(id, 0, "panel '%s' has no id", title);
        for (int k = 0; k < nids; k++)
            cr_assert_neq(ids[k], id, "two panels have id %lld", (long long)id);
        cr_assert_lt(nids, 256);
        ids[nids++] = (int)id;
        cr_assert(x >= 0 && w > 0 && x + w <= 24,
                  "panel '%s' is off Grafana's 24-column grid (x %lld, w "
                  "%lld)",
                  title, (long long)x, (long long)w);
        if (strcmp(itest_jstr(p, "type"), "row") != 0)
            cr_assert_str_eq(itest_jstr(p, "datasource.uid"), "${datasource}",
                             "panel '%s' is not on the datasource variable",
                             title);
    }
}

/* db_variable - whether the dashboard defines the template variable
 * named by the len bytes at name. */
static int
db_variable(const char *name, size_t len)
{
    struct json_object *v = itest_jget(db_json, "templating.list");

    for (int i = 0; v && i < (int)json_object_array_length(v); i++) {
        const char *n = itest_jstr(json_object_array_get_idx(v, i), "name");
        if (strlen(n) == len && strncmp(n, name, len) == 0)
            return 1;
    }
    return 0;
}

/*
 * db_subst - expr with Grafana's variables given values promtool takes,
 * into out: its own ($__rate_interval, $__range, $__interval) a duration,
 * the dashboard's (multi-value regexes) ".*".  0, or -1 with the variable
 * neither knows in out.
 */
static int
db_subst(const char *expr, char *out, size_t len)
{
    static const char *const builtin[][2] = {
        {"__rate_interval", "1m"}, {"__range", "1h"}, {"__interval", "15s"}};
    size_t o = 0;

    for (const char *p = expr; *p;) {
        const char *value = NULL;
        size_t n;

        if (*p != '$') {
            cr_assert_lt(o + 1, len);
            out[o++] = *p++;
            continue;
        }
        n = strspn(p + 1, "abcdefghijklmnopqrstuvwxyz"
                          "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
        for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++)
            if (strlen(builtin[i][0]) == n &&
                strncmp(p + 1, builtin[i][0], n) == 0)
                value = builtin[i][1];
        if (value == NULL && n > 0 && db_variable(p + 1, n))
            value = ".*";
        if (value == NULL) {
            snprintf(out, len, "$%.*s", (int)n, p + 1);
            return -1;
        }
        cr_assert_lt(o + strlen(value) + 1, len);
        memcpy(out + o, value, strlen(value));
        o += strlen(value);
        p += 1 + n;
    }
    out[o] = '\0';
    return 0;
}

/* db_sh - a shell command (printf-style); its output lands in db_out. */
static int db_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int
db_sh(const char *fmt, ...)
{
    va_list ap;
    int st;

    va_start(ap, fmt);
    st = ops_vsh(db_dir, db_out, sizeof(db_out), fmt, ap);
    va_end(ap);
    return st;
}

Test(dashboard, every_query_is_promql)
{
    char rules[PATH_MAX], e[4096];
    FILE *f;

    cr_assert_eq(system("command -v promtool >/dev/null 2>&1"), 0,
                 "promtool is not in PATH: install the Debian package "
                 "prometheus (ops/install-deps.sh test does)");
    snprintf(rules, sizeof(rules), "%s/dashboard-rules.yml", db_dir);
    cr_assert_not_null(f = fopen(rules, "w"), "%s: %s", rules, strerror(errno));
    fprintf(f, "groups:\n  - name: dashboard\n    rules:\n");
    for (int i = 0; i < db_nexprs; i++) {
        if (db_exprs[i].expr[0] == 'l' &&
            strncmp(db_exprs[i].expr, "label_values(", 13) == 0)
            continue; /* Grafana's own function, not PromQL */
        cr_assert_eq(db_subst(db_exprs[i].expr, e, sizeof(e)), 0,
                     "panel '%s' uses the variable %s, which the dashboard "
                     "does not define",
                     db_exprs[i].panel, e);
        cr_assert_null(strchr(e, '\''));
        fprintf(f, "      - record: dashboard:query_%d\n        expr: '%s'\n",
                i, e);
    }
    fclose(f);
    cr_assert_eq(db_sh("promtool check rules %s", rules), 0,
                 "promtool check rules refused a query:\n%s", db_out);
}
