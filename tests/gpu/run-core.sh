#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# On a GPU machine: attach gpuleak to running PyTorch processes, before they allocate,
# under each allocator configuration (and on two devices at once where there are two), and
# keep gpuleak's JSON next to PyTorch's own figures.
#   tests/gpu/run-core.sh OUTDIR   (gpuleak built with 'make STATIC=1' in the repo root)
set -u
out=${1:?usage: run-core.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
gl=${GPULEAK:-$root/gpuleak}
py=${PYTHON:-python3}
mkdir -p "$out"

run_one() {
	local name=$1 conf=$2 extra=$3
	local d=$out/$name
	rm -rf "$d.tmp" && mkdir -p "$d.tmp"
	PYTORCH_CUDA_ALLOC_CONF=$conf $py "$here/torch_core.py" --go "$d.tmp/go" --done "$d.tmp/done" \
		--exit "$d.tmp/exit" $extra > "$d.tmp/wl.out" 2> "$d.tmp/wl.err" &
	local wpid=$!
	for _ in $(seq 600); do grep -q '^ready' "$d.tmp/wl.out" 2>/dev/null && break; sleep 0.1; done
	local t0=$(date +%s%N)
	"$gl" attach -v -i 0 --json "$out/$name.json" "$wpid" > "$out/$name.txt" 2> "$out/$name.err" &
	local gpid=$!
	for _ in $(seq 300); do grep -q 'attached to PID' "$out/$name.err" 2>/dev/null && break; sleep 0.01; done
	local t1=$(date +%s%N)
	echo "$name: attach took $(( (t1 - t0) / 1000000 )) ms (wall, incl. start-up)" >> "$out/summary.txt"
	touch "$d.tmp/go"
	for _ in $(seq 600); do [ -f "$d.tmp/done" ] && break; sleep 0.1; done
	sleep 0.5
	kill -INT "$gpid"; wait "$gpid"
	echo "$name: gpuleak exit $?" >> "$out/summary.txt"
	cp "$d.tmp/done" "$out/$name.torch.json" 2>/dev/null
	touch "$d.tmp/exit"; wait "$wpid"
	cat "$d.tmp/wl.err" >> "$out/$name.err"
	rm -rf "$d.tmp"
}

run_one default "" ""
run_one expandable "expandable_segments:True" ""
run_one async "backend:cudaMallocAsync" ""
run_one pinned "" "--pinned"
if [ "$($py -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]; then
	run_one multi "" "--devices 2"
fi
