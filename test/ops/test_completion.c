/*
 * test_completion.c - the bash completion of mayfly (ops/cli/mayfly.bash):
 * bash sources the file, is given a command line as bash gives it to a
 * completion function (COMP_LINE, COMP_POINT, COMP_WORDS, COMP_CWORD), runs
 * _mayfly and prints COMPREPLY, sorted; the words are compared with what
 * the client built beside $MAYFLYD takes.
 *
 * The completion reads the subcommands and their options from the
 * client's --help, so the checks run against that binary: the line's first
 * word is its path, as when a user completes ./build/release/mayfly.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "test/integration/node.h"
#include "test/ops/shell.h"

static char cp_script[PATH_MAX]; /* ops/cli/mayfly.bash */
static char cp_bin[PATH_MAX];    /* the mayfly beside $MAYFLYD */
static char cp_dir[256];         /* scratch for the shell's output */
static char cp_out[16384];

/* cp_setup - the script in the repository, the client beside MAYFLYD. */
static void
cp_setup(void)
{
    char root[PATH_MAX - 64], tmp[PATH_MAX];
    const char *d = getenv("MAYFLYD");

    cr_assert_eq(ops_repo_root(root, sizeof(root)), 0,
                 "MAYFLYD is not set (test/run-all.sh sets it)");
    snprintf(cp_script, sizeof(cp_script), "%s/ops/cli/mayfly.bash", root);
    cr_assert_eq(access(cp_script, R_OK), 0, "no %s", cp_script);
    cr_assert_not_null(realpath(d, tmp), "%s: %s", d, strerror(errno));
    snprintf(cp_bin, sizeof(cp_bin), "%s/mayfly", dirname(tmp));
    cr_assert_eq(access(cp_bin, X_OK), 0, "no client at %s", cp_bin);
    itest_test_dir(cp_dir, sizeof(cp_dir));
}

TestSuite(completion, .init = cp_setup, .timeout = 60);

/* cp_sh - a shell command (printf-style); its output lands in cp_out. */
static int cp_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int
cp_sh(const char *fmt, ...)
{
    va_list ap;
    int st;

    va_start(ap, fmt);
    st = ops_vsh(cp_dir, cp_out, sizeof(cp_out), fmt, ap);
    va_end(ap);
    return st;
}

/*
 * cp_complete - what _mayfly offers for the command line "mayfly " + rest
 * (completing its last word; "" after a blank), sorted and joined by
 * blanks into cp_out ("" for nothing).  COMP_WORDS is split at blanks and
 * at '=' and ':' as bash splits it, COMP_LINE holds the line.
 */
static const char *
cp_complete(const char *rest)
{
    char *q = cp_out;

    /* rest as a single-quoted shell word (the tests' lines hold no ') */
    cr_assert_null(strchr(rest, '\''));
    int st =
        cp_sh("M='%s' bash --norc --noprofile -c '"
              "source \"$0\" || exit 9; "
              "COMP_LINE=\"$M $1\"; COMP_POINT=${#COMP_LINE}; "
              /* bash's split: blanks, and = and : as words of their own */
              "w=$(printf %%s \"$COMP_LINE\" | sed \"s/[=:]/ & /g\"); "
              "read -ra COMP_WORDS <<<\"$w\"; "
              "case $COMP_LINE in *\" \") COMP_WORDS+=(\"\");; esac; "
              "COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); "
              "_mayfly || exit 8; "
              "printf \"%%s\\n\" \"${COMPREPLY[@]}\" | sort | xargs' '%s' '%s'",
              cp_bin, cp_script, rest);
    cr_assert_eq(st, 0, "completing 'mayfly %s': exit %d: %s", rest, st,
                 cp_out);
    q[strcspn(q, "\n")] = '\0';
    return cp_out;
}

/* cp_words - what _mayfly offers from COMP_WORDS and COMP_CWORD alone
 * (no COMP_LINE), for words given as one shell array body. */
static const char *
cp_words(const char *array, int cword)
{
    int st = cp_sh("M='%s' bash --norc --noprofile -c '"
                   "source \"$0\" || exit 9; unset COMP_LINE COMP_POINT; "
                   "eval \"COMP_WORDS=($1)\"; COMP_CWORD=$2; "
                   "_mayfly || exit 8; "
                   "printf \"%%s\\n\" \"${COMPREPLY[@]}\" | sort | xargs' "
                   "'%s' '\"$M\" %s' %d",
                   cp_bin, cp_script, array, cword);
    cr_assert_eq(st, 0, "completing (%s): exit %d: %s", array, st, cp_out);
    cp_out[strcspn(cp_out, "\n")] = '\0';
    return cp_out;
}

