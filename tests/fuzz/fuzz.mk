# SPDX-License-Identifier: BSD-2-Clause
#
# tests/fuzz/fuzz.mk - libFuzzer targets for every parser of outside data, included by the
# top-level Makefile. Needs clang's libFuzzer runtime (Debian: libclang-rt-14-dev, pulled in
# by clang). One binary per target, $(OUTPUT)/fuzz/fuzz_<target>, from tests/fuzz/fuzz_<target>.c;
# the seed corpus of each is tests/fuzz/corpus/<target>/.
#
#   make fuzz                   fuzz every target for FUZZ_TIME/N seconds each (FUZZ_TIME: 600);
#                               new inputs go to $(OUTPUT)/fuzz/corpus/<target>, crashes to
#                               $(OUTPUT)/fuzz/<target>-crash-*
#   make fuzz FUZZ_TARGET=elf   fuzz one target for FUZZ_TIME seconds
#   make fuzz-corpus            rewrite the generated seeds (record, books, elf, python); the
#                               others, and crash reproducers, are kept as they are
#
# The integration tests run every target briefly on its seed corpus (test_fuzz.py),
# so `make test` builds $(FUZZ_BINS) before them.
# Every variable here starts with FUZZ_.

FUZZ_OUT := $(OUTPUT)/fuzz
FUZZ_CC ?= clang
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS := -g -O1 -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter \
	       -DGPULEAK_VERSION=\"$(VERSION)\" $(FUZZ_SAN)
FUZZ_OBJS := $(patsubst src/%.c,$(FUZZ_OUT)/src/%.o,$(filter-out src/cmd/main.c,$(SRCS)))
FUZZ_TARGETS := record procfs cgroup elf python http nvsmi books unwind census
FUZZ_BINS := $(patsubst %,$(FUZZ_OUT)/fuzz_%,$(FUZZ_TARGETS))
FUZZ_BIN := $(FUZZ_OUT)/fuzz_record
FUZZ_TIME ?= 600
FUZZ_TARGET ?=
FUZZ_RUN := $(if $(FUZZ_TARGET),$(FUZZ_TARGET),$(FUZZ_TARGETS))
FUZZ_EACH = $(shell echo $$(( $(FUZZ_TIME) / $(words $(FUZZ_RUN)) )))
FUZZ_RUNTIME = $(shell $(FUZZ_CC) -print-file-name=libclang_rt.fuzzer-$(shell uname -m).a 2>/dev/null)
# the Python target serves the code objects from its input instead of another process's memory
FUZZ_LDFLAGS_python := -Wl,--wrap=pyproc__read

.PHONY: fuzz fuzz-corpus

$(FUZZ_OUT)/src/%.o: src/%.c $(SKEL)
	$(call msg,CC-FUZZ,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $(SRC_CFLAGS) -fsanitize=fuzzer-no-link $(INCLUDES) -MMD -MP -c $< -o $@

$(FUZZ_OUT)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(FUZZ_OBJS)
	$(call msg,LINK,$@)
	$(Q)test -f "$(FUZZ_RUNTIME)" || { echo "fuzz: clang's libFuzzer runtime is missing" \
		"(Debian: apt-get install libclang-rt-14-dev)" >&2; exit 1; }
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(INCLUDES) $< $(FUZZ_OBJS) $(LDLIBS) \
		$(FUZZ_LDFLAGS_$*) -o $@

$(FUZZ_OUT)/make_%: tests/fuzz/make_%.c $(FUZZ_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $(INCLUDES) $< $(FUZZ_OBJS) $(LDLIBS) -o $@

fuzz: deps $(patsubst %,$(FUZZ_OUT)/fuzz_%,$(FUZZ_RUN))
	$(Q)for t in $(FUZZ_RUN); do \
		echo "== fuzz_$$t for $(FUZZ_EACH) s"; \
		mkdir -p $(FUZZ_OUT)/corpus/$$t && \
		$(FUZZ_OUT)/fuzz_$$t -max_total_time=$(FUZZ_EACH) -max_len=65536 -timeout=20 \
			-rss_limit_mb=4096 -artifact_prefix=$(FUZZ_OUT)/$$t- -print_final_stats=1 \
			$(FUZZ_OUT)/corpus/$$t tests/fuzz/corpus/$$t || exit 1; \
	done

fuzz-corpus: deps $(FUZZ_OUT)/make_corpus $(FUZZ_OUT)/make_books_seeds
	$(Q)$(FUZZ_OUT)/make_corpus tests/fuzz/corpus/record
	$(Q)$(FUZZ_OUT)/make_books_seeds tests/fuzz/corpus/books
	$(Q)tests/fuzz/make_elf_seeds tests/fuzz/corpus/elf $(CC)
	$(Q)$(PYTHON) tests/fuzz/make_py_seeds.py tests/fuzz/corpus/python

integration: $(FUZZ_BINS)

-include $(FUZZ_OBJS:.o=.d)
