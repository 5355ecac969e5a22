#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# On a GPU machine: the leak verdicts on real PyTorch. Six processes of torch_verdicts.py
# (five classic leaks and a healthy loop) run side by side; one 'gpuleak attach' traces all
# six for DURATION, then verdicts.py prints each one's most suspicious stack and checks
# the verdicts (the healthy loop must get no leak). About two minutes in all.
#   tests/gpu/run-verdicts.sh OUTDIR   (gpuleak built with 'make STATIC=1' in the repo root)
# Environment: GPULEAK (./gpuleak), PYTHON (python3), DURATION (60s), STACKS (gpuleak's
# default, dwarf), GL_ARGS (more options for attach, e.g. "--tensors full"). gpuleak's peak
# resident size (VmHWM) is printed as it ends; its last /proc/PID/smaps is kept (smaps).
set -u
out=${1:?usage: run-verdicts.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
gl=${GPULEAK:-$root/gpuleak}
py=${PYTHON:-python3}
duration=${DURATION:-60s}
cases="outputs loss rnn activations pinned healthy"
mkdir -p "$out"
go=$out/go
rm -f "$go" "$out"/*.out "$out"/*.err "$out/pids"

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
}
trap cleanup EXIT

for c in $cases; do
	$py "$here/torch_verdicts.py" --case "$c" --go "$go" > "$out/$c.out" 2> "$out/$c.err" &
	pids+=($!)
	echo "$c $!" >> "$out/pids"
done
i=0
for c in $cases; do
	for _ in $(seq 1200); do
		grep -q '^ready' "$out/$c.out" 2>/dev/null && break
		kill -0 "${pids[$i]}" 2>/dev/null || break
		sleep 0.1
	done
	if ! grep -q '^ready' "$out/$c.out"; then
		echo "$c never got ready:"
		tail -5 "$out/$c.err"
		exit 1
	fi
	i=$((i + 1))
done

# shellcheck disable=SC2086 # GL_ARGS: words
"$gl" attach -v -i 20s -d "$duration" ${STACKS:+--stacks "$STACKS"} ${GL_ARGS:-} \
	--json "$out/verdicts.json" "${pids[@]}" > "$out/gpuleak.txt" 2> "$out/gpuleak.err" &
gpid=$!
( hwm=; while kill -0 "$gpid" 2>/dev/null; do
	v=$(awk '/^VmHWM/ {print $2}' "/proc/$gpid/status" 2>/dev/null) && [ -n "$v" ] && hwm=$v
	cat "/proc/$gpid/smaps" > "$out/smaps.next" 2>/dev/null && mv "$out/smaps.next" "$out/smaps"
	sleep 0.2
done; echo "$hwm" > "$out/vmhwm_kib" ) &
for _ in $(seq 600); do
	[ "$(grep -c "attached to PID" "$out/gpuleak.err" 2>/dev/null)" -ge 6 ] && break
	kill -0 "$gpid" 2>/dev/null || break
	sleep 0.05
done
if ! kill -0 "$gpid" 2>/dev/null; then
	echo "gpuleak exited early:"; cat "$out/gpuleak.err"; exit 1
fi
touch "$go"
echo "tracing 6 PyTorch processes for $duration ..."
wait "$gpid"
echo "gpuleak exit status $?"
sleep 0.5
echo "gpuleak peak resident size (VmHWM): $(cat "$out/vmhwm_kib" 2>/dev/null) KiB"
for c in $cases; do
	grep -q Traceback "$out/$c.err" && { echo "$c failed:"; tail -5 "$out/$c.err"; }
done
cleanup
trap - EXIT
$py "$here/verdicts.py" "$out/verdicts.json" "$out/pids"
