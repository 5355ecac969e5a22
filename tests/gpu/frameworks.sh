#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# On a GPU machine: gpuleak beside frameworks other than PyTorch's allocator alone, one
# case a process, one after the other (JAX preallocates 75 % of the device: no two at
# once). Each case's workload (tests/gpu/fw_*.py, fw_raw.cu) keeps memory at one marked
# line, or is steady; gpuleak attaches before it starts (late: after it has leaked for a
# while), and fw_check.py prints compact PASS/FAIL lines with gpuleak's figure beside the
# framework's own (memory_stats, JAX's device.memory_stats(), CuPy's pool counters,
# nvidia-smi). Every case has a timeout; all of them end within about 150 s.
#   tests/gpu/frameworks.sh [OUTDIR [CASE...]]
# Cases: jax_default jax_platform cupy raw graphs compile mixed steady late jax_late
# late_minutes (default: all but late_minutes; jax_late last, left out first when time runs
# short). compile: torch.compile(mode="reduce-overhead") recording a graph per new shape
# (CASE_TIMEOUT 90 s at least: Inductor compiles). late_minutes: the late case leaking for
# LATE_S seconds (120) before a plain attach in the default mode, no options.
# Environment: GPULEAK (.carry/gpuleak, else ./gpuleak: a 'make STATIC=1' build), PYTHON
# (/opt/torch/.venv/bin/python3), NVCC (nvcc, else /usr/local/cuda/bin/nvcc), CASE_TIMEOUT
# (30 s), TOTAL_TIMEOUT (150 s).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ -n "${GPULEAK:-}" ]; then gl=$GPULEAK
elif [ -x "$root/.carry/gpuleak" ]; then gl=$root/.carry/gpuleak
else gl=$root/gpuleak; fi
py=${PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$py" ] || py=python3
out=${1:-$(mktemp -d /tmp/frameworks.XXXXXX)}
shift $(($# > 0 ? 1 : 0))
cases=${*:-jax_default jax_platform cupy raw graphs compile mixed steady late jax_late}
late_s=${LATE_S:-120}
case_timeout=${CASE_TIMEOUT:-30}
total_timeout=${TOTAL_TIMEOUT:-150}
start=$SECONDS
mkdir -p "$out"
export PYTHONPATH=$here${PYTHONPATH:+:$PYTHONPATH}
echo "frameworks: gpuleak $("$gl" version 2>&1 | head -1), output in $out"

# fw_raw is built in the background while the first cases run
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cuda_root=$(dirname "$(dirname "$nvcc")")
# the driver itself where it is (nvcc takes no file named .so.1: the host linker gets it),
# else the toolkit's stub to link against
libcuda=(-lcuda)
for f in /usr/local/nvidia/lib64/libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so.1; do
	[ -e "$f" ] && { libcuda=(-Xlinker "$f"); break; }
done
(cd "$out" && "$nvcc" -O2 -Xcompiler -fomit-frame-pointer -o fw_raw "$here/fw_raw.cu" \
	-L"$cuda_root/lib64/stubs" -L"$cuda_root/targets/x86_64-linux/lib/stubs" "${libcuda[@]}" \
	> nvcc.log 2>&1) &
nvcc_pid=$!

wpid= gpid= case_end=$((SECONDS + total_timeout))
stop_case() {
	[ -n "$gpid" ] && kill -INT "$gpid" 2>/dev/null && wait "$gpid" 2>/dev/null
	[ -n "$wpid" ] && { touch "$dir/exit"; sleep 0.2; kill "$wpid" 2>/dev/null; wait "$wpid" 2>/dev/null; }
	wpid= gpid=
}
trap 'stop_case; kill $nvcc_pid 2>/dev/null' EXIT

# wait_for FILE PATTERN SECONDS: PATTERN in FILE ('' : the file exists), within SECONDS
# and the case's own deadline
wait_for() {
	local end=$((SECONDS + $3))
	[ $end -gt "$case_end" ] && end=$case_end
	while [ $SECONDS -lt $end ]; do
		if [ -z "$2" ]; then [ -e "$1" ] && return 0
		else grep -qE "$2" "$1" 2>/dev/null && return 0; fi
		[ -n "$wpid" ] && ! kill -0 "$wpid" 2>/dev/null && return 1
		sleep 0.05
	done
	return 1
}

fail_case() { # CASE WHY
	echo "FAIL $1: $2"
	for f in workload.err gpuleak.err; do
		[ -s "$dir/$f" ] && { echo "  --- $f"; tail -n 5 "$dir/$f" | sed 's/^/  /'; }
	done
	stop_case
}

run_case() { # CASE
	local c=$1 cmd env_extra=() gl_args=(--resolution 250ms --tensors full) pre_wait=20
	local this_timeout=$case_timeout
	dir=$out/$c
	case $c in
	compile) [ "$this_timeout" -lt 90 ] && this_timeout=90 ;;
	late_minutes) this_timeout=$((late_s + 60)) pre_wait=$((late_s + 30)) gl_args=() ;;
	esac
	case_end=$((SECONDS + this_timeout))
	rm -rf "$dir"; mkdir -p "$dir"
	case $c in
	jax_default) cmd=("$py" "$here/fw_jax.py") ;;
	jax_platform) cmd=("$py" "$here/fw_jax.py")
		env_extra=(XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_ALLOCATOR=platform) ;;
	cupy) cmd=("$py" "$here/fw_cupy.py") ;;
	raw) wait "$nvcc_pid" 2>/dev/null
		[ -x "$out/fw_raw" ] || { echo "FAIL raw: nvcc failed: $(tail -n 3 "$out/nvcc.log")"; return; }
		cmd=("$out/fw_raw") ;;
	graphs) cmd=("$py" "$here/fw_graphs.py") ;;
	mixed) cmd=("$py" "$here/fw_mixed.py") ;;
	steady) cmd=("$py" "$here/fw_steady.py") ;;
	late) cmd=("$py" "$here/fw_late.py") ;;
	late_minutes) cmd=("$py" "$here/fw_late.py"); env_extra=(FW_PRE_S="$late_s" FW_POST_STEPS=80) ;;
	compile) cmd=("$py" "$here/fw_compile.py") ;;
	jax_late) cmd=("$py" "$here/fw_jax.py"); env_extra=(FW_LATE=1) ;;
	*) echo "FAIL $c: no such case"; return ;;
	esac
	env FW_GO="$dir/go" FW_DONE="$dir/done.json" FW_EXIT="$dir/exit" FW_PRE="$dir/pre.json" \
		"${env_extra[@]}" "${cmd[@]}" > "$dir/workload.out" 2> "$dir/workload.err" &
	wpid=$!
	wait_for "$dir/workload.out" '^ready' 20 || { fail_case "$c" "the workload never said ready"; return; }
	if [ "$c" = late ] || [ "$c" = jax_late ] || [ "$c" = late_minutes ]; then
		wait_for "$dir/pre.json" '' "$pre_wait" || { fail_case "$c" "no figures before attach"; return; }
	fi
	"$gl" attach -i 0 "${gl_args[@]}" --json "$dir/gpuleak.json" "$wpid" \
		> "$dir/gpuleak.txt" 2> "$dir/gpuleak.err" &
	gpid=$!
	# attached, or waiting for the process to map libcuda (it is held there until the
	# probes are in)
	wait_for "$dir/gpuleak.err" 'attached to PID|has not loaded libcuda' 15 ||
		{ fail_case "$c" "gpuleak did not attach"; return; }
	touch "$dir/go"
	wait_for "$dir/done.json" '' "$this_timeout" || { fail_case "$c" "the workload did not finish"; return; }
	nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits \
		> "$dir/nvidia-smi.csv" 2>/dev/null
	kill -INT "$gpid"; wait "$gpid"; echo "gpuleak exit status $?" >> "$dir/gpuleak.err"
	gpid=
	touch "$dir/exit"
	for _ in $(seq 60); do kill -0 "$wpid" 2>/dev/null || break; sleep 0.05; done
	kill "$wpid" 2>/dev/null; wait "$wpid" 2>/dev/null; wpid=
	"$py" "$here/fw_check.py" "$c" "$dir"
}

for c in $cases; do
	left=$((total_timeout - (SECONDS - start)))
	if [ $left -lt 10 ]; then echo "FAIL $c: not run, out of time ($total_timeout s)"; continue; fi
	[ $left -lt "$case_timeout" ] && case_timeout=$left
	[ "$c" = late_minutes ] && [ $left -lt $((late_s + 60)) ] &&
		{ echo "FAIL $c: not run, $left s left of $total_timeout s, it needs $((late_s + 60))"; continue; }
	t0=$SECONDS
	run_case "$c"
	echo "  ($c: $((SECONDS - t0)) s)"
done
echo "frameworks: $((SECONDS - start)) s in all"
