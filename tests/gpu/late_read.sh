#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# On a GPU machine, as root: the flight recorder when gpuleak reads behind a job that is
# killed. A PyTorch job keeps each step's 512 MiB output on the GPU (a step each 20 ms)
# until the device is full, then is killed with SIGKILL at its out-of-memory error;
# gpuleak attach --incident-dir follows it, and its guard beside it. Three runs:
#   live   gpuleak runs throughout;
#   late   gpuleak and its guard are stopped (SIGSTOP, as a frozen or busy agent) 1 s
#          into the job, until the job is gone: the failure is read after the kill;
#   whole  the same from before the first step: every record is read after the kill.
# live and late must name the job's line (late_read_job.py's train_step) and the
# process; whole must name the process and say that the Python frame could not be read
# (its code objects were never read while the job lived). Prints each bundle's line.
#   tests/gpu/late_read.sh [OUTDIR]     (gpuleak built with 'make STATIC=1')
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
gl=${GPULEAK:-$root/gpuleak}
py=${PYTHON:-python3}
job_py=${JOB:-$here/late_read_job.py}
out=${1:-$(mktemp -d /tmp/late_read.XXXXXX)}
mkdir -p "$out"
fail=0

wait_for() { for _ in $(seq 480); do [ -e "$1" ] && return 0; sleep 0.25; done; return 1; }

guard_of() {
	local d
	for d in /proc/[0-9]*; do
		[ "$(cat "$d/comm" 2>/dev/null)" = gpuleak-guard ] || continue
		[ "$(awk '{print $4}' "$d/stat" 2>/dev/null)" = "$1" ] && echo "${d#/proc/}"
	done
}

one_run() {
	local mode=$1 dir=$out/$1 job tr guard t
	rm -rf "$dir"
	mkdir -p "$dir"
	READY=$dir/ready GO=$dir/go OOM=$dir/oom $py "$job_py" >"$dir/job.out" 2>&1 &
	job=$!
	wait_for "$dir/ready" || { echo "$mode: the job did not get ready"; cat "$dir/job.out"; return 1; }
	"$gl" attach -i 0 --incident-dir "$dir/incidents" "$job" >"$dir/report.txt" 2>"$dir/gpuleak.err" &
	tr=$!
	for _ in $(seq 240); do grep -q "attached to PID $job" "$dir/gpuleak.err" && break; sleep 0.25; done
	grep -q "attached to PID $job" "$dir/gpuleak.err" || { echo "$mode: not attached"; cat "$dir/gpuleak.err"; return 1; }
	guard=$(guard_of "$tr")
	[ "$mode" = whole ] && kill -STOP "$tr" $guard
	touch "$dir/go"
	[ "$mode" = late ] && { sleep 1; kill -STOP "$tr" $guard; }
	wait_for "$dir/oom" || { echo "$mode: no out-of-memory error"; tail -5 "$dir/job.out"; }
	kill -KILL "$job"
	wait "$job" 2>/dev/null
	[ "$mode" != live ] && { sleep 1; kill -CONT "$tr" $guard; }
	for t in $(seq 240); do
		ls "$dir/incidents" 2>/dev/null | grep -q -- '-killed$' && break
		sleep 0.25
	done
	kill -INT "$tr" 2>/dev/null # attach ends by itself once its process is gone
	wait "$tr"
	echo "== $mode: gpuleak exit $?; bundles: $(ls "$dir/incidents" 2>/dev/null | tr '\n' ' ')"
	local oom
	oom=$(ls "$dir/incidents" 2>/dev/null | grep -- '-oom$' | tail -1)
	[ -n "$oom" ] || { echo "$mode: no out-of-memory bundle"; grep -v libbpf "$dir/gpuleak.err" | tail -5; return 1; }
	$py - "$dir/incidents/$oom/incident.json" "$mode" <<'EOF' || return 1
import json, sys
inc = json.load(open(sys.argv[1]))
what, comm = inc["what"], inc["process"]["comm"]
print(f"{sys.argv[2]}: {what}\n{sys.argv[2]}: process {inc['process']['pid']} ({comm}), complete {inc['complete']}")
if sys.argv[2] == "whole":
    ok = "a Python frame whose code gpuleak could not read" in what
else:
    ok = "train_step" in what and "late_read_job.py" in what
ok = ok and comm not in ("?", "")
print(f"{sys.argv[2]}: {'as expected' if ok else 'NOT as expected'}")
sys.exit(0 if ok else 1)
EOF
}

for mode in live late whole; do one_run $mode || fail=1; done
[ $fail = 0 ] && echo PASS || echo FAIL
exit $fail
