#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# gpuleak's benchmarks on a GPU machine, as root, from the repository root (gpuleak built
# with 'make STATIC=1' anywhere and copied along):
#   bench/gpu.sh [--small | --large] [--phases P,P] [--seconds S] [OUTDIR] [-- OPTION...]
#                        step time of training under each way of watching it
#                        (bench/gpu_train.py): bench/torch_train.py's model (~20 ms a
#                        step; REPS_SMALL reps, 8) and a larger one (~200 ms a step;
#                        REPS_LARGE reps, 5): untraced, default attach (between windows
#                        and inside its first), serve, --tensors full and
#                        _record_memory_history(), interleaved in one training process,
#                        each watched block between two untraced ones (--design aba).
#                        About 6 + 5 minutes. --phases: those phases alone (untraced
#                        among them); --seconds S: reps until S seconds are up instead of
#                        a count. On a machine of 12 CPUs or more the training process is
#                        kept on CPUs 2-9. OUTDIR gets the JSON of each model; options
#                        after -- go to gpu_train.py as they are. To resolve 1 % on the
#                        small model, run e.g. '--small --phases untraced,attach-idle
#                        --seconds 460 -- --tensor-window 100ms --settle 5' a few times
#                        and pool the runs: bench/gpu_train.py --merge (bench/RESULTS.md
#                        section 7 has the runs and their figures).
#   bench/gpu.sh --calls [--quick]   the older per-call, training and attach figures
#                        (bench/gpu.py: driver-call overhead per stack mode, attach time).
# LIBCUDA, PYTHON (an interpreter with torch) and GPULEAK override the defaults.
set -eu
cd "$(dirname "$0")/.."

models="small large" phases= seconds= dir=. calls=
while [ $# -gt 0 ]; do
	case "$1" in
	--calls) calls=1; shift; break ;; # the rest is bench/gpu.py's
	--small | --large) models=${1#--}; shift ;;
	--phases | --seconds)
		[ $# -ge 2 ] || { echo "gpu.sh: $1 needs a value" >&2; exit 2; }
		[ "$1" = --phases ] && phases=$2 || seconds=$2
		shift 2 ;;
	--) shift; break ;;
	-*) echo "gpu.sh: unknown option $1 (see the top of bench/gpu.sh)" >&2; exit 2 ;;
	*) dir=$1; shift ;;
	esac
done

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

if [ -n "$calls" ]; then
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

mkdir -p "$dir"
set -- ${phases:+--phases "$phases"} "$@"
[ "$(nproc)" -ge 12 ] && set -- --cpus 2,3,4,5,6,7,8,9 "$@"
for m in $models; do
	if [ "$m" = small ]; then
		reps=${REPS_SMALL:-8} model=
	else
		reps=${REPS_LARGE:-5} model=--large
	fi
	[ -n "$seconds" ] && reps="400 --seconds $seconds"
	# shellcheck disable=SC2086 # reps and model are words on purpose
	GPULEAK=$gl "$py" bench/gpu_train.py --python "$py" $model --reps $reps --design aba \
		--json "$dir/train_$m.json" "$@"
done
