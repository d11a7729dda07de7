# cli.mk - mayfly, the command line client (included by the Makefile).
#
# Its own binary beside mayflyd: every .c under ops/cli/, linked with
# libcurl, json-c and ncurses (it shares no code with the daemon), and
# `mayfly bench`'s load generator: ops/bench/engine.c, roles.c and rset.c,
# the very files `make bench` builds, compiled here with BENCH_NO_RESP so
# that the client needs neither hiredis nor libnats (GnuTLS: the engine's
# HTTPS).

CLISRC  := $(wildcard ops/cli/*.c)
CLIOBJ  := $(CLISRC:%.c=$(B)/%.o)
CLIGEN  := $(B)/ops/bench-http/engine.o $(B)/ops/bench-http/roles.o \
           $(B)/ops/bench-http/rset.o
CLILIBS  = $(shell pkg-config --libs libcurl json-c ncursesw gnutls 2>/dev/null) \
           -lpthread

all: $(B)/mayfly

$(B)/ops/bench-http/%.o: ops/bench/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DBENCH_NO_RESP -MMD -MP -c -o $@ $<

$(B)/mayfly: $(CLIOBJ) $(CLIGEN)
	$(CC) $(LDFLAGS) -o $@ $^ $(CLILIBS)

FMTSRC  += $(CLISRC) $(wildcard ops/cli/*.h)

-include $(CLIOBJ:.o=.d) $(CLIGEN:.o=.d)
