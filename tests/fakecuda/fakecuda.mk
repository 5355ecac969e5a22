# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# tests/fakecuda/fakecuda.mk - builds the CUDA driver stand-in and the test workloads.
#
# Included by the top-level Makefile, or run alone from the repository root:
#   make -f tests/fakecuda/fakecuda.mk OUTPUT=.output CC=cc fakecuda
# Reads OUTPUT, CC, CFLAGS and V; defines the phony targets fakecuda (build) and
# fakecuda-selftest (build, then run tests/fakecuda/selftest.sh). Produces
#   $(OUTPUT)/fakecuda/libcuda.so.1 and its libcuda.so link
#   $(OUTPUT)/workloads/wl_*      linked to it with rpath $ORIGIN/../fakecuda
# Every variable here starts with FAKECUDA_ so that it can be included anywhere.

FAKECUDA_SAVED_GOAL := $(.DEFAULT_GOAL)

OUTPUT ?= .output

FAKECUDA_SRC := tests/fakecuda
FAKECUDA_WL_SRC := tests/workloads
FAKECUDA_OUT := $(OUTPUT)/fakecuda
FAKECUDA_WL_OUT := $(OUTPUT)/workloads
FAKECUDA_LIB := $(FAKECUDA_OUT)/libcuda.so.1
FAKECUDA_OBJS := $(patsubst $(FAKECUDA_SRC)/%.c,$(FAKECUDA_OUT)/%.o,\
		 $(wildcard $(FAKECUDA_SRC)/fc_*.c))
FAKECUDA_WORKLOADS := $(patsubst $(FAKECUDA_WL_SRC)/%.c,$(FAKECUDA_WL_OUT)/%,\
		      $(wildcard $(FAKECUDA_WL_SRC)/wl_*.c))

# -fno-ipa-icf: identical exported bodies must stay separate functions (gcc only).
FAKECUDA_IS_CLANG := $(findstring clang,$(shell $(CC) --version 2>/dev/null | head -n 1))
FAKECUDA_NO_ICF := $(if $(FAKECUDA_IS_CLANG),,-fno-ipa-icf)
FAKECUDA_WARN := -O2 -g -Wall -Wextra -Werror
FAKECUDA_LIB_CFLAGS := $(CFLAGS) $(FAKECUDA_WARN) -fPIC -fvisibility=hidden \
		       -fno-omit-frame-pointer $(FAKECUDA_NO_ICF) -pthread -MMD -MP
# Workloads keep every allocation site a real frame: no inlining, cloning or tail calls.
FAKECUDA_WL_CFLAGS := $(CFLAGS) $(FAKECUDA_WARN) -fno-omit-frame-pointer \
		      -fno-optimize-sibling-calls $(FAKECUDA_NO_ICF) -pthread -MMD -MP \
		      -I$(FAKECUDA_SRC) -I$(FAKECUDA_WL_SRC)
FAKECUDA_WL_LIBS := -rdynamic -L$(FAKECUDA_OUT) -lcuda -Wl,-rpath,'$$ORIGIN/../fakecuda' -ldl

ifeq ($(V),1)
FAKECUDA_Q :=
fakecuda_msg =
else
FAKECUDA_Q := @
fakecuda_msg = @printf '  %-8s %s\n' "$(1)" "$(2)"
endif

.PHONY: fakecuda fakecuda-selftest

fakecuda: $(FAKECUDA_LIB) $(FAKECUDA_OUT)/libcuda.so $(FAKECUDA_WORKLOADS)

fakecuda-selftest: fakecuda
	$(FAKECUDA_Q)$(FAKECUDA_SRC)/selftest.sh $(OUTPUT)

$(FAKECUDA_OUT)/%.o: $(FAKECUDA_SRC)/%.c
	$(call fakecuda_msg,CC,$@)
	$(FAKECUDA_Q)mkdir -p $(@D)
	$(FAKECUDA_Q)$(CC) $(FAKECUDA_LIB_CFLAGS) -c $< -o $@

# -Bsymbolic: a call inside the library never goes through another exported entry.
$(FAKECUDA_LIB): $(FAKECUDA_OBJS)
	$(call fakecuda_msg,LD,$@)
	$(FAKECUDA_Q)$(CC) $(CFLAGS) -shared -pthread -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic \
		-o $@ $(FAKECUDA_OBJS)

