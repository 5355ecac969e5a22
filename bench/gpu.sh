#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# gpuleak's benchmarks on a GPU machine, as root, from the repository root (gpuleak built
# with 'make STATIC=1' anywhere and copied along):
#   bench/gpu.sh [--small | --large] [OUTDIR]   step time of training under each way of
#                        watching it (bench/gpu_train.py): bench/torch_train.py's model
#                        (~20 ms a step; REPS_SMALL reps, 8) and a larger one (~300 ms a
#                        step; REPS_LARGE reps, 5): untraced, default attach (between
#                        windows and inside its first), serve, --tensors full and
#                        _record_memory_history(), interleaved in one training process
#                        (the small model with an untraced block on either side of
#                        each watched one: --design aba). About 6 + 5 minutes. OUTDIR
#                        gets the JSON of each model; bench/gpu_train.py --merge pools
#                        the reps of several runs.
#   bench/gpu.sh --calls [--quick]   the older per-call, training and attach figures
#                        (bench/gpu.py: driver-call overhead per stack mode, attach time).
# LIBCUDA, PYTHON (an interpreter with torch) and GPULEAK override the defaults.
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

if [ "${1:-}" = "--calls" ]; then
	shift
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
	exit
fi

models="small large"
case "${1:-}" in
--small) models=small; shift ;;
--large) models=large; shift ;;
esac
dir=${1:-.}
mkdir -p "$dir"
for m in $models; do
	if [ "$m" = small ]; then
		GPULEAK=$gl "$py" bench/gpu_train.py --python "$py" --reps "${REPS_SMALL:-8}" \
			--design aba --json "$dir/train_small.json"
	else
		GPULEAK=$gl "$py" bench/gpu_train.py --python "$py" --large --reps "${REPS_LARGE:-5}" \
			--json "$dir/train_large.json"
	fi
done
