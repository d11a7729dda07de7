/*
 * bench.h - `mayfly bench`: load an operator's own node or cluster with
 * push, pop or request traffic and print rates and latency percentiles,
 * through the generator `make bench` uses (ops/bench/engine.c, roles.c).
 */
#ifndef MAYFLY_CLI_BENCH_H
#define MAYFLY_CLI_BENCH_H

#include "ops/cli/args.h"

/* cli_bench - `mayfly bench MODE [options]`; the exit status. */
int cli_bench(int argc, char **argv, struct cli_globals *g);

#endif
