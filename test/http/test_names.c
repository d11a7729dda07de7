/*
 * test_names.c - http/names.c: what a queue, partition, group or node id
 * may be (SPEC §1).
 */
#include <string.h>

#include <criterion/criterion.h>

#include "http/names.h"

#define NAME_OK(lit) cr_assert(http_name_valid(lit, sizeof(lit) - 1), "%s", lit)
#define NAME_BAD(lit)                                                          \
    cr_assert(!http_name_valid(lit, sizeof(lit) - 1), "accepted %s", lit)

Test(http_names, accepts_utf8_names_with_spaces_and_slashes)
{
    NAME_OK("a");
    NAME_OK("inbox/7");
    NAME_OK("room 7");
    NAME_OK("e:1:p");
    NAME_OK("caf\xc3\xa9");
    NAME_OK("\xc2\xa0");         /* U+00A0, just past C1 */
    NAME_OK("\xe2\x82\xac");     /* U+20AC */
    NAME_OK("\xef\xbf\xbd");     /* U+FFFD */
    NAME_OK("\xf0\x9f\x98\x80"); /* U+1F600 */
    NAME_OK("\xf4\x8f\xbf\xbf"); /* U+10FFFF */
    NAME_OK("\xed\x9f\xbf");     /* U+D7FF */
}

Test(http_names, length_is_1_to_512_bytes)
{
    char b[514];

    memset(b, 'x', sizeof(b));
    cr_assert(!http_name_valid(b, 0));
    cr_assert(http_name_valid(b, 512));
    cr_assert(!http_name_valid(b, 513));
}

Test(http_names, rejects_control_characters)
{
    NAME_BAD("\x00");
    NAME_BAD("a\nb");
    NAME_BAD("\x1f");
    NAME_BAD("a\x7f");
    NAME_BAD("\xc2\x80"); /* U+0080, C1 */
    NAME_BAD("\xc2\x9f"); /* U+009F, C1 */
}

Test(http_names, rejects_invalid_utf8)
{
    NAME_BAD("\x80");             /* stray continuation */
    NAME_BAD("\xc3");             /* truncated */
    NAME_BAD("\xe2\x82");         /* truncated */
    NAME_BAD("\xc0\xaf");         /* overlong '/' */
    NAME_BAD("\xc1\xbf");         /* overlong */
    NAME_BAD("\xe0\x80\xaf");     /* overlong */
    NAME_BAD("\xf0\x80\x80\xaf"); /* overlong */
    NAME_BAD("\xed\xa0\x80");     /* U+D800 */
    NAME_BAD("\xed\xbf\xbf");     /* U+DFFF */
    NAME_BAD("\xf4\x90\x80\x80"); /* past U+10FFFF */
    NAME_BAD("\xf5\x80\x80\x80");
    NAME_BAD("\xff");
    NAME_BAD("a\xc3(");
}

Test(http_names, node_ids_are_1_to_64_of_a_small_alphabet)
{
    char b[66];

    cr_assert(http_node_id_valid("node-1.a_B", 10));
    memset(b, 'n', sizeof(b));
    cr_assert(http_node_id_valid(b, 64));
    cr_assert(!http_node_id_valid(b, 65));
    cr_assert(!http_node_id_valid(b, 0));
    cr_assert(!http_node_id_valid("a b", 3));
    cr_assert(!http_node_id_valid("a/b", 3));
    cr_assert(!http_node_id_valid("a:b", 3));
    cr_assert(!http_node_id_valid("caf\xc3\xa9", 5));
}

Test(http_names, a_name_cut_for_a_sentence_keeps_whole_characters)
{
    /* "ab" then U+00E9 (2 bytes) then U+20AC (3 bytes) */
    const char *s = "ab\xc3\xa9\xe2\x82\xac";

    cr_assert_eq(http_utf8_cut(s, 100), 7, "shorter than max: all of it");
    cr_assert_eq(http_utf8_cut(s, 7), 7);
    cr_assert_eq(http_utf8_cut(s, 6), 4, "the euro sign is dropped whole");
    cr_assert_eq(http_utf8_cut(s, 5), 4);
    cr_assert_eq(http_utf8_cut(s, 4), 4);
    cr_assert_eq(http_utf8_cut(s, 3), 2, "the e-acute is dropped whole");
    cr_assert_eq(http_utf8_cut(s, 2), 2);
    cr_assert_eq(http_utf8_cut(s, 0), 0);
}
