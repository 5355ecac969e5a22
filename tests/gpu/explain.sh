#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# On a GPU machine: gpuleak's breakdown and out-of-memory causes on real PyTorch programs
# (explain_cases.py): a leak to OOM, a fragmentation OOM with the default allocator and the
# same program with expandable segments, cuBLAS and CuPy beside PyTorch. Each case runs
# alone on the device under `gpuleak attach`; explain_summary.py prints gpuleak's figures
# beside PyTorch's, CuPy's and nvidia-smi's, and PASS/FAIL per expectation.
#   tests/gpu/explain.sh OUTDIR   (gpuleak built with 'make STATIC=1' in the repo root)
# Environment: GPULEAK (./gpuleak), PYTHON (python3). About a minute.
set -u
out=${1:?usage: explain.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
gl=${GPULEAK:-$root/gpuleak}
py=${PYTHON:-python3}
mkdir -p "$out"

one() { # NAME CASE GPULEAK-OPTIONS [ENV=VALUE]
	local name=$1 case=$2 opts=$3 pid gpid i
	rm -f "$out/$name.go"
	env ${4:+"$4"} "$py" "$here/explain_cases.py" --case "$case" --go "$out/$name.go" \
		--result "$out/$name.torch.json" >"$out/$name.out" 2>"$out/$name.err" &
	pid=$!
	for i in $(seq 600); do grep -q '^ready' "$out/$name.out" 2>/dev/null && break; sleep 0.1; done
	"$gl" attach -i 0 $opts --json "$out/$name.json" "$pid" >"$out/$name.txt" 2>"$out/$name.gl.err" &
	gpid=$!
	for i in $(seq 300); do grep -q "attached to PID $pid" "$out/$name.gl.err" && break; sleep 0.1; done
	touch "$out/$name.go"
	for i in $(seq 600); do grep -q '^done' "$out/$name.out" 2>/dev/null && break; sleep 0.1; done
	nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits \
		>"$out/$name.smi" 2>&1
	kill -INT "$gpid"
	wait "$gpid"
	echo "$?" >"$out/$name.gl.rc"
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
}

# every block seen from the attach on: a fragmentation verdict needs PyTorch's whole map
one leak leak "--tensors full"
one frag frag "--tensors full"
one frag_expandable frag "--tensors full" PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
one libraries libraries ""
"$py" "$here/explain_summary.py" "$out"
