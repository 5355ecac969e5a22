#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# gpuleak's benchmarks on a GPU machine, in one command (about 4 minutes; --quick: 2):
#   make STATIC=1            (anywhere; copy the repository with ./gpuleak to the GPU machine)
#   bench/gpu.sh [--quick]   (on the GPU machine, as root, from the repository root)
# Builds bench/alloc_loop.c there (cc, else nvcc), then runs bench/gpu.py against the
# real libcuda: per-call overhead for each stack mode, the step-time slowdown of a
# PyTorch training loop next to _record_memory_history(), attach time. The table goes to
# stdout. LIBCUDA, PYTHON (an interpreter with torch) and GPULEAK override the defaults.
set -eu
cd "$(dirname "$0")/.."

lib=${LIBCUDA:-}
for c in /usr/local/nvidia/lib64/libcuda.so.1 \
	"$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 .*x86-64/ { print $NF; exit }')"; do
	[ -z "$lib" ] && [ -n "$c" ] && [ -e "$c" ] && lib=$c
done
[ -n "$lib" ] || { echo "gpu.sh: no libcuda.so.1 found (set LIBCUDA)" >&2; exit 1; }
py=${PYTHON:-}
for c in /opt/torch/.venv/bin/python python3; do
	[ -z "$py" ] && "$c" -c 'import torch' 2>/dev/null && py=$c
done
[ -n "$py" ] || { echo "gpu.sh: no Python with torch found (set PYTHON)" >&2; exit 1; }
gl=${GPULEAK:-$PWD/gpuleak}
[ -x "$gl" ] || { echo "gpu.sh: $gl missing: build it with 'make STATIC=1'" >&2; exit 1; }

out=$(mktemp -d /tmp/gpuleak-gpu-bench.XXXXXX)
trap 'rm -rf "$out"' EXIT
mkdir -p "$out/bench"
if command -v "${CC:-cc}" >/dev/null 2>&1; then
	"${CC:-cc}" -O2 -g -fno-omit-frame-pointer -pthread bench/alloc_loop.c -ldl \
		-o "$out/bench/alloc_loop"
else
	nvcc -O2 -Xcompiler -fno-omit-frame-pointer -x c bench/alloc_loop.c -ldl -lpthread \
		-o "$out/bench/alloc_loop"
fi
OUTPUT=$out GPULEAK=$gl BENCH_PYTHON=$py "$py" bench/gpu.py --lib "$lib" "$@"
