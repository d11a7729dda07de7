/*
 * number.h - a count or a size as mayfly's text settings write them: the
 * configuration (master/config.c) and the auth file (auth.c), so that
 * "max_bytes=64M" means the same in both.  Stateless.
 */
#ifndef MAYFLY_HTTP_NUMBER_H
#define MAYFLY_HTTP_NUMBER_H

#include <stdint.h>

/*
 * http_parse_number - decimal digits, then (suffix: sizes only) one K/M/G
 * suffix, either case, for 1024, 1024^2 or 1024^3.  Returns 0, or -1 with
 * *why set to what was expected.
 */
int http_parse_number(const char *v, int suffix, uint64_t *out,
                      const char **why);

#endif