$(FAKECUDA_OUT)/libcuda.so: $(FAKECUDA_LIB)
	$(FAKECUDA_Q)ln -sf libcuda.so.1 $@

$(FAKECUDA_WL_OUT)/wl.o: $(FAKECUDA_WL_SRC)/wl.c
	$(call fakecuda_msg,CC,$@)
	$(FAKECUDA_Q)mkdir -p $(@D)
	$(FAKECUDA_Q)$(CC) $(FAKECUDA_WL_CFLAGS) -c $< -o $@

# wl_dlopen loads the stand-in itself: it must not be linked to it.
$(FAKECUDA_WL_OUT)/wl_dlopen: FAKECUDA_WL_LIBS := -rdynamic -ldl
# The demo loads whichever libcuda it is given, the real one included.
$(FAKECUDA_WL_OUT)/wl_demo: FAKECUDA_WL_LIBS := -ldl

# PyTorch's libc10_cuda.so as far as its USDT probes go, and the workload using it.
FAKECUDA_TORCH_LIB := $(OUTPUT)/faketorch/libc10_cuda.so
$(FAKECUDA_TORCH_LIB): $(FAKECUDA_SRC)/faketorch.c
	$(call fakecuda_msg,LD,$@)
	$(FAKECUDA_Q)mkdir -p $(@D)
	$(FAKECUDA_Q)$(CC) $(CFLAGS) $(FAKECUDA_WARN) -fPIC -shared -fvisibility=hidden \
		-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -pthread -o $@ $<
$(FAKECUDA_WL_OUT)/wl_torch: $(FAKECUDA_TORCH_LIB)
$(FAKECUDA_WL_OUT)/wl_torch: FAKECUDA_WL_LIBS += -L$(OUTPUT)/faketorch -lc10_cuda \
	-Wl,-rpath,'$$ORIGIN/../faketorch'
fakecuda: $(FAKECUDA_TORCH_LIB)

# A library outside PyTorch's allocator that allocates device memory itself, named as NCCL is.
FAKECUDA_NCCL_LIB := $(FAKECUDA_WL_OUT)/libnccl.so.2
$(FAKECUDA_NCCL_LIB): $(FAKECUDA_WL_SRC)/libnccl_standin.c $(FAKECUDA_OUT)/libcuda.so
	$(call fakecuda_msg,LD,$@)
	$(FAKECUDA_Q)mkdir -p $(@D)
	$(FAKECUDA_Q)$(CC) $(CFLAGS) $(FAKECUDA_WARN) -I$(FAKECUDA_SRC) -fPIC -shared \
		-fvisibility=hidden -fno-omit-frame-pointer -Wl,-soname,libnccl.so.2 -o $@ $< \
		-L$(FAKECUDA_OUT) -lcuda -Wl,-rpath,'$$ORIGIN/../fakecuda'
$(FAKECUDA_WL_OUT)/wl_explain: $(FAKECUDA_TORCH_LIB) $(FAKECUDA_NCCL_LIB)
$(FAKECUDA_WL_OUT)/wl_explain: FAKECUDA_WL_LIBS += -L$(OUTPUT)/faketorch -lc10_cuda \
	-Wl,-rpath,'$$ORIGIN/../faketorch' $(FAKECUDA_NCCL_LIB) -Wl,-rpath,'$$ORIGIN'
$(FAKECUDA_WL_OUT)/wl_ranks: $(FAKECUDA_NCCL_LIB)
$(FAKECUDA_WL_OUT)/wl_ranks: FAKECUDA_WL_LIBS += $(FAKECUDA_NCCL_LIB) -Wl,-rpath,'$$ORIGIN'
fakecuda: $(FAKECUDA_NCCL_LIB)

