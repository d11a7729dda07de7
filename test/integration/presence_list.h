/*
 * presence_list.h - what a presence channel's listing (SPEC §12) says of
 * one member, for the suites that wait for a member to come or go.
 */
#ifndef MAYFLY_TEST_INTEGRATION_PRESENCE_LIST_H
#define MAYFLY_TEST_INTEGRATION_PRESENCE_LIST_H

#include <stdint.h>

struct itest_node;

/* itest_member_conns - member's connections in channel's listing at n;
 * -1 when it is not listed, -2 when n did not answer 200 (owners may be
 * changing: ask again). */
int64_t itest_member_conns(const struct itest_node *n, const char *channel,
                           const char *member);

/* itest_presence_count - channel's member count at n (`count=true`); -1
 * when n did not answer 200 (owners may be changing: ask again). */
int64_t itest_presence_count(const struct itest_node *n, const char *channel);

#endif
