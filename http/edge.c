/*
 * edge.c - see edge.h: the version gate.  The build refuses headers of
 * another libmicrohttpd, and the server a library of another version at
 * run time (the soname stays libmicrohttpd.so.12 from 0.9.x to 1.0, so a
 * package upgrade swaps it under a built mayflyd without a word).
 */
#include "http/edge.h"

#include <stdio.h>
#include <string.h>

#include <microhttpd.h>

#if MHD_VERSION != HTTP_EDGE_MHD_VERSION_HEX
#error "libmicrohttpd is not 0.9.75: go through http/edge.h's list first"
#endif

/* http_edge_version_check - see edge.h. */
int
http_edge_version_check(const char *running, char *why, size_t len)
{
    if (running != NULL && strcmp(running, HTTP_EDGE_MHD_VERSION) == 0)
        return 0;
    snprintf(why, len,
             "libmicrohttpd %s is not %s, the version this mayflyd was "
             "built and tested for: its workarounds of that version's "
             "defects (http/edge.h) may not hold, so it refuses to serve "
             "HTTP",
             running != NULL ? running : "(unknown)", HTTP_EDGE_MHD_VERSION);
    return -1;
}
