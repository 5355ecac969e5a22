# SPDX-License-Identifier: BSD-2-Clause
# gpuleak: find GPU memory leaks in running processes with uprobes on libcuda.
#
#   make            build ./gpuleak (BPF object embedded as a skeleton)
#   make STATIC=1   build a fully static ./gpuleak for copying onto GPU nodes
#   make SAN=1      build with ASan and UBSan (make test runs the unit and integration
#                   tests with the default build, then again with this one)
#   make demo       install what is missing, build, run gpuleak on a leaking program
#   make test       install what is missing, build, run every test
#   make image      the agent's OCI image from the static binary (.output/image/)
#   make bench      run the CPU benchmarks; OLD=GPULEAK: another build's BPF programs
#                   beside this one's, interleaved, per program and their ratio
#   make install    install gpuleak, its man page and bash/zsh completions under
#                   $(DESTDIR)$(PREFIX) (PREFIX=/usr/local)
#   make format     format the sources (.clang-format); make check-format says what it would change
#   V=1             show full commands
#   WERROR=0        do not fail on warnings in src/ (on by default, as in CI)
#   JOBS=N          make test, demo and bench build N jobs at once (default: one per CPU)

VERSION := 0.1.0
ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')

ifeq ($(STATIC),1)
FLAVOUR := static
else ifeq ($(SAN),1)
FLAVOUR := san
else
FLAVOUR := default
endif

OUTPUT ?= .output
BUILD := $(OUTPUT)/$(FLAVOUR)
CLANG ?= clang
BPFTOOL ?= bpftool
CC ?= cc
PYTHON ?= python3

CFLAGS ?= -g -O2
CFLAGS += -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Wshadow \
	  -Wformat=2 -fno-strict-aliasing -DGPULEAK_VERSION=\"$(VERSION)\"
# src/ is built with -Werror (WERROR=0 to build with a compiler that warns of more)
WERROR ?= 1
SRC_CFLAGS := $(if $(filter 1,$(WERROR)),-Werror)
INCLUDES := -I$(OUTPUT) -Iinclude -Isrc
LDLIBS := -lbpf -ldw -lelf -lz -lncursesw -ltinfo -lstdc++ -lpthread -lm

ifeq ($(STATIC),1)
CFLAGS += -DGPULEAK_STATIC
LDFLAGS += -static
LDLIBS := -lbpf -ldw -lelf -lz -lzstd -llzma -lbz2 -lncursesw -ltinfo -lstdc++ -lpthread -lm
endif
ifeq ($(SAN),1)
CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif

ifeq ($(V),1)
Q :=
msg :=
else
Q := @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

