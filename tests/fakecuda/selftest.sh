#!/bin/bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# selftest.sh - checks the CUDA driver stand-in and the workloads without gpuleak.
#
# Usage: tests/fakecuda/selftest.sh [OUTPUT]   (default .output, after `make fakecuda`)
# Checks that libcuda.so.1 exports every GL_APIS function as a function of its
# own that calls no other exported cu* function, that each workload's allocation
# sites call the driver themselves, that every workload runs (no wait, wait for
# stdin, hold) and that each truth file says what the workload meant: the
# "expect" object and hand-computed values. Exits 1 on the first failure.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-.output}
case "$OUT" in /*) ;; *) OUT="$ROOT/$OUT" ;; esac
LIB="$OUT/fakecuda/libcuda.so.1"
WL="$OUT/workloads"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

fail() {
	echo "selftest: FAIL: $*" >&2
	exit 1
}

[ -f "$LIB" ] || fail "$LIB not built (make fakecuda)"

# --- the library's symbols -------------------------------------------------
grep -o 'X(cu[A-Za-z0-9_]*' "$ROOT/include/gpuleak_abi.h" | cut -c3- | sort -u >"$TMP/apis"
nm -D --defined-only "$LIB" | awk '$2 == "T" { print $1, $3 }' >"$TMP/exports"
while read -r api; do
	grep -q " $api\$" "$TMP/exports" || fail "libcuda.so.1 does not export $api"
done <"$TMP/apis"
dups=$(awk '$2 ~ /^cu/ { print $1 }' "$TMP/exports" | sort | uniq -d)
[ -z "$dups" ] || fail "exported functions share an address: $dups"
if readelf -rW "$LIB" | grep -E 'JUMP_SLOT|GLOB_DAT' | grep -qE ' cu[A-Za-z0-9_]*'; then
	fail "libcuda.so.1 calls an exported cu* function through the PLT/GOT"
fi
objdump -d --no-show-raw-insn "$LIB" | awk '
	/^[0-9a-f]+ <.*>:$/ { fn = $2; gsub(/[<>:]/, "", fn); next }
	fn ~ /^cu/ && /(call|jmp)[a-z]* +[0-9a-f]+ <cu/ {
		t = $NF; gsub(/[<>]/, "", t); sub(/[+@].*/, "", t)
		if (t != fn) { print fn " -> " t; bad = 1 }
	}
	END { exit bad }' >"$TMP/calls" ||
	fail "exported functions call each other: $(cat "$TMP/calls")"

# --- every site calls the driver itself --------------------------------------
check_sites() { # binary site...
	local bin=$1 site
	shift
	objdump -d --no-show-raw-insn "$bin" >"$TMP/dis"
	for site in "$@"; do
		awk -v f="$site" '
			$0 ~ "^[0-9a-f]+ <" f ">:$" { in_fn = 1; next }
			/^[0-9a-f]+ <.*>:$/ { in_fn = 0 }
			in_fn && /call +[0-9a-f]+ <cu[A-Za-z0-9_]*@plt>|call +\*/ { found = 1 }
			END { exit !found }' "$TMP/dis" ||
			fail "$site in $bin does not call the driver"
	done
}

