# SPDX-License-Identifier: BSD-2-Clause
#
# bench/bench.mk - builds the benchmark programs; included by the top-level Makefile.
#
#   $(OUTPUT)/bench/alloc_loop    the cuMemAlloc_v2/cuMemFree_v2 load (fixed flags, any
#                                 flavour: its timings must not depend on SAN=1)
#   $(OUTPUT)/bench/books_bench   records/s through books__apply, linked with the src
#                                 objects of the current flavour
#   $(OUTPUT)/bench/sym_bench     the cost of symbolizing frames in a large library
#   $(OUTPUT)/bench/mmap_loop     mmap/munmap/mprotect timed: the cost of the kernel hook on
#                                 the mmap lock to processes gpuleak does not trace
# bench-progs builds both; bench/run calls it, and `make integration` builds them so that
# the harness's smoke test finds them.

BENCH_OUT := $(OUTPUT)/bench
BENCH_ALLOC_LOOP := $(BENCH_OUT)/alloc_loop
BENCH_BOOKS := $(BENCH_OUT)/books_bench
BENCH_SYM := $(BENCH_OUT)/sym_bench
BENCH_MMAP := $(BENCH_OUT)/mmap_loop
BENCH_CFLAGS := -O2 -g -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -fno-omit-frame-pointer \
		-fno-optimize-sibling-calls -pthread

.PHONY: bench-progs

bench-progs: $(BENCH_ALLOC_LOOP) $(BENCH_BOOKS) $(BENCH_SYM) $(BENCH_MMAP)

integration: bench-progs

$(BENCH_ALLOC_LOOP): bench/alloc_loop.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(BENCH_CFLAGS) $< -ldl -o $@

$(BENCH_MMAP): bench/mmap_loop.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(BENCH_CFLAGS) $< -o $@

$(BUILD)/bench/books_bench: bench/books_bench.c $(LIB_OBJS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(INCLUDES) $(LDFLAGS) $< $(LIB_OBJS) $(LDLIBS) -o $@

$(BENCH_BOOKS): $(BUILD)/bench/books_bench
	$(Q)mkdir -p $(@D)
	$(Q)cp $< $@.tmp && mv $@.tmp $@

$(BUILD)/bench/sym_bench: bench/sym_bench.c $(LIB_OBJS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(INCLUDES) $(LDFLAGS) $< $(LIB_OBJS) $(LDLIBS) -o $@

$(BENCH_SYM): $(BUILD)/bench/sym_bench
	$(Q)mkdir -p $(@D)
	$(Q)cp $< $@.tmp && mv $@.tmp $@
