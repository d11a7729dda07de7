/*
 * test_nonce.c - the table of nonces taken (shm/nonce.h): a count is
 * taken once per sender, counts may come out of order within the window,
 * counts below it are refused, a sender idle long enough frees its slot,
 * and the table shared over fork refuses in one process what another
 * took.
 */
#include <sys/wait.h>

#include <errno.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/nonce.h"

static struct shm_nonces *t;

static void
setup(void)
{
    t = shm_nonces_create();
    cr_assert_not_null(t);
}

/* No teardown: the table's mapping goes with the test's process. */
TestSuite(nonce, .init = setup);

Test(nonce, a_count_is_taken_once)
{
    cr_expect_eq(shm_nonce_take(NULL, t, 5, 1, 1000), 0);
    cr_expect_eq(shm_nonce_take(NULL, t, 5, 1, 1000), -EALREADY);
    cr_expect_eq(shm_nonce_take(NULL, t, 6, 1, 1000), 0, "another sender");
    cr_expect_eq(shm_nonce_take(NULL, t, 0, 1, 1000), -EINVAL);
}

Test(nonce, out_of_order_within_the_window)
{
    cr_expect_eq(shm_nonce_take(NULL, t, 9, 100, 1000), 0);
    cr_expect_eq(shm_nonce_take(NULL, t, 9, 90, 1000), 0, "late, unseen");
    cr_expect_eq(shm_nonce_take(NULL, t, 9, 90, 1000), -EALREADY);
    cr_expect_eq(shm_nonce_take(NULL, t, 9, 150, 1000), 0);
    cr_expect_eq(shm_nonce_take(NULL, t, 9, 120, 1000), 0, "skipped, unseen");
    cr_expect_eq(shm_nonce_take(NULL, t, 9, 100, 1000), -EALREADY);
    cr_expect_eq(shm_nonce_take(NULL, t, 9, 150 + SHM_NONCE_WINDOW, 1000), 0);
    cr_expect_eq(shm_nonce_take(NULL, t, 9, 150, 1000), -ERANGE,
                 "below the window: too old to tell");
    cr_expect_eq(shm_nonce_take(NULL, t, 9, 151, 1000), 0,
                 "the lowest count in the window");
    /* a jump past the whole window forgets the bits it passed */
    cr_expect_eq(shm_nonce_take(NULL, t, 9, 10 * SHM_NONCE_WINDOW, 1000), 0);
    cr_expect_eq(shm_nonce_take(NULL, t, 9, 10 * SHM_NONCE_WINDOW - 1, 1000),
                 0);
}

Test(nonce, senders_beyond_the_table_wait_for_an_idle_slot)
{
    for (uint64_t s = 1; s <= SHM_NONCE_SENDERS; s++)
        cr_assert_eq(shm_nonce_take(NULL, t, s, 1, 1000), 0, "sender %llu",
                     (unsigned long long)s);
    cr_expect_eq(shm_nonce_take(NULL, t, SHM_NONCE_SENDERS + 1, 1, 2000),
                 -ENOSPC);
    /* every sender but one idle past SHM_NONCE_IDLE_MS: slots free up */
    uint64_t later = 1000 + SHM_NONCE_IDLE_MS + 1;
    cr_expect_eq(shm_nonce_take(NULL, t, 3, 2, later - 10), 0);
    cr_expect_eq(shm_nonce_take(NULL, t, SHM_NONCE_SENDERS + 1, 1, later), 0);
    cr_expect_eq(shm_nonce_take(NULL, t, 3, 2, later), -EALREADY,
                 "the live sender kept its slot");
}

Test(nonce, a_count_taken_in_one_process_is_refused_in_another)
{
    pid_t pid = fork();

    cr_assert_neq(pid, -1);
    if (pid == 0)
        _exit(shm_nonce_take(NULL, t, 77, 3, 1000) == 0 ? 0 : 1);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    cr_expect_eq(shm_nonce_take(NULL, t, 77, 3, 1000), -EALREADY);
}
