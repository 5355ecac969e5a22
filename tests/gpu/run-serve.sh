#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# On a GPU machine, one command, under 3 minutes: `gpuleak serve` starts first, then two
# PyTorch processes start after it, one leaking (keeps a 16 MiB tensor per step) and one
# not; /metrics is scraped a few times and the relevant lines printed: the leaking
# process's device bytes (and leak bytes, once verdicts exist) climb, the other's stay flat.
#   tests/gpu/run-serve.sh [OUTDIR]   (gpuleak built with 'make STATIC=1' in the repo root)
# Environment: GPULEAK (binary), PYTHON (a python with torch, e.g. /opt/torch/.venv/bin/python),
# PORT (19464). Prints "RESULT: ok ..." when the leaking process climbs and the other does not.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-/tmp/gpuleak-serve-gpu}
gl=${GPULEAK:-$root/gpuleak}
py=${PYTHON:-python3}
port=${PORT:-19464}
url=http://127.0.0.1:$port/metrics
mkdir -p "$out/state"
scrape() { curl -s --max-time 5 "$url" 2>/dev/null || python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('$url', timeout=5).read().decode())"; }

"$gl" serve -v --listen 127.0.0.1:$port --state-dir "$out/state" --profile-dir profiles \
	--profile-every 10s > "$out/serve.out" 2> "$out/serve.err" &
gpid=$!
for _ in $(seq 300); do grep -q 'serving http' "$out/serve.err" && break; sleep 0.1; done
grep -q 'serving http' "$out/serve.err" || { echo "serve did not start:"; cat "$out/serve.err"; exit 1; }
echo "== serve started: $(grep -c attached "$out/serve.err") attach lines"

$py "$here/torch_serve.py" --leak --seconds 75 > "$out/leak.out" 2>&1 &
leak=$!
$py "$here/torch_serve.py" --seconds 75 > "$out/flat.out" 2>&1 &
flat=$!
echo "== leaking PID $leak, steady PID $flat"
sleep 15
for i in 1 2 3 4 5 6; do
	scrape > "$out/scrape.$i.txt"
	echo "== scrape $i ($(date +%T))"
	grep -E "^gpuleak_process_(memory_bytes|leak_bytes)\{pid=\"($leak|$flat)\"[^}]*class=\"device\"" "$out/scrape.$i.txt"
	grep -E "^gpuleak_process_device_memory_bytes\{pid=\"($leak|$flat)\"" "$out/scrape.$i.txt"
	sleep 8
done
grep -E "^gpuleak_(events_lost_total|processes_tracked|probes_attached|books_complete|cap_hits_total)|^process_resident" "$out/scrape.6.txt"
command -v promtool >/dev/null && { promtool check metrics < "$out/scrape.6.txt" && echo "promtool: ok"; }
curl -s --max-time 10 -o "$out/gpu_heap.pb.gz" -w "pprof endpoint: HTTP %{http_code}, %{size_download} bytes\n" \
	http://127.0.0.1:$port/debug/pprof/gpu_heap 2>/dev/null
wait $leak $flat
sleep 2
scrape > "$out/scrape.after.txt"
echo "== after both exited: series of their PIDs left: $(grep -cE "pid=\"($leak|$flat)\"" "$out/scrape.after.txt")"
kill -TERM $gpid; wait $gpid; echo "== serve exit status $? (0 expected); profiles on disk: $(ls "$out/state/profiles" 2>/dev/null | wc -l)"
python3 - "$out" "$leak" "$flat" <<'PY'
import re, sys
out, leak, flat = sys.argv[1:]
def dev(i, pid):
    t = open(f"{out}/scrape.{i}.txt").read()
    m = re.search(rf'^gpuleak_process_memory_bytes{{pid="{pid}"[^}}]*class="device"}} (\d+)', t, re.M)
    return int(m.group(1)) if m else None
l = [dev(i, leak) for i in range(1, 7)]
f = [dev(i, flat) for i in range(1, 7)]
print("leaking process device bytes:", l)
print("steady process device bytes: ", f)
ok = None not in l and None not in f and l == sorted(l) and l[-1] > l[0] and max(f) - min(f) < (l[-1] - l[0]) / 4
print("RESULT:", "ok - the leaking one climbs, the steady one does not" if ok else "UNEXPECTED")
PY
