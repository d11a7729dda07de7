# mayfly - build, test, run.
#
#   make            release build: build/release/mayflyd and mayfly (the client)
#   make asan       ASan+UBSan build: build/asan/mayflyd (what make test runs)
#   make test       install missing packages, build asan, run every suite
#   make run        install missing packages, build, run one node on 127.0.0.1:6632
#   make bench      the side-by-side benchmark (ops/bench/)
#   make fuzz       every libFuzzer target SECONDS=N seconds (test/fuzz/fuzz.mk)
#   make deb        the Debian package: build/mayfly_<version>_<arch>.deb
#   make soak       three nodes under load with faults (ops/soak/, SOAK.md)
#   make openapi-lint  lint worker/openapi/openapi.json (ops/openapi/openapi.mk)
#
# Every .c under shm/ http/ consensus/ worker/ master/ is part of mayflyd;
# every test/<suite>/test_*.c is one Criterion binary linked against an
# archive of all of them but master/main.c.

CC      ?= cc
PKGS    := libmicrohttpd json-c lmdb cmph libcurl libxxhash nettle gnutls \
           libjwt-gnutls libsystemd
WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
           -Wmissing-prototypes -Wformat=2 -Wundef -Wvla
BASE    := -std=c11 -D_GNU_SOURCE -pthread -I. $(WARN)
LIBS     = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread -lm

MODE    ?= release
ifeq ($(MODE),asan)
OPT     := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
           -fno-sanitize-recover=undefined
else
OPT     := -O2 -g
endif
CFLAGS  += $(BASE) $(OPT)
LDFLAGS += $(OPT)

B       := build/$(MODE)
SRC     := $(wildcard shm/*.c http/*.c consensus/*.c worker/*.c master/*.c)
LIBSRC  := $(filter-out master/main.c,$(SRC))
PAGEOBJ := $(B)/worker/status_page_data.o $(B)/worker/openapi_data.o
OBJ     := $(SRC:%.c=$(B)/%.o) $(PAGEOBJ)
LIBOBJ  := $(LIBSRC:%.c=$(B)/%.o) $(PAGEOBJ)
TESTSRC := $(wildcard test/*/test_*.c)
TESTBIN := $(patsubst test/%.c,$(B)/test/%,$(TESTSRC))
# test/fuzz/fuzz_*.c are libFuzzer targets (test/fuzz/fuzz.mk), not helpers.
TESTLIB := $(patsubst %.c,$(B)/%.o,$(filter-out $(TESTSRC) test/fuzz/%,$(wildcard test/*/*.c)))

.PHONY: all asan test test-only run bench deps clean format format-check
all: $(B)/mayflyd

asan:
	$(MAKE) MODE=asan all tests

tests: $(TESTBIN)

# MHD_queue_response is exported so that libmicrohttpd's own call binds to
# ours (http/edge_answer.h).
$(B)/mayflyd: $(OBJ)
	$(CC) $(LDFLAGS) -Wl,--export-dynamic-symbol=MHD_queue_response -o $@ $^ $(LIBS)

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

# The status page (worker/status_page/): its HTML, CSS and JavaScript become
# one C array in a generated source (embed.sh says how, and why not xxd).
$(B)/worker/status_page_data.c: worker/status_page/embed.sh \
		$(wildcard worker/status_page/*.html worker/status_page/*.css worker/status_page/*.js)
	@mkdir -p $(dir $@)
	sh worker/status_page/embed.sh worker/status_page > $@.tmp && mv $@.tmp $@

$(B)/worker/status_page_data.o: $(B)/worker/status_page_data.c worker/status_page.h
	$(CC) $(CFLAGS) -c -o $@ $<

# The OpenAPI document (worker/openapi/), one C array likewise.
$(B)/worker/openapi_data.c: worker/openapi/embed.sh worker/openapi/openapi.json
	@mkdir -p $(dir $@)
	sh worker/openapi/embed.sh worker/openapi/openapi.json > $@.tmp && mv $@.tmp $@

$(B)/worker/openapi_data.o: $(B)/worker/openapi_data.c worker/openapi.h
	$(CC) $(CFLAGS) -c -o $@ $<

# Tests link a static archive, so each pulls in only the objects it uses.
$(B)/libmayfly.a: $(LIBOBJ)
	rm -f $@
	$(AR) rcs $@ $^

$(B)/test/%: test/%.c $(B)/libmayfly.a $(TESTLIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(TESTLIB) $(B)/libmayfly.a $(LIBS) -lcriterion -lcurl

deps:
	ops/install-deps.sh test

test: deps
	$(MAKE) openapi-deps
	$(MAKE) MODE=asan all tests
	test/run-all.sh build/asan

test-only:
	$(MAKE) openapi-deps
	$(MAKE) MODE=asan all tests
	test/run-all.sh build/asan

run:
	ops/install-deps.sh build
	$(MAKE) all
	$(B)/mayflyd -o listen=127.0.0.1:6632

FMTSRC  := $(SRC) $(wildcard */*.h test/*/*.c test/*/*.h ops/bench/*.c ops/bench/*.h ops/soak/*.c)

format:
	clang-format -i $(FMTSRC)

format-check:
	clang-format --dry-run --Werror $(FMTSRC)

clean:
	rm -rf build

-include $(OBJ:.o=.d) $(TESTLIB:.o=.d)
-include ops/ops.mk
-include ops/cli/cli.mk
-include ops/deb.mk
-include ops/bench/bench.mk
include test/fuzz/fuzz.mk
-include ops/soak/soak.mk
-include ops/openapi/openapi.mk

# make sim [SEEDS=N] [STEPS=K] [FIRST=F]: soak the raft simulator past the
# seeds make test runs: N seeds per cluster size (3 and 5 nodes), K faulty
# steps each, from the F-th seed on.  MAYFLY_SIM_SEED=S replays one seed.
.PHONY: sim
sim:
	$(MAKE) MODE=asan build/asan/test/consensus/test_raft_sim
	MAYFLY_SIM_SEEDS=$(or $(SEEDS),20000) MAYFLY_SIM_STEPS=$(or $(STEPS),600) \
	MAYFLY_SIM_FIRST=$(or $(FIRST),5000) \
	build/asan/test/consensus/test_raft_sim -j2 --full-stats
