# SPDX-License-Identifier: BSD-2-Clause
#
# tests/fuzz/fuzz.mk - the recording reader under libFuzzer, included by the top-level
# Makefile. Needs clang's libFuzzer runtime (Debian: libclang-rt-14-dev, pulled in by clang).
#
#   make fuzz                   fuzz for FUZZ_TIME seconds (600); new inputs go to
#                               $(OUTPUT)/fuzz/corpus, crashes to $(OUTPUT)/fuzz/crash-*
#   make fuzz-corpus            rewrite the seed corpus tests/fuzz/corpus/record
#
# The integration tests run the fuzzer for about 25 s on the seed corpus (test_record.py),
# so `make test` builds $(FUZZ_BIN) before them. Every variable here starts with FUZZ_.

FUZZ_OUT := $(OUTPUT)/fuzz
FUZZ_CC ?= clang
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS := -g -O1 -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter \
	       -DGPULEAK_VERSION=\"$(VERSION)\" $(FUZZ_SAN)
FUZZ_OBJS := $(patsubst src/%.c,$(FUZZ_OUT)/src/%.o,$(filter-out src/cmd/main.c,$(SRCS)))
FUZZ_BIN := $(FUZZ_OUT)/fuzz_record
FUZZ_CORPUS := tests/fuzz/corpus/record
FUZZ_TIME ?= 600
FUZZ_RUNTIME = $(shell $(FUZZ_CC) -print-file-name=libclang_rt.fuzzer-$(shell uname -m).a 2>/dev/null)

.PHONY: fuzz fuzz-corpus

$(FUZZ_OUT)/src/%.o: src/%.c $(SKEL)
	$(call msg,CC-FUZZ,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(INCLUDES) -MMD -MP -c $< -o $@

$(FUZZ_BIN): tests/fuzz/fuzz_record.c $(FUZZ_OBJS)
	$(call msg,LINK,$@)
	$(Q)test -f "$(FUZZ_RUNTIME)" || { echo "fuzz: clang's libFuzzer runtime is missing" \
		"(Debian: apt-get install libclang-rt-14-dev)" >&2; exit 1; }
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(INCLUDES) $< $(FUZZ_OBJS) $(LDLIBS) -o $@

$(FUZZ_OUT)/make_corpus: tests/fuzz/make_corpus.c $(FUZZ_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $(INCLUDES) $< $(FUZZ_OBJS) $(LDLIBS) -o $@

fuzz: deps $(FUZZ_BIN)
	$(Q)mkdir -p $(FUZZ_OUT)/corpus
	$(Q)$(FUZZ_BIN) -max_total_time=$(FUZZ_TIME) -max_len=65536 -timeout=20 -rss_limit_mb=4096 \
		-artifact_prefix=$(FUZZ_OUT)/ -print_final_stats=1 $(FUZZ_OUT)/corpus $(FUZZ_CORPUS)

fuzz-corpus: deps $(FUZZ_OUT)/make_corpus
	$(Q)$(FUZZ_OUT)/make_corpus $(FUZZ_CORPUS)

integration: $(FUZZ_BIN)

-include $(FUZZ_OBJS:.o=.d)
