/*
 * drain.h - pushing numbered payloads and taking messages back, as the
 * suites that count messages by payload or by id do it: a run of numbers
 * in one push, a pop that must answer 200, a pop polled until a message
 * comes, a POST pop that carries acks, and the bookkeeping of which
 * numbers came.  Each helper aborts the test when an answer is not what
 * it says.
 */
#ifndef MAYFLY_TEST_INTEGRATION_DRAIN_H
#define MAYFLY_TEST_INTEGRATION_DRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "test/integration/node.h"

/* itest_push_seq - payloads from..from+count-1 (numbers) to queue/part
 * (part NULL: the default) through n, in one push answered 201. */
void itest_push_seq(const struct itest_node *n, const char *queue,
                    const char *part, int from, int count);

/* itest_pop - GET pop with query q (after '?'); asserts 200 with a
 * "messages" array; how many messages it holds. */
int itest_pop(const struct itest_node *n, struct itest_resp *r, const char *q);

/* itest_pop_until_one - itest_pop every 20 ms until a message comes; aborts
 * after ms.  r holds the answer that brought it. */
void itest_pop_until_one(const struct itest_node *n, struct itest_resp *r,
                         const char *q, int ms);

/*
 * itest_pop_post - POST pop through n of batch from queue (part NULL: any)
 * in group g, carrying acks (the entries' JSON text, "" for none); asserts
 * 200 with "messages" and "results"; how many messages.
 */
int itest_pop_post(const struct itest_node *n, struct itest_resp *r,
                   const char *queue, const char *part, const char *g,
                   int batch, const char *acks);

/* itest_last_id - the id of the last message r holds, into out. */
void itest_last_id(const struct itest_resp *r, char *out, size_t len);

/*
 * itest_mark_payloads - for each message r holds, its payload (a number)
 * must be in 1..max and not marked in seen yet; marks it.  Returns how
 * many messages r holds.
 */
int itest_mark_payloads(const struct itest_resp *r, char *seen, int64_t max);

#endif
