#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# On a GPU machine: the census joined with the books (attach --census) on census_holders.py,
# attached after 30 of its 200 steps (it still grows when the 8 s attach ends): tensors of
# the steps before attach must be counted as predating it, still with their holders; those
# after it must carry the line that allocated them beside what holds them, with the leaking
# lines listed.
#   tests/gpu/census_join.sh OUTDIR   (gpuleak built with 'make STATIC=1')
set -u
out=${1:?usage: census_join.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
gl=${GPULEAK:-$root/gpuleak}
py=${PYTHON:-python3}
mkdir -p "$out"
rm -f "$out/join.ready"
fail=0
READY=$out/join.ready $py "$here/census_holders.py" 200 >"$out/join.holders.out" 2>&1 &
pid=$!
for _ in $(seq 600); do [ -s "$out/join.holders.out" ] && break; sleep 0.1; done
sleep 3 # about 30 of the 200 steps (0.1 s each) before the attach: still growing when it ends
"$gl" attach -i 0 -d 8s --tensors full --census "$pid" \
	>"$out/join.txt" 2>"$out/join.err" || fail=1
cat "$out/join.holders.out"
kill "$pid"
for want in "allocated at" "leaks and what holds them" "__main__.model.history" \
	"__main__.results" "predates the attach"; do
	grep -qF "$want" "$out/join.txt" || { echo "census_join: missing '$want'"; fail=1; }
done
sed -n '/leaks and what holds them/,+8p' "$out/join.txt"
grep -E "pause|predate|joined" "$out/join.txt" | head -8
echo "census_join: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
