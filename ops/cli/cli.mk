# cli.mk - mayfly, the command line client (included by the Makefile).
#
# Its own binary beside mayflyd: every .c under ops/cli/, linked with
# libcurl, json-c and ncurses only (it shares no code with the daemon).

CLISRC  := $(wildcard ops/cli/*.c)
CLIOBJ  := $(CLISRC:%.c=$(B)/%.o)
CLILIBS  = $(shell pkg-config --libs libcurl json-c ncursesw 2>/dev/null)

all: $(B)/mayfly

$(B)/mayfly: $(CLIOBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(CLILIBS)

FMTSRC  += $(CLISRC) $(wildcard ops/cli/*.h)

-include $(CLIOBJ:.o=.d)