# --- run a workload and check its truth --------------------------------------
run() { # name args...
	local name=$1
	local -a sites
	shift
	"$WL/$name" --no-wait --truth "$TMP/$name.json" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" ||
		fail "$name $* exited with $?: $(cat "$TMP/$name.err")"
	grep -qx "ready [0-9]*" "$TMP/$name.out" || fail "$name printed: $(cat "$TMP/$name.out")"
	[ ! -s "$TMP/$name.err" ] || fail "$name wrote to stderr: $(cat "$TMP/$name.err")"
	check_json "$TMP/$name.json" "" || fail "$name: truth does not match"
	mapfile -t sites < <(python3 -c 'import json,sys
print("\n".join(json.load(open(sys.argv[1]))["sites"]))' "$TMP/$name.json")
	check_sites "$WL/$name" "${sites[@]}"
}

# check_json FILE 'key=value ...': every expect key and every given key must match.
check_json() {
	python3 - "$1" "$2" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
bad = [f"{k}: truth {t[k]}, workload expected {v}" for k, v in t["expect"].items() if t[k] != v]
for kv in sys.argv[2].split():
    k, v = kv.split("=")
    cur = t
    for part in k.split("."):
        cur = cur[part]
    if str(cur) != v:
        bad.append(f"{k}: {cur}, expected {v}")
for b in bad:
    print(f"selftest: {sys.argv[1]}: {b}", file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
}

expect() { # name 'key=value ...'
	check_json "$TMP/$1.json" "$2" || fail "$1: unexpected values"
}

M=1048576
run wl_basic
expect wl_basic "device_bytes=5605632 managed_bytes=$M host_pinned_bytes=$((5 * M))
	outstanding_allocs=17 alloc_calls=34 free_calls=17 sites.basic_site_pitch_v1=16384
	sites.basic_site_pitch_v2=21504 sites.basic_site_array=32768 sites.basic_site_array3d=8192
	sites.basic_site_mipmap=21760 sites.basic_site_alloc_v1=$((M / 2))"
run wl_vmm
expect wl_vmm "device_bytes=$((8 * M)) host_pinned_bytes=$((2 * M)) reserved_bytes=68719476736
	alloc_calls=6 free_calls=3 sites.vmm_site_nccl=0 sites.vmm_site_release_first=0
	sites.vmm_site_retained=$((2 * M))"
run wl_threads --threads 8 --iters 1000
expect wl_threads "outstanding_allocs=16 alloc_calls=8000 free_calls=7984"
run wl_oom
expect wl_oom "device_bytes=$((12 * M)) oom_failures=2 other_failures=6 free_failures=4"
run wl_preattach
expect wl_preattach "unmatched_frees=4 pre_attach_device_bytes=$((2 * M))
	device_bytes=$((3 * M / 2)) alloc_calls=3 free_calls=1"
run wl_leak --iters 5 --interval-ms 1
expect wl_leak "device_bytes=$((5 * M)) sites.leak_site_staircase=$((5 * M))
	sites.churn_site_scratch=0 alloc_calls=10 free_calls=5"
run wl_ctx
expect wl_ctx "device_bytes=$((7 * M / 2)) ctx_dropped_bytes=$((13 * M / 2 + 4096))
	ctx_dropped_allocs=7 host_pinned_bytes=0 other_failures=1"
run wl_ipc
expect wl_ipc "device_bytes=$((3 * M)) imported_bytes=$((3 * M)) alloc_calls=2"
run wl_dlopen --lib "$LIB"
expect wl_dlopen "device_bytes=$((4 * M)) alloc_calls=3 free_calls=1 loads=2"
for mode in fork exec; do
	args=()
	[ "$mode" = exec ] && args=(--exec)
	run wl_fork "${args[@]}"
	expect wl_fork "device_bytes=$((9 * M / 4)) role=parent"
	check_json "$TMP/wl_fork.json.child" \
		"device_bytes=$M alloc_calls=3 free_calls=1 role=child" ||
		fail "wl_fork ($mode): child truth"
	python3 -c 'import json,sys
p, c = (json.load(open(f))["pid"] for f in sys.argv[1:])
sys.exit(p == c)' "$TMP/wl_fork.json" "$TMP/wl_fork.json.child" || fail "wl_fork: child pid"
done

# --- the ready/wait and hold handshakes ---------------------------------------
coproc WAITER { exec "$WL/wl_leak" --iters 2 --interval-ms 1 --truth "$TMP/wait.json" --hold; }
# bash forgets a coproc's pid and descriptors once it exits: keep copies
wpid=$WAITER_PID
exec {win}>&"${WAITER[1]}" {wout}<&"${WAITER[0]}"
read -r word pid <&"$wout"
if [ "$word" != ready ] || [ "$pid" != "$wpid" ]; then
	fail "wl_leak said '$word $pid'"
fi
sleep 0.2
[ ! -e "$TMP/wait.json" ] || fail "wl_leak did not wait for stdin"
echo go >&"$win"
for _ in $(seq 50); do
	[ -e "$TMP/wait.json" ] && break
	sleep 0.1
done
[ -e "$TMP/wait.json" ] || fail "wl_leak wrote no truth"
kill -0 "$wpid" 2>/dev/null || fail "wl_leak --hold did not hold"
echo stop >&"$win"
wait "$wpid" || fail "wl_leak exited with $?"
exec {win}>&- {wout}<&-
check_json "$TMP/wait.json" "device_bytes=$((2 * M))" || fail "wl_leak handshake truth"

echo "selftest: OK ($(wc -l <"$TMP/apis") probed functions exported, 10 workloads)"
