/*
 * test_reply_release.c - a reply carrying leased messages that cannot be
 * sent releases them (SPEC §3: no message is leased to a connection that is
 * gone).  A pop leases 48 messages of 128 KB (6 MiB, more than the loopback
 * socket buffers hold) to a client that reads almost nothing and then resets
 * the connection: the rest of the reply cannot be written, so the leases are
 * released and a later pop gets every message long before the 60 s lease
 * would run out.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "test/integration/node.h"

#define POP "/api/v1/ephemeral/pop"

Test(longpoll, reply_that_fails_to_send_releases_its_leases, .timeout = 120)
{
    enum { COUNT = 48, SIZE = 128 * 1024 };
    struct itest_node n;
    struct itest_resp r;
    char *payload = malloc(SIZE + 3), head[16];
    int fd, rcvbuf = 4096, total = 0;
    struct linger l = {1, 0};
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ssize_t k;
    int64_t deadline;

    cr_assert(payload);
    itest_node_start(&n, "lease_s=60");
    a.sin_port = htons((uint16_t)n.port);
    payload[0] = '[';
    payload[1] = '"';
    memset(payload + 2, 'x', SIZE - 4);
    strcpy(payload + SIZE - 2, "\"]");
    for (int i = 0; i < COUNT; i++) {
        itest_push(&n, &r, "big", NULL, payload);
        cr_assert_eq(r.status, 201, "push %d: %ld %s", i, r.status, r.body);
        itest_resp_free(&r);
    }
    free(payload);
    /* A small receive buffer, set before connect, keeps the window small. */
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(itest_raw_send(fd, "GET " POP "?queue=big&group=g&batch=48 "
                                    "HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
                 0);
    k = recv(fd, head, sizeof(head) - 1, MSG_WAITALL);
    cr_assert_eq(k, (ssize_t)sizeof(head) - 1, "no answer to the pop");
    head[k] = '\0';
    cr_assert(strncmp(head, "HTTP/1.1 200", 12) == 0, "answer: %s", head);
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    close(fd);
    /* Every message comes back, each with attempts 1. */
    deadline = itest_now_ms() + 10000;
    while (total < COUNT) {
        int got;

        itest_get(&n, &r, POP "?queue=big&group=g&batch=48");
        cr_assert_eq(r.status, 200, "%ld %.200s", r.status, r.body);
        got = itest_jlen(r.json, "messages");
        for (int i = 0; i < got; i++) {
            char key[64];

            snprintf(key, sizeof(key), "messages.%d.attempts", i);
            cr_assert_eq(itest_jint(r.json, key), 1,
                         "a release counted an attempt: %.300s", r.body);
        }
        total += got;
        itest_resp_free(&r);
        cr_assert(total == COUNT || itest_now_ms() < deadline,
                  "%d of %d messages stayed leased to a connection that is "
                  "gone (lease_s=60, gave up after 10 s)",
                  COUNT - total, COUNT);
        if (got == 0)
            itest_sleep_ms(50);
    }
}
