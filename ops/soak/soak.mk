# soak.mk - `make soak MINUTES=N`: three nodes under load with faults
# (ops/soak/soak.sh; SOAK.md).
#
#   make soak MINUTES=30 RATE=24000   offered msg/s (default: 70 % of the
#                                     34,400 msg/s the soak's three nodes and
#                                     driver reached on this 2-core machine
#                                     with no faults, SOAK.md)
#   FAULT_EVERY=S OUT=DIR PORT=P      see ops/soak/soak.sh
#
# The driver build/soak/mayfly-soak is also built with the tests: `make
# test` runs a two-minute smoke (test/ops/test_soak.c).

SOAK_BIN  := build/soak/mayfly-soak
MINUTES   ?= 30
RATE      ?= 24000

$(SOAK_BIN): ops/soak/soak.c ops/soak/charge.h ops/soak/soak.mk
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -pthread -I. $(WARN) -O2 -g -o $@ $< -lcurl

tests: $(SOAK_BIN)

soak:
	ops/install-deps.sh soak
	$(MAKE) -j2 MODE=release all
	$(MAKE) $(SOAK_BIN)
	MINUTES=$(MINUTES) RATE=$(RATE) ops/soak/soak.sh

.PHONY: soak
