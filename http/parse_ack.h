/*
 * parse_ack.h - what parse_ack.c offers besides http_parse_ack() of
 * parse.h: the status words of SPEC §2, which the json-c oracle of
 * test/http/test_parse_ack.c reads entries with too.  No locking.
 */
#ifndef MAYFLY_HTTP_PARSE_ACK_H
#define MAYFLY_HTTP_PARSE_ACK_H

#include "http/parse.h"

/*
 * http_ack_status_of - an entry's "status" string: "completed", "success",
 * "acked" and "ok" complete, "retry" retries, anything else fails.  Read up
 * to a first NUL, as json-c's C string was.  Cannot fail.
 */
enum http_ack_status http_ack_status_of(const char *s);

#endif
