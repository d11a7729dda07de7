/*
 * fixture.h - what the shm suites build their segments from: the usual
 * parameters (a node's defaults: 10,000 messages and 16 MiB a queue,
 * 30 s leases, 5 attempts) and a name from a C string.
 */
#ifndef MAYFLY_TEST_SHM_FIXTURE_H
#define MAYFLY_TEST_SHM_FIXTURE_H

#include <string.h>

#include "shm/broker.h"
#include "shm/segment.h"

static inline struct shm_params
fixture_params(uint64_t max_bytes, uint32_t workers, uint64_t incarnation)
{
    struct shm_params p = {
        .max_bytes = max_bytes,
        .workers = workers,
        .implicit_idle_s = 300,
        .incarnation = incarnation,
        .defaults = {.max_length = 10000,
                     .max_bytes = 16 << 20,
                     .lease_s = 30,
                     .retry_limit = 5},
        .queue_max_bytes = 16 << 20,
        .queue_max_length = 10000,
    };
    return p;
}

static inline struct shm_name
nm(const char *s)
{
    return (struct shm_name){s, strlen(s)};
}

#endif
