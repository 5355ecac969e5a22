#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# On a GPU machine: what gpuleak's BPF programs cost on a real PyTorch training loop
# (bench/torch_train.py, the ~20 ms model), per program and per tensor-block pair, for
# each binary given, REPS times in a rotating order. The kernel times BPF programs for
# the run (kernel.bpf_stats_enabled, set back after); each gpuleak reports its programs'
# runs and run time in its JSON (stats.programs).
#   tests/gpu/bpf_cost.sh OUTDIR NAME=GPULEAK ...
# Environment: REPS (3), STEPS (300), GL_ARGS (--tensors full), TRAIN_ARGS (more options
# of torch_train.py), PYTHON (an interpreter with torch: /opt/torch/.venv/bin/python, else
# python3).
set -u
out=${1:?usage: bpf_cost.sh OUTDIR NAME=GPULEAK ...}
shift
mkdir -p "$out"
cd "$(dirname "$0")/../.."
py=${PYTHON:-}
for c in /opt/torch/.venv/bin/python python3; do
	[ -z "$py" ] && "$c" -c 'import torch' 2>/dev/null && py=$c
done
[ -n "$py" ] || { echo "bpf_cost.sh: no Python with torch (set PYTHON)" >&2; exit 1; }
stats=/proc/sys/kernel/bpf_stats_enabled
was=$(cat $stats)
trap 'echo "$was" > $stats' EXIT
echo 1 > $stats
n=$#
for r in $(seq 1 "${REPS:-3}"); do
	for i in $(seq 0 $((n - 1))); do
		k=$(((i + r) % n + 1))
		nb=${!k} name=${nb%%=*} bin=${nb#*=}
		# shellcheck disable=SC2086
		"$bin" run -q ${GL_ARGS:---tensors full} --json "$out/$name-$r.json" -- \
			"$py" bench/torch_train.py --steps "${STEPS:-300}" ${TRAIN_ARGS:-} \
			> "$out/$name-$r.log" 2>&1 ||
			echo "$name rep $r: gpuleak exited $?" >&2
	done
done
python3 - "$out" "${REPS:-3}" "$@" <<'PY'
import json, statistics, sys
out, reps, names = sys.argv[1], int(sys.argv[2]), [a.split("=", 1)[0] for a in sys.argv[3:]]
print("ns per run, median over reps (runs per rep); pair = torch_malloc + torch_free")
for name in names:
    per = {}
    for r in range(1, reps + 1):
        try:
            st = json.load(open(f"{out}/{name}-{r}.json"))["stats"]
        except (OSError, ValueError) as e:
            print(f"{name} rep {r}: no report ({e})")
            continue
        for p, v in st.get("programs", {}).items():
            if v["runs"]:
                per.setdefault(p, []).append((v["run_ns"] / v["runs"], v["runs"]))
    line = [f"{name}:"]
    for p in ("torch_malloc", "torch_free", "call_enter", "call_exit"):
        if p in per:
            line.append(f"{p} {statistics.median(x for x, _ in per[p]):.0f} "
                        f"({statistics.median(n for _, n in per[p]):.0f})")
    if "torch_malloc" in per and "torch_free" in per:
        pair = [a[0] + b[0] for a, b in zip(per["torch_malloc"], per["torch_free"])]
        line.append(f"pair {statistics.median(pair):.0f} [{min(pair):.0f}-{max(pair):.0f}]")
    print(" ".join(line))
PY
