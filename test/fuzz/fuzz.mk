# fuzz.mk - libFuzzer targets for every decoder of bytes from outside
# (included from the Makefile).
#
#   make fuzz [SECONDS=N]   build each test/fuzz/fuzz_<name>.c with clang
#                           (-fsanitize=fuzzer,address,undefined) into
#                           build/fuzz/ and run it N seconds (default 60)
#
# A target starts from its seeds, test/fuzz/<name>/ (with regressions/, the
# inputs that once crashed it); what it finds goes to build/fuzz/corpus/, a
# crash to build/fuzz/crash/ (copy it into regressions/ with the fix).
# make test replays the seeds and regressions: test_fuzz_replay links every
# target (gcc, ASan, the build's mode) under its own name and runs each on
# every file of its folder.

FUZZCC    := clang
FZ        := build/fuzz
FUZZSRC   := $(wildcard test/fuzz/fuzz_*.c)
FUZZNAMES := $(patsubst test/fuzz/fuzz_%.c,%,$(FUZZSRC))
FUZZHELP  := test/http/oracle.c
FUZZSAN   := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZFLAGS := $(BASE) -O1 -g -fno-omit-frame-pointer $(FUZZSAN)
FUZZOBJ   := $(patsubst %.c,$(FZ)/%.o,$(LIBSRC) $(FUZZHELP))
FUZZBIN   := $(FUZZNAMES:%=$(FZ)/fuzz_%)
SECONDS   ?= 60

.PHONY: fuzz fuzz-build
fuzz: fuzz-build
	test/fuzz/run.sh $(FZ) $(SECONDS) $(FUZZNAMES)

fuzz-build: $(FUZZBIN)

# The code under test gets libFuzzer's coverage hooks, not its main().
$(FZ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZCC) $(FUZZFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<

$(FZ)/libmayfly.a: $(filter-out $(FZ)/test/%,$(FUZZOBJ))
	rm -f $@
	$(AR) rcs $@ $^

# Kept, not removed as intermediates: the next make fuzz needs no rebuild.
.SECONDARY: $(FUZZNAMES:%=$(FZ)/test/fuzz/fuzz_%.o) $(FZ)/test/http/oracle.o

$(FZ)/fuzz_%: $(FZ)/test/fuzz/fuzz_%.o $(FZ)/test/http/oracle.o $(FZ)/libmayfly.a
	$(FUZZCC) $(FUZZFLAGS) -fsanitize=fuzzer -o $@ $^ $(LIBS)

# The replay: each target's entry points renamed after it, in one binary.
FUZZREPLAYOBJ := $(FUZZNAMES:%=$(B)/test/fuzz/fuzz_%.o)

$(B)/test/fuzz/fuzz_%.o: test/fuzz/fuzz_%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DLLVMFuzzerTestOneInput=fuzz_one_$* \
	    -DLLVMFuzzerInitialize=fuzz_init_$* -MMD -MP -c -o $@ $<

$(B)/test/fuzz/test_fuzz_replay: test/fuzz/test_fuzz_replay.c \
		$(FUZZREPLAYOBJ) $(B)/libmayfly.a $(TESTLIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DFUZZ_DIR='"$(CURDIR)/test/fuzz"' \
	    -DFUZZ_TARGETS='$(foreach n,$(FUZZNAMES),X($(n)))' -o $@ $< \
	    $(FUZZREPLAYOBJ) $(TESTLIB) $(B)/libmayfly.a $(LIBS) -lcriterion

-include $(FUZZOBJ:.o=.d) $(FUZZREPLAYOBJ:.o=.d) \
    $(FUZZNAMES:%=$(FZ)/test/fuzz/fuzz_%.d)
