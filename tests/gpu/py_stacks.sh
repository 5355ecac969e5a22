#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# On a GPU machine: a PyTorch loop that leaks one tensor a step (results.append(model(x))),
# traced with 'gpuleak attach'; prints the leaking stack from gpuleak's JSON, Python frames
# included, and PASS or FAIL. Takes well under 2 minutes.
#
#   tests/gpu/py_stacks.sh [OUTDIR]     (gpuleak built with 'make STATIC=1' in the repo root)
#
# Environment: GPULEAK (default: the repo's gpuleak), PYTHON (default: python3, the one with
# torch), PY_LEAK_FAKE_LIB (a CUDA driver stand-in instead of PyTorch, to try it without a GPU).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
gl=${GPULEAK:-$root/gpuleak}
py=${PYTHON:-python3}
out=${1:-$(mktemp -d /tmp/py_stacks.XXXXXX)}
mkdir -p "$out"
rm -f "$out"/{go,done,exit,gpuleak.json}
fake=()
[ -n "${PY_LEAK_FAKE_LIB:-}" ] && fake=(--fake-lib "$PY_LEAK_FAKE_LIB")

wait_file() { # FILE PATTERN SECONDS
	for _ in $(seq $(($3 * 20))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
	echo "py_stacks: timed out waiting for '$2' in $1" >&2
	return 1
}

"$py" "$here/py_leak.py" --go "$out/go" --done "$out/done" --exit "$out/exit" "${fake[@]}" \
	> "$out/workload.out" 2> "$out/workload.err" &
wpid=$!
trap 'touch "$out/exit"; kill $wpid 2>/dev/null' EXIT
wait_file "$out/workload.out" '^ready' 90 || { cat "$out/workload.err"; exit 1; }

"$gl" attach -v -i 0 --json "$out/gpuleak.json" "$wpid" \
	> "$out/gpuleak.txt" 2> "$out/gpuleak.err" &
gpid=$!
wait_file "$out/gpuleak.err" 'attached to PID' 30 || { cat "$out/gpuleak.err"; exit 1; }
grep -E 'CPython|Python frames' "$out/gpuleak.err"

touch "$out/go"
for _ in $(seq 1200); do [ -f "$out/done" ] && break; sleep 0.05; done
[ -f "$out/done" ] || { echo "py_stacks: the workload did not finish" >&2; cat "$out/workload.err"; exit 1; }
sleep 0.5
kill -INT "$gpid"
wait "$gpid"
echo "gpuleak exit status $? (files in $out)"
grep -iE 'warn|error' "$out/gpuleak.err"

"$py" "$here/py_leak.py" --report "$out/gpuleak.json" --done "$out/done"
