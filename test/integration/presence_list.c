/*
 * presence_list.c - see presence_list.h.
 */
#include "test/integration/presence_list.h"

#include <stdio.h>
#include <string.h>

#include "test/integration/node.h"

/* itest_member_conns - see presence_list.h.  The listing's first page
 * holds every member the suites make. */
int64_t
itest_member_conns(const struct itest_node *n, const char *channel,
                   const char *member)
{
    struct itest_resp r = {0};
    int64_t c = -1;

    if (itest_get(n, &r, "/api/v1/presence/%s", channel) != 200) {
        itest_resp_free(&r);
        return -2;
    }
    for (int i = 0; i < itest_jlen(r.json, "members"); i++) {
        char p[64];
        snprintf(p, sizeof(p), "members.%d.member", i);
        if (strcmp(itest_jstr(r.json, p), member) == 0) {
            snprintf(p, sizeof(p), "members.%d.connections", i);
            c = itest_jint(r.json, p);
        }
    }
    itest_resp_free(&r);
    return c;
}

/* itest_presence_count - see presence_list.h. */
int64_t
itest_presence_count(const struct itest_node *n, const char *channel)
{
    struct itest_resp r = {0};
    int64_t c = -1;

    if (itest_get(n, &r, "/api/v1/presence/%s?count=true", channel) == 200)
        c = itest_jint(r.json, "count");
    itest_resp_free(&r);
    return c;
}
