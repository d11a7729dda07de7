# bench.mk - `make bench`: mayfly side by side with Redis and NATS.
#
#   make bench            full run (under 10 minutes)
#   make bench QUICK=1    short windows (under 2 minutes)
#   make bench ONLY=rpc   some scenarios (http,push,backlog,drain,rpc,wake,
#                         inboxes,parked,stream,presence; rpc1 or rpc32 for one rpc row's
#                         rows, request1 or request32 for the verb's alone;
#                         memory for the memory rows alone, each measured on
#                         a mayflyd of its own)
#   make bench UPDATE=1   also write the table into BENCHMARKS.md
#   make bench CLUSTER=1  three nodes on 127.0.0.1-3 instead: push, drain
#                         and rpc sent to the owner and through a non-owner
#                         (ops/bench/cluster.c; QUICK and ONLY apply)
#   make bench PIPELINE=1 rpc clients of mayfly (the cluster rows' too) and
#                         Redis pipeline their steps (push + long-poll in
#                         one write; see BENCHMARKS.md, rpc)
#
# Installs the bench packages, builds the release server and the load
# generator (build/bench/mayfly-bench, -O2, the project's warning flags),
# then ops/bench/run.sh starts every server on spare ports and runs it.
# Results: the table on stdout, build/bench/results.json, results.md.

BENCH_DIR    := build/bench
BENCH_BIN    := $(BENCH_DIR)/mayfly-bench
BENCH_SRC    := $(wildcard ops/bench/*.c)
BENCH_CFLAGS := -std=c11 -D_GNU_SOURCE -pthread -I. $(WARN) -O2 -g
# build/release/libmayfly.a: the owner rule (shm/owner.c) for cluster.c
BENCH_MAYFLY := build/release/libmayfly.a
BENCH_LIBS    = $(BENCH_MAYFLY) -lxxhash -lhiredis -lnats \
                $(shell pkg-config --libs libmicrohttpd gnutls 2>/dev/null) \
                -lpthread -lm

$(BENCH_BIN): $(BENCH_SRC) ops/bench/bench.h ops/bench/bench.mk $(BENCH_MAYFLY)
	@mkdir -p $(BENCH_DIR)
	$(CC) $(BENCH_CFLAGS) -o $@ $(BENCH_SRC) $(BENCH_LIBS)

bench:
	ops/install-deps.sh bench
	$(MAKE) -j$(shell nproc) MODE=release all
	$(MAKE) MODE=release $(BENCH_BIN)
	QUICK="$(QUICK)" ONLY="$(ONLY)" UPDATE="$(UPDATE)" PIPELINE="$(PIPELINE)" \
	    CLUSTER="$(CLUSTER)" \
	    ops/bench/run.sh
