#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# On a GPU machine: the census of a PyTorch job whose CUDA tensors are held in known places
# (a module attribute list, a global list, a dict, views of one storage, a thread's local,
# a loss summed across steps), then of a process with a million Python objects (the pause).
# Prints both censuses; checks that the layout was verified and the holders are named.
#   tests/gpu/census.sh [OUTDIR]     (gpuleak built with 'make STATIC=1')
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
gl=${GPULEAK:-$root/gpuleak}
py=${PYTHON:-python3}
out=${1:-$(mktemp -d /tmp/census.XXXXXX)}
mkdir -p "$out"
rm -f "$out"/ready "$out"/ready2
fail=0

wait_for() { for _ in $(seq 480); do [ -e "$1" ] && return 0; sleep 0.25; done; return 1; }

READY=$out/ready $py "$here/census_holders.py" 40 >"$out/holders.out" 2>&1 &
pid=$!
wait_for "$out/ready" || { echo "census: the job did not get ready"; cat "$out/holders.out"; exit 1; }
cat "$out/holders.out"
"$gl" census "$pid" >"$out/census.txt" 2>&1 || fail=1
"$gl" census --json - "$pid" >"$out/census.json" 2>>"$out/census.txt" || fail=1
kill "$pid"
for want in "PyTorch layout checked" "held by __main__.model.history (a list of 40)" \
	"held by __main__.results (a list of 40)" "__main__.total.grad_fn"; do
	grep -qF "$want" "$out/census.txt" || { echo "census: missing '$want'"; fail=1; }
done
head -c 2500 "$out/census.txt"

READY=$out/ready2 $py "$here/census_million.py" >/dev/null 2>&1 &
pid=$!
wait_for "$out/ready2" || { echo "census: the million-object job did not get ready"; exit 1; }
"$gl" census "$pid" >"$out/million.txt" 2>&1 || fail=1
kill "$pid"
head -4 "$out/million.txt"
[ $fail = 0 ] && echo PASS || echo FAIL
exit $fail
