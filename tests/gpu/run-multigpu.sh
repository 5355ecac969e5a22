#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# On a machine with two GPUs, one command, under 5 minutes:
#   1. DataParallel (output_device 0, outputs kept): gpuleak attach before its first CUDA call;
#   2. a 2-rank DDP job under torchrun (NCCL; rank 1 leaks at a marked line), traced by
#      gpuleak attach -a --ranks-from-env started before it;
#   3. gpuleak serve --ranks-from-env with both jobs again, /metrics scraped after NVML's
#      sample;
# then multigpu_check.py prints PASS/FAIL lines: gpuleak's figures against
# torch.cuda.memory_stats per device, nvidia-smi's per-process listing and NCCL's own
# cost (nvidia-smi deltas around init_process_group, NCCL_DEBUG=INFO's ALLOC lines).
#   tests/gpu/run-multigpu.sh OUTDIR   (gpuleak built with 'make STATIC=1' in the repo root)
# Environment: GPULEAK (binary), PYTHON (a python with torch, e.g. /opt/torch/.venv/bin/python),
# PORT (19465).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:?usage: run-multigpu.sh OUTDIR}
gl=${GPULEAK:-$root/gpuleak}
py=${PYTHON:-python3}
port=${PORT:-19465}
mkdir -p "$out" && [ -z "$(ls -A "$out")" ] || { echo "FAIL $out: must be a new or empty folder"; exit 1; }
mkdir -p "$out/state"
# NVLink multicast off: NCCL, PyTorch's symmetric memory and NVSHMEM
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ALLOC
ngpu=$($py -c 'import torch; print(torch.cuda.device_count())')
[ "$ngpu" -ge 2 ] || { echo "FAIL machine: $ngpu GPU(s), two needed"; exit 1; }
nvidia-smi --query-gpu=index,uuid,memory.used --format=csv,noheader,nounits > "$out/gpus.csv"
smi_apps() { nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits > "$1"; }
wait_file() { for _ in $(seq "$2"); do [ -e "$1" ] && return 0; sleep 0.1; done; echo "timed out waiting for $1"; return 1; }
wait_grep() { for _ in $(seq "$3"); do grep -q "$1" "$2" 2>/dev/null && return 0; sleep 0.1; done; echo "timed out waiting for '$1' in $2"; return 1; }

echo "== 1. DataParallel ($(date +%T))"
d=$out/dp
mkdir -p "$d"
$py "$here/multigpu_dp.py" --go "$d/go" --done "$d/done.json" --exit "$d/exit" \
	> "$d/wl.out" 2> "$d/wl.err" &
wpid=$!
wait_grep '^ready' "$d/wl.out" 300
"$gl" attach -v -w 5m -i 0 --json "$out/dp.json" "$wpid" > "$out/dp.txt" 2> "$out/dp.err" &
gpid=$!
# attached, or watching for its libcuda (held at the mapping, then attached): no CUDA call yet
wait_grep 'attached to PID\|has not loaded libcuda yet' "$out/dp.err" 300
touch "$d/go"
wait_file "$d/done.json" 1200
sleep 1
smi_apps "$out/dp.smi.csv"
kill -INT $gpid; wait $gpid; echo "gpuleak attach exit $?"
touch "$d/exit"; wait $wpid

echo "== 2. DDP, 2 ranks ($(date +%T))"
d=$out/ddp
mkdir -p "$d"
"$gl" attach -v -a --ranks-from-env -i 0 --json "$out/ddp.json" > "$out/ddp.txt" 2> "$out/ddp.err" &
gpid=$!
wait_grep 'tracing every process' "$out/ddp.err" 300
$py -m torch.distributed.run --nproc_per_node 2 "$here/multigpu_ddp.py" --dir "$d" \
	--exit "$d/exit" > "$d/torchrun.out" 2> "$d/torchrun.err" &
tpid=$!
wait_file "$d/rank0.json" 1800 && wait_file "$d/rank1.json" 600
sleep 1
smi_apps "$out/ddp.smi.csv"
kill -INT $gpid; wait $gpid; echo "gpuleak attach -a exit $?"
touch "$d/exit"; wait $tpid; echo "torchrun exit $?"
echo "torchrun's agent was PID $tpid" > "$d/agent"

echo "== 3. serve, both jobs again ($(date +%T))"
"$gl" serve -v --ranks-from-env --listen 127.0.0.1:$port --state-dir "$out/state" \
	> "$out/serve.out" 2> "$out/serve.err" &
spid=$!
wait_grep 'serving http' "$out/serve.err" 300
d=$out/sdp
mkdir -p "$d" && touch "$d/go"
$py "$here/multigpu_dp.py" --go "$d/go" --done "$d/done.json" --exit "$d/exit" \
	> "$d/wl.out" 2> "$d/wl.err" &
swpid=$!
e=$out/sddp
mkdir -p "$e"
$py -m torch.distributed.run --nproc_per_node 2 "$here/multigpu_ddp.py" --dir "$e" \
	--exit "$e/exit" > "$e/torchrun.out" 2> "$e/torchrun.err" &
stpid=$!
wait_file "$d/done.json" 1200; wait_file "$e/rank0.json" 1800 && wait_file "$e/rank1.json" 600
sleep 12 # NVML is sampled every 10 s
curl -s --max-time 10 "http://127.0.0.1:$port/metrics" > "$out/metrics.txt" ||
	$py -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$port/metrics', timeout=10).read().decode())" > "$out/metrics.txt"
smi_apps "$out/serve.smi.csv"
touch "$d/exit" "$e/exit"; wait $swpid $stpid
kill -TERM $spid; wait $spid; echo "serve exit $?"
echo "== done ($(date +%T))"
python3 "$here/multigpu_check.py" "$out"