# XLA's runtime as far as its allocation patterns go, named as jaxlib's is.
FAKECUDA_XLA_LIB := $(FAKECUDA_WL_OUT)/jaxlib/xla_extension.so
$(FAKECUDA_XLA_LIB): $(FAKECUDA_WL_SRC)/libxla_standin.c $(FAKECUDA_OUT)/libcuda.so
	$(call fakecuda_msg,LD,$@)
	$(FAKECUDA_Q)mkdir -p $(@D)
	$(FAKECUDA_Q)$(CC) $(CFLAGS) $(FAKECUDA_WARN) -I$(FAKECUDA_SRC) -fPIC -shared -pthread \
		-fvisibility=hidden -fno-omit-frame-pointer -fno-optimize-sibling-calls \
		-Wl,-soname,xla_extension.so -o $@ $< \
		-L$(FAKECUDA_OUT) -lcuda -Wl,-rpath,'$$ORIGIN/../../fakecuda'
$(FAKECUDA_WL_OUT)/wl_frameworks: $(FAKECUDA_XLA_LIB)
$(FAKECUDA_WL_OUT)/wl_frameworks: FAKECUDA_WL_LIBS += $(FAKECUDA_XLA_LIB) \
	-Wl,-rpath,'$$ORIGIN/jaxlib'
fakecuda: $(FAKECUDA_XLA_LIB)

$(FAKECUDA_WL_OUT)/%: $(FAKECUDA_WL_SRC)/%.c $(FAKECUDA_WL_OUT)/wl.o $(FAKECUDA_OUT)/libcuda.so
	$(call fakecuda_msg,CC,$@)
	$(FAKECUDA_Q)$(CC) $(FAKECUDA_WL_CFLAGS) -o $@ $< $(FAKECUDA_WL_OUT)/wl.o \
		$(FAKECUDA_WL_LIBS)

-include $(FAKECUDA_OBJS:.o=.d) $(FAKECUDA_WL_OUT)/wl.d \
	 $(addsuffix .d,$(FAKECUDA_WORKLOADS))

# Leave the including Makefile's default goal alone; alone, build everything.
ifeq ($(FAKECUDA_SAVED_GOAL),)
ifeq ($(notdir $(firstword $(MAKEFILE_LIST))),fakecuda.mk)
FAKECUDA_SAVED_GOAL := fakecuda
endif
endif
.DEFAULT_GOAL := $(FAKECUDA_SAVED_GOAL)

# wl_nofp and its two shared libraries are built as the CUDA and PyTorch libraries are:
# -O2 without frame pointers (with .eh_frame). libnofp_outer.so calls libnofp_inner.so,
# which calls the stand-in.
FAKECUDA_NOFP_CFLAGS := $(filter-out -fno-omit-frame-pointer,$(FAKECUDA_WL_CFLAGS)) \
			-fomit-frame-pointer
FAKECUDA_NOFP_INNER := $(FAKECUDA_WL_OUT)/libnofp_inner.so
FAKECUDA_NOFP_OUTER := $(FAKECUDA_WL_OUT)/libnofp_outer.so

$(FAKECUDA_NOFP_INNER): $(FAKECUDA_WL_SRC)/libnofp_inner.c $(FAKECUDA_OUT)/libcuda.so
	$(call fakecuda_msg,CC,$@)
	$(FAKECUDA_Q)mkdir -p $(@D)
	$(FAKECUDA_Q)$(CC) $(FAKECUDA_NOFP_CFLAGS) -fPIC -shared -o $@ $< -L$(FAKECUDA_OUT) -lcuda \
		-Wl,-rpath,'$$ORIGIN/../fakecuda'

$(FAKECUDA_NOFP_OUTER): $(FAKECUDA_WL_SRC)/libnofp_outer.c $(FAKECUDA_NOFP_INNER)
	$(call fakecuda_msg,CC,$@)
	$(FAKECUDA_Q)$(CC) $(FAKECUDA_NOFP_CFLAGS) -fPIC -shared -o $@ $< -L$(FAKECUDA_WL_OUT) \
		-lnofp_inner -Wl,-rpath,'$$ORIGIN'

$(FAKECUDA_WL_OUT)/wl_nofp: private FAKECUDA_WL_CFLAGS := $(FAKECUDA_NOFP_CFLAGS)
$(FAKECUDA_WL_OUT)/wl_nofp: private FAKECUDA_WL_LIBS += -L$(FAKECUDA_WL_OUT) -lnofp_outer \
	-Wl,-rpath,'$$ORIGIN'
$(FAKECUDA_WL_OUT)/wl_nofp: $(FAKECUDA_NOFP_OUTER)
fakecuda: $(FAKECUDA_NOFP_OUTER)