#define CP_EXPECT(rest, want)                                                  \
    cr_expect_str_eq(cp_complete(rest), want, "mayfly %s<TAB>", rest)

Test(completion, subcommands_are_the_clients)
{
    char list[4096], *save = NULL;

    CP_EXPECT("", "ack bench configure delete depth health members pop "
                  "presence push queues redrive request reset sub top");
    /* every word offered is a subcommand the client takes */
    snprintf(list, sizeof(list), "%s", cp_complete(""));
    for (char *w = strtok_r(list, " ", &save); w;
         w = strtok_r(NULL, " ", &save))
        cr_expect_eq(cp_sh("'%s' %s --help", cp_bin, w), 0,
                     "'%s' is offered and mayfly %s --help fails: %s", w, w,
                     cp_out);
    CP_EXPECT("p", "pop presence push");
    CP_EXPECT("re", "redrive request reset");
    CP_EXPECT("x", "");
}

Test(completion, global_options_before_and_after_the_subcommand)
{
    CP_EXPECT("-", "--help --json --token --url");
    CP_EXPECT("--j", "--json");
    CP_EXPECT("health --", "--help --json --token --url");
    /* the subcommand is found past the options and their values */
    CP_EXPECT("--url http://127.0.0.1:6632 --json qu", "queues");
    CP_EXPECT("--url=http://127.0.0.1:6632 --token t me", "members");
    CP_EXPECT("--token ", ""); /* a free value */
}

Test(completion, a_subcommands_options_and_their_values)
{
    CP_EXPECT("pop q --", "--ack --auto-ack --batch --group --help --json "
                          "--partition --timeout --token --url --wait");
    CP_EXPECT("pop --a", "--ack --auto-ack");
    CP_EXPECT("sub q --c", "--count");
    CP_EXPECT("push q --",
              "--delay --help --json --key --partition --text --token --url");
    CP_EXPECT("queues --scope ", "cluster node");
    CP_EXPECT("queues --scope=c", "cluster");
    CP_EXPECT("depth q --scope n", "node");
    CP_EXPECT("ack q e:1:Default:3 --status ", "completed failed retry");
    CP_EXPECT("ack q --status r", "retry");
    CP_EXPECT("pop q --group ", ""); /* a free value */
    CP_EXPECT("pop q --group g --w", "--wait");
    /* operands (queue names, payloads, ids) are not guessed */
    CP_EXPECT("push ", "");
    CP_EXPECT("push q ", "");
    /* bench's modes, then its options */
    CP_EXPECT("bench ", "pop push request stream");
    CP_EXPECT("bench p", "pop push");
    CP_EXPECT("bench push ", "");
    CP_EXPECT("bench push --d", "--duration");
    CP_EXPECT("bench request --c", "--conns");
}

Test(completion, configure_keys_and_policy_values)
{
    CP_EXPECT("configure ", ""); /* the queue first */
    CP_EXPECT("configure q ",
              "conflate= deadLetter= deadLetterExpired= dedupeSeconds= "
              "leaseSeconds= "
              "maxBytes= maxLength= policy= retryDelayMs= retryLimit= "
              "ttlSeconds= windowBuffer.count= windowBuffer.ms=");
    CP_EXPECT("configure q max", "maxBytes= maxLength=");
    CP_EXPECT("configure q maxLength=10 win",
              "windowBuffer.count= windowBuffer.ms=");
    CP_EXPECT("configure q policy=", "dropOldest reject");
    CP_EXPECT("configure q policy=d", "dropOldest");
    CP_EXPECT("configure q maxLength=", "");
}

Test(completion, from_comp_words_alone)
{
    /* a caller that sets no COMP_LINE (as the brief's one-liner does) */
    cr_expect_str_eq(cp_words("queues --scope \"\"", 3), "cluster node");
    cr_expect_str_eq(cp_words("po", 1), "pop");
    cr_expect_str_eq(cp_words("pop q --au", 3), "--auto-ack");
}

Test(completion, registered_for_mayfly)
{
    cr_assert_eq(cp_sh("bash --norc --noprofile -c 'source \"$0\"; "
                       "complete -p mayfly' '%s'",
                       cp_script),
                 0, "%s", cp_out);
    cr_assert_str_eq(cp_out, "complete -F _mayfly mayfly\n");
}
