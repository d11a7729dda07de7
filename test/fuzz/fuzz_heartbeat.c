/*
 * fuzz_heartbeat.c - a heartbeat as the cluster port decodes it
 * (master/cluster.c, master/membership.c): the body (the sender's member
 * index) and what the X-Mayfly-Node, -Client, -Incarnation and -State
 * headers say, applied to the members of a three-node master, then the
 * group and hold lines of the body (master/groups.c) applied to a real
 * segment.  The input is the body's first line and the four headers, one a
 * line, then the body's other lines; no crash, an index only in range,
 * what is kept terminated inside its field, a known state, a segment the
 * checker finds sound.
 */
#include "master/cluster.h"
#include "master/groups.h"
#include "master/master.h"
#include "master/membership.h"
#include "shm/check.h"
#include "shm/log.h"
#include "shm/segment.h"
#include "test/fuzz/fuzz.h"

static struct master m;
static struct shm_seg seg;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    struct shm_params p = {
        .max_bytes = 1 << 20,
        .workers = 2,
        .implicit_idle_s = 300,
        .incarnation = 77,
        .defaults = {.max_length = 10000,
                     .max_bytes = 512 << 10,
                     .lease_s = 30,
                     .retry_limit = 5},
        .queue_max_bytes = 512 << 10,
        .queue_max_length = 10000,
    };

    (void)argc;
    (void)argv;
    log_set_level(LOG_LEVEL_ERROR); /* "member x is leaving", each time */
    FUZZ_CHECK(shm_segment_create(&p, &seg) == 0, "segment");
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstr(data, size), *line[5] = {0}, *p = text;
    struct shm_check_report r;
    struct master_peer_word pw;
    int i;

    for (int k = 0; k < 5 && p != NULL; k++) {
        line[k] = p;
        if ((p = strchr(p, '\n')) != NULL)
            *p++ = '\0';
    }
    memset(&m, 0, sizeof(m));
    m.members.n = 3;
    m.members.self = 1;
    m.cfg.member_ttl_ms = 4000;
    m.cfg.leave_exclude_s = 30;
    m.state = MASTER_RUNNING;
    m.ready = 1;
    m.cfg.implicit_idle_s = 300;
    m.seg = seg;
    i = master_cluster_heartbeat_index(
        text, line[1] ? (size_t)(line[1] - 1 - text) : size, 3, 1);
    if (i < 0) {
        free(text);
        return 0;
    }
    FUZZ_CHECK(i == 0 || i == 2, "index %d", i);
    pw = (struct master_peer_word){line[1], line[2], line[3], line[4], NULL};
    master_membership_heard(&m, i, &pw);
    FUZZ_CHECK(
        memchr(m.members.id[i], '\0', sizeof(m.members.id[i])) &&
            memchr(m.members.client[i], '\0', sizeof(m.members.client[i])),
        "a field not terminated");
    FUZZ_CHECK(master_membership_state(&m, i, m.members.heard[i]) <
                   SHM_MEMBER_STATES,
               "state");
    if (p != NULL) /* the group and hold lines after the fifth */
        master_groups_in(&m, i, p, strlen(p), 1000000, 1000);
    FUZZ_CHECK(shm_check(&seg, 0, &r) == 0, "segment: %s", r.first);
    free(text);
    return 0;
}
