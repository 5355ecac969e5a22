#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# On a GPU machine: gpuleak's memory and lost records on six busy PyTorch processes
# (run-verdicts.sh), for each binary given, windowed and with --tensors full, one after
# the other. Prints per run: the peak resident size (VmHWM), lost_events, the kernel's
# ring and the backlog's peak (stats), and whether the verdicts held.
#   tests/gpu/lighter.sh OUTDIR NAME=GPULEAK ...
# Environment: DURATION (30s), PYTHON (python3).
set -u
out=${1:?usage: lighter.sh OUTDIR NAME=GPULEAK ...}
shift
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
for mode in windowed full; do
	for nb in "$@"; do
		name=${nb%%=*} bin=${nb#*=} dir=$out/$name-$mode
		args=
		[ "$mode" = full ] && args="--tensors full"
		DURATION=${DURATION:-30s} GPULEAK=$bin GL_ARGS=$args "$here/run-verdicts.sh" "$dir" \
			> "$dir.log" 2>&1
		rc=$?
		python3 - "$dir" "$name" "$mode" "$rc" <<'PY'
import json, sys
d, name, mode, rc = sys.argv[1:]
try:
    r = json.load(open(f"{d}/verdicts.json"))
except (OSError, ValueError) as e:
    print(f"{name} {mode}: no report ({e})"); sys.exit()
st = r["stats"]
hwm = open(f"{d}/vmhwm_kib").read().strip()
print(f"{name} {mode}: VmHWM {hwm} KiB, lost_events {r['lost_events']}, complete "
      f"{r['complete']}, stack records {st.get('stack_records')} "
      f"({st.get('stack_record_ring_bytes')} B), ring {st.get('ring_bytes', 'n/a')} B, "
      f"backlog peak {st.get('backlog_peak_bytes', 'n/a')} B, verdicts rc {rc}")
PY
	done
done
