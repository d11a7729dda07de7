/*
 * test_board.c - the master's board: a reader always gets one whole view
 * the master published, even when the master is stopped in the middle of
 * publishing (SIGSTOP, a stall): it never spins waiting for the writer.
 */
#include <sys/prctl.h>
#include <sys/wait.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/board.h"

/* fill - a view whose every field says n, so a torn copy shows. */
static void
fill(struct shm_board_view *v, uint64_t n)
{
    memset(v, 0, sizeof(*v));
    v->ready = 1;
    v->term = n;
    v->commit = n;
    snprintf(v->leader, sizeof(v->leader), "node-%llu", (unsigned long long)n);
    v->nmembers = SHM_BOARD_MEMBERS;
    for (int i = 0; i < SHM_BOARD_MEMBERS; i++) {
        snprintf(v->members[i].id, sizeof(v->members[i].id), "m%d-%llu", i,
                 (unsigned long long)n);
        memset(v->members[i].addr, 'a' + (int)(n % 26),
               sizeof(v->members[i].addr) - 1);
        v->members[i].incarnation = n;
    }
}

/* whole - whether v is one view fill() made, and which. */
static int
whole(const struct shm_board_view *v, uint64_t *n)
{
    struct shm_board_view want;

    fill(&want, v->term);
    *n = v->term;
    return memcmp(&want, v, sizeof(want)) == 0;
}

Test(board, reads_back_what_was_published)
{
    struct shm_board *b = shm_board_create();
    struct shm_board_view v, got;
    uint64_t n;

    cr_assert_not_null(b);
    for (uint64_t i = 1; i <= 3; i++) {
        fill(&v, i);
        shm_board_publish(b, &v);
        shm_board_read(b, &got);
        cr_assert(whole(&got, &n));
        cr_assert_eq(n, i);
        cr_assert_eq(shm_board_stopping(b), 0);
    }
    v.stopping = 1;
    shm_board_publish(b, &v);
    cr_assert_eq(shm_board_stopping(b), 1);
}

/* A writer publishing without pause is stopped at 300 arbitrary points,
 * most of them inside a publish: each time a read returns at once with a
 * whole view, never older than the one read before. */
Test(board, a_writer_stopped_mid_publish_leaves_a_whole_view, .timeout = 30)
{
    struct shm_board *b = shm_board_create();
    struct shm_board_view v, got;
    uint64_t n, last = 0;

    cr_assert_not_null(b);
    fill(&v, 1);
    shm_board_publish(b, &v);
    pid_t writer = fork();
    cr_assert_geq(writer, 0);
    if (writer == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a timed-out test ends it too */
        for (uint64_t i = 2;; i++) {
            fill(&v, i);
            shm_board_publish(b, &v);
        }
    }
    for (int k = 0; k < 300; k++) {
        int status;
        cr_assert_eq(kill(writer, SIGSTOP), 0);
        cr_assert_eq(waitpid(writer, &status, WUNTRACED), writer);
        cr_assert(WIFSTOPPED(status));
        shm_board_read(b, &got);
        cr_assert(whole(&got, &n), "a torn view at stop %d", k);
        cr_assert_geq(n, last, "view %llu after %llu", (unsigned long long)n,
                      (unsigned long long)last);
        last = n;
        cr_assert_eq(kill(writer, SIGCONT), 0);
        for (uint64_t seen = n; seen == n;) { /* let it publish again */
            shm_board_read(b, &got);
            seen = got.term;
        }
    }
    kill(writer, SIGKILL);
    waitpid(writer, NULL, 0);
    cr_assert_gt(last, 300);
}