SRCS := $(wildcard src/*/*.c src/*/*/*.c)
OBJS := $(patsubst src/%.c,$(BUILD)/src/%.o,$(SRCS))
LIB_OBJS := $(filter-out $(BUILD)/src/cmd/main.o,$(OBJS))
BPF_SRCS := $(wildcard bpf/*.bpf.c bpf/*.bpf.h) include/gpuleak_abi.h
BPF_OBJ := $(OUTPUT)/gpuleak.bpf.o
# The host's system include directories, after BPF's own (usdt.bpf.h includes <linux/errno.h>).
CLANG_BPF_SYS_INCLUDES := $(shell $(CLANG) -v -E - </dev/null 2>&1 | \
	sed -n '/<...> search starts here:/,/End of search list./{ s| \(/.*\)|-idirafter \1|p }')
SKEL := $(OUTPUT)/gpuleak.skel.h
DEPS_STAMP := $(OUTPUT)/.deps-installed

.PHONY: all deps demo test unit integration integration-san check-static bench clean format \
	check-format fakecuda gpuleak docs install uninstall image
.DEFAULT_GOAL := all

all: gpuleak docs

# The man page and the completions come from the table of subcommands (src/cmd/commands.c),
# through the gpuleak just built: they cannot disagree with it.
MAN_PAGE := $(OUTPUT)/gpuleak.1
BASH_COMPLETION := $(OUTPUT)/gpuleak.bash
ZSH_COMPLETION := $(OUTPUT)/_gpuleak
SCDOC ?= scdoc
PREFIX ?= /usr/local
DESTDIR ?=

docs: $(MAN_PAGE) $(BASH_COMPLETION) $(ZSH_COMPLETION)

$(MAN_PAGE): $(BUILD)/gpuleak | $(OUTPUT)
	$(call msg,SCDOC,$@)
	$(Q)$(BUILD)/gpuleak man > $@.scd && $(SCDOC) < $@.scd > $@.tmp && mv $@.tmp $@

$(BASH_COMPLETION): $(BUILD)/gpuleak | $(OUTPUT)
	$(call msg,GEN,$@)
	$(Q)$(BUILD)/gpuleak completion bash > $@.tmp && mv $@.tmp $@

$(ZSH_COMPLETION): $(BUILD)/gpuleak | $(OUTPUT)
	$(call msg,GEN,$@)
	$(Q)$(BUILD)/gpuleak completion zsh > $@.tmp && mv $@.tmp $@

install: gpuleak docs
	$(Q)install -D -m 0755 gpuleak $(DESTDIR)$(PREFIX)/bin/gpuleak
	$(Q)install -D -m 0644 $(MAN_PAGE) $(DESTDIR)$(PREFIX)/share/man/man1/gpuleak.1
	$(Q)install -D -m 0644 $(BASH_COMPLETION) \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/gpuleak
	$(Q)install -D -m 0644 $(ZSH_COMPLETION) \
		$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_gpuleak

uninstall:
	$(Q)rm -f $(DESTDIR)$(PREFIX)/bin/gpuleak $(DESTDIR)$(PREFIX)/share/man/man1/gpuleak.1 \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/gpuleak \
		$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_gpuleak

deps: $(DEPS_STAMP)

$(DEPS_STAMP): scripts/install-deps
	$(Q)mkdir -p $(OUTPUT)
	$(Q)scripts/install-deps
	$(Q)touch $@

$(BPF_OBJ): bpf/gpuleak.bpf.c $(BPF_SRCS) | $(OUTPUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) -g -O2 -Wall -target bpf -D__TARGET_ARCH_$(ARCH) -Ivmlinux/$(ARCH) -Iinclude \
		-Ibpf $(CLANG_BPF_SYS_INCLUDES) -c $< -o $@.tmp
	$(Q)$(BPFTOOL) gen object $@.linked $@.tmp && rm -f $@.tmp || \
		{ rm -f $@.tmp $@.linked; exit 1; }
	$(Q)$(PYTHON) scripts/check-bpf-stack $@.linked && mv $@.linked $@ || \
		{ rm -f $@.linked; exit 1; }

$(SKEL): $(BPF_OBJ)
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name gpuleak > $@.tmp && mv $@.tmp $@

$(BUILD)/src/%.o: src/%.c $(SKEL)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(SRC_CFLAGS) $(INCLUDES) -MMD -MP -c $< -o $@

$(BUILD)/gpuleak: $(OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

gpuleak: $(BUILD)/gpuleak
	$(Q)cp $< $@.tmp && mv $@.tmp $@
ifeq ($(STATIC),1)
	$(Q)scripts/check-static $@
endif

$(OUTPUT):
	$(Q)mkdir -p $@

-include $(OBJS:.o=.d)

# The CUDA driver stand-in and the workloads that drive it.
include tests/fakecuda/fakecuda.mk
include tests/fuzz/fuzz.mk

# Benchmark programs (bench/run drives them).
include bench/bench.mk

# A "libcuda.so.1" lacking most functions, for the missing-symbols test.
PARTIAL_LIB := $(OUTPUT)/partial/libcuda.so.1
$(PARTIAL_LIB): tests/fakecuda/partial.c
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -O2 -fPIC -shared -fvisibility=hidden -Wl,-soname,libcuda.so.1 $< -o $@

# Unit tests: one cmocka binary per module.
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))

$(BUILD)/tests/%: tests/unit/%.c $(LIB_OBJS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(INCLUDES) -Itests/unit $(LDFLAGS) $< $(LIB_OBJS) $(LDLIBS) -lcmocka \
		-o $@

# TEST_COUNTS=FILE: each suite adds a line "LABEL PASSED FAILED" to FILE (make test's summary).
TEST_COUNTS ?=
SUITE := $(if $(filter 1,$(SAN)),under ASan+UBSan,plain)

unit: deps $(UNIT_BINS)
	$(Q)p=0; for t in $(UNIT_BINS); do echo "== $$t"; \
		(cd tests/unit && ../../$$t) > $(BUILD)/unit.log 2>&1; rc=$$?; cat $(BUILD)/unit.log; \
		n=$$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' $(BUILD)/unit.log); \
		p=$$((p + $${n:-0})); [ $$rc = 0 ] || exit 1; done; \
		echo "unit tests ($(SUITE)): $$p passed, 0 failed" \
		$(if $(TEST_COUNTS),&& echo "unit_$(FLAVOUR) $$p 0" >> $(TEST_COUNTS))

integration: deps gpuleak docs fakecuda $(PARTIAL_LIB) image
	$(Q)GPULEAK=$(CURDIR)/gpuleak GPULEAK_SAN=$(SAN) OUTPUT=$(abspath $(OUTPUT)) \
		$(PYTHON) tests/integration/run.py $(if $(TEST_COUNTS),--counts $(TEST_COUNTS) integration)

# The integration suite again, against gpuleak built with ASan and UBSan (the SAN=1
# flavour, built beside the default one); any sanitizer report fails it. The fuzz tests
# do not run gpuleak (their targets are built with the sanitizers): they run once, in
# 'integration'; so do the benchmarks' smoke tests, which check the benchmark scripts
# (gpuleak's paths they take are the other tests' too).
integration-san: deps gpuleak docs fakecuda $(PARTIAL_LIB) image
	$(Q)$(MAKE) --no-print-directory SAN=1 $(OUTPUT)/san/gpuleak
	$(Q)GPULEAK=$(abspath $(OUTPUT))/san/gpuleak GPULEAK_SAN=1 OUTPUT=$(abspath $(OUTPUT)) \
		$(PYTHON) tests/integration/run.py -x test_fuzz.,test_bench_smoke. \
		$(if $(TEST_COUNTS),--counts $(TEST_COUNTS) integration_san)

# Ends with one line that sums up every suite it ran (scripts/test-summary).
# Each step builds what it needs JOBS at a time; the tests themselves run one at a time
# (a test's recipe starts once its prerequisites are built).
TEST_COUNTS_FILE := $(abspath $(OUTPUT))/test-counts
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
JOBS_MAKE = $(MAKE) --no-print-directory -j$(JOBS)
test: deps
	$(Q)rm -f $(TEST_COUNTS_FILE)
	$(Q)$(JOBS_MAKE) gpuleak docs fakecuda $(PARTIAL_LIB) $(UNIT_BINS)
	$(Q)$(JOBS_MAKE) fakecuda-selftest && echo "selftest 1 0" >> $(TEST_COUNTS_FILE)
	$(Q)$(JOBS_MAKE) TEST_COUNTS=$(TEST_COUNTS_FILE) unit
	$(Q)$(JOBS_MAKE) TEST_COUNTS=$(TEST_COUNTS_FILE) integration
ifneq ($(SAN),1)
	$(Q)$(JOBS_MAKE) SAN=1 TEST_COUNTS=$(TEST_COUNTS_FILE) unit
	$(Q)$(JOBS_MAKE) TEST_COUNTS=$(TEST_COUNTS_FILE) integration-san
endif
	$(Q)scripts/test-summary $(TEST_COUNTS_FILE)

# The agent's image: the static binary alone, built offline with buildah into an OCI
# layout and an oci-archive under $(OUTPUT)/image (tests/integration/test_fleet.py checks it).
image: deps
	$(Q)$(MAKE) --no-print-directory STATIC=1 $(OUTPUT)/static/gpuleak
	$(Q)scripts/build-image $(OUTPUT)/static/gpuleak $(OUTPUT)/image $(VERSION)

check-static: gpuleak
	$(Q)scripts/check-static gpuleak

demo: deps
	$(Q)$(JOBS_MAKE) gpuleak fakecuda
	$(Q)scripts/demo

bench: deps
	$(Q)$(JOBS_MAKE) gpuleak fakecuda
	$(Q)bench/run $(if $(OLD),--old $(OLD))

FORMAT_FILES = $(SRCS) $(wildcard src/*/*.h src/*/*/*.h) bpf/*.c bpf/*.h include/*.h

# .clang-format is the kernel's style at 100 columns; the tree is kept formatted
format:
	$(Q)clang-format -i $(FORMAT_FILES)

# fails, naming the lines, where `make format` would change something
check-format:
	$(Q)clang-format --dry-run -Werror $(FORMAT_FILES)

clean:
	$(Q)rm -rf $(OUTPUT) gpuleak

# Python frames under every interpreter at hand (make test-python-versions).
include tests/integration/python.mk
