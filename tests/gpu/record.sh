#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# On a GPU machine: a PyTorch process traced by `gpuleak attach` and `gpuleak record` at once,
# under each allocator configuration; then `gpuleak report` of the recording, with the
# modules kept by --keep-modules, is compared with the live report (figures, stacks, frames).
#   tests/gpu/record.sh OUTDIR   (gpuleak built with 'make STATIC=1' in the repo root)
# OUTDIR/record-summary.txt ends with one line: 'N passed, N failed'.
set -u
out=${1:?usage: record.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
gl=${GPULEAK:-$root/gpuleak}
py=${PYTHON:-python3}
mkdir -p "$out"
sum=$out/record-summary.txt
: > "$sum"

wait_for() { for _ in $(seq "$2"); do grep -q "$3" "$1" 2>/dev/null && return 0; sleep 0.05; done; return 1; }

run_one() {
	local name=$1 conf=$2 extra=$3 d=$out/$1
	rm -rf "$d" && mkdir -p "$d"
	PYTORCH_CUDA_ALLOC_CONF=$conf $py "$here/torch_core.py" --go "$d/go" --done "$d/done" \
		--exit "$d/exit" $extra > "$d/wl.out" 2> "$d/wl.err" &
	local wpid=$!
	wait_for "$d/wl.out" 1200 '^ready' || { echo "$name: workload not ready" >> "$sum"; return; }
	"$gl" record -v -o "$d/rec.glr" --keep-modules "$d/store" "$wpid" 2> "$d/record.err" &
	local rpid=$!
	wait_for "$d/record.err" 600 "attached to PID"
	"$gl" attach -v -i 0 --json "$d/live.json" "$wpid" > /dev/null 2> "$d/attach.err" &
	local apid=$!
	wait_for "$d/attach.err" 600 "attached to PID"
	touch "$d/go"
	for _ in $(seq 1200); do [ -f "$d/done" ] && break; sleep 0.1; done
	sleep 1
	kill -INT "$apid" "$rpid"; wait "$apid"; wait "$rpid"
	echo "$name: record exit $?, $(stat -c %s "$d/rec.glr") bytes, store $(du -sh "$d/store" | cut -f1)" \
		>> "$sum"
	touch "$d/exit"; wait "$wpid"
	local t0=$(date +%s%N)
	"$gl" report "$d/rec.glr" --json "$d/report.json" --pprof "$d/report.pb.gz" \
		--debug-dir "$d/store" > "$d/report.txt" 2> "$d/report.err"
	echo "$name: report exit $?, $(( ($(date +%s%N) - t0) / 1000000 )) ms" >> "$sum"
	$py - "$d/live.json" "$d/report.json" "$wpid" "$name" >> "$sum" <<'PY'
import json, sys
live, rep, pid, name = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3]), sys.argv[4]
lp = [p for p in live["processes"] if p["pid"] == pid][0]
rp = [p for p in rep["processes"] if p["pid"] == pid][0]
keys = ("device_bytes", "host_pinned_bytes", "address_space_bytes", "torch_allocated_bytes",
        "outstanding_allocs", "alloc_calls", "free_calls", "consistent")
view = lambda p: sorted((s["memory"], s["outstanding_bytes"], tuple((f.get("function"), f.get("line"))
                         for f in s["frames"])) for s in p["stacks"])
bad = [k for k in keys if lp[k] != rp[k]] + (["stacks"] if view(lp) != view(rp) else [])
named = sum(1 for s in rp["stacks"] for f in s["frames"] if f.get("function"))
print(f"{name}: {'passed' if not bad else 'failed: ' + ', '.join(bad)}; device {rp['device_bytes']} "
      f"(live {lp['device_bytes']}), {named} named frames, recording complete "
      f"{rep['recording']['complete']}, modules missing {rep['recording']['modules_missing']}")
PY
}

run_one default "" ""
run_one expandable "expandable_segments:True" ""
run_one async "backend:cudaMallocAsync" ""
run_one pinned "" "--pinned"
echo "$(grep -c ': passed' "$sum") passed, $(grep -c ': failed' "$sum") failed" >> "$sum"
cat "$sum"
