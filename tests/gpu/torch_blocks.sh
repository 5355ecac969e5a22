#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# On a GPU machine: a PyTorch job leaks small tensors inside a cached segment. gpuleak
# (PyTorch's allocator probes on by default) must name the leaking Python line among the
# torch_block stacks, the driver level must stay flat, and torch_allocated_bytes must equal
# torch.cuda.memory_allocated() (attached before the first allocation). Prints PASS/FAIL.
#   tests/gpu/torch_blocks.sh [OUTDIR]     (gpuleak built with 'make STATIC=1')
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
gl=${GPULEAK:-$root/gpuleak}
py=${PYTHON:-python3}
out=${1:-$(mktemp -d /tmp/torch_blocks.XXXXXX)}
mkdir -p "$out"
rm -f "$out"/{go,done,exit,gpuleak.json}

wait_file() { # FILE PATTERN SECONDS
	for _ in $(seq $(($3 * 20))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
	echo "torch_blocks: timed out waiting for '$2' in $1" >&2
	return 1
}

"$py" "$here/torch_blocks.py" --go "$out/go" --done "$out/done" --exit "$out/exit" \
	> "$out/workload.out" 2> "$out/workload.err" &
wpid=$!
trap 'touch "$out/exit"; kill $wpid 2>/dev/null' EXIT
wait_file "$out/workload.out" '^ready' 90 || { cat "$out/workload.err"; exit 1; }
"$gl" attach -i 0 --json "$out/gpuleak.json" "$wpid" > "$out/gpuleak.txt" 2> "$out/gpuleak.err" &
gpid=$!
wait_file "$out/gpuleak.err" "attached to PID" 30 || { cat "$out/gpuleak.err"; exit 1; }
touch "$out/go"
for _ in $(seq 600); do [ -f "$out/done" ] && break; sleep 0.1; done
kill -INT $gpid; wait $gpid
cat "$out/gpuleak.err"
"$py" - "$out" <<'PY'
import json, sys
out = sys.argv[1]
g = json.load(open(f"{out}/gpuleak.json")); t = json.load(open(f"{out}/done"))
p = [p for p in g["processes"] if p["pid"] == t["pid"]][0]
print("torch:", {k: t[k] for k in ("memory_allocated", "memory_reserved", "kept_bytes")})
print("gpuleak:", {k: p[k] for k in ("torch_allocated_bytes", "torch_blocks", "torch_reserved_bytes",
                                      "device_bytes", "consistent")})
blocks = [s for s in p["stacks"] if s["memory"] == "torch_block"]
dev = [s for s in p["stacks"] if s["memory"] == "device"]
ok = p["torch_allocated_bytes"] == t["memory_allocated"]
print("torch_allocated_bytes == memory_allocated():", ok)
top = blocks[0] if blocks else None
if top:
    print(f"top torch_block stack: {top['outstanding_bytes']} B in {top['outstanding_allocs']} blocks, "
          f"{top['verdict']}: {top.get('why')}")
    for f in top["frames"][:24]:
        print("   ", f.get("kind"), f.get("function"), f.get("file", f.get("module")), f.get("line", ""))
named = top and any(f.get("function") == "keep_for_later" and f.get("line") for f in top["frames"])
print("leaking Python line named:", bool(named))
for s in dev[:4]:
    print(f"device stack: {s['outstanding_bytes']} B x{s['outstanding_allocs']} allocs={s['allocs']} {s['verdict']}")
grew = sum(s["allocs"] for s in dev)
print(f"driver-level allocations: {grew}; reserved after warm-up {t['reserved_after_warmup']}, "
      f"at the end {t['memory_reserved']}")
silent = t["memory_reserved"] == t["reserved_after_warmup"] and p["device_bytes"] == t["memory_reserved"]
print("driver level silent during the leak:", silent)
print("PASS" if ok and named and silent else "FAIL")
PY
