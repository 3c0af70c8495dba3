#!/bin/sh
# bench/scale.sh: how pool calls grow with the pool and its queue, in one
# hyperfine -N run per pair, as ratios:
#
#   no-wait   `pool acquire --no-wait` on a 100-slot pool with 99 slots held,
#             against the same pool with none held (the slot it gets is
#             force-released, untimed, before each run)
#   status    `pool status` with 1000 queued entries (made with
#             `pool enqueue`; waiterStaleMs is an hour, so they stay live),
#             against an empty queue
#
# Environment: RUNS (default 100), WARMUP (default 10), BENCH_STORE_PARENT
# (default /dev/shm, else the temporary directory), QUEUED (default 1000).
# Usage: bench/scale.sh   (from any directory)
set -eu

die() { echo "bench/scale.sh: $*" >&2; exit 2; }
command -v hyperfine >/dev/null 2>&1 || die "hyperfine is not installed (apt-get install hyperfine)"
command -v go >/dev/null 2>&1 || die "go is required"

RUNS=${RUNS:-100}
WARMUP=${WARMUP:-10}
QUEUED=${QUEUED:-1000}
root=$(cd "$(dirname "$0")/.." && pwd)
parent=${BENCH_STORE_PARENT:-/dev/shm}
{ [ -d "$parent" ] && [ -w "$parent" ]; } || parent=${TMPDIR:-/tmp}
tmp=$(mktemp -d "$parent/pool-scale.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

(cd "$root" && CGO_ENABLED=0 go build -o "$tmp/bin/" ./cmd/pool)
pool=$tmp/bin/pool

slots=$(i=1; sep=; while [ $i -le 100 ]; do printf '%s{"id":%d}' "$sep" $i; sep=,; i=$((i + 1)); done)
cat > "$tmp/big.json" <<EOF
{"name":"big","provision":"true","slots":[$slots]}
EOF
cat > "$tmp/queue.json" <<EOF
{"name":"q","waiterStaleMs":3600000,"slots":[{"id":1}]}
EOF

# 99 of 100 slots held in one store; none in the other.
held=$tmp/held empty=$tmp/empty
i=1
while [ $i -le 99 ]; do
	"$pool" --store "$held" --pool "$tmp/big.json" acquire --owner "h$i" --no-wait --ttl 60 >/dev/null
	i=$((i + 1))
done
"$pool" --store "$held" --pool "$tmp/big.json" acquire --owner probe --no-wait | grep -q '"slot":100' || die "the 100th slot was not the one granted"
"$pool" --store "$empty" --pool "$tmp/big.json" acquire --owner probe --no-wait | grep -q '"slot":1' || die "slot 1 was not granted on an empty pool"

# QUEUED entries in one queue; none in the other.
qfull=$tmp/qfull qempty=$tmp/qempty
"$pool" --store "$qfull" --pool "$tmp/queue.json" acquire --owner holder --no-wait --ttl 60 >/dev/null
"$pool" --store "$qempty" --pool "$tmp/queue.json" acquire --owner holder --no-wait --ttl 60 >/dev/null
i=1
while [ $i -le "$QUEUED" ]; do
	"$pool" --store "$qfull" --pool "$tmp/queue.json" enqueue --owner "w$i" >/dev/null
	i=$((i + 1))
done
n=$("$pool" --store "$qfull" --pool "$tmp/queue.json" status | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["queue"]))')
[ "$n" -eq "$QUEUED" ] || die "the queue holds $n entries, not $QUEUED"

hyperfine -N -w "$WARMUP" -r "$RUNS" --export-json "$tmp/nowait.json" \
	--prepare "$pool --store $empty --pool $tmp/big.json release --slot 1 --force --owner bench" \
	-n empty "$pool --store $empty --pool $tmp/big.json acquire --owner probe --no-wait" \
	--prepare "$pool --store $held --pool $tmp/big.json release --slot 100 --force --owner bench" \
	-n 99-held "$pool --store $held --pool $tmp/big.json acquire --owner probe --no-wait" >/dev/null
hyperfine -N -w "$WARMUP" -r "$RUNS" --export-json "$tmp/status.json" \
	-n empty "$pool --store $qempty --pool $tmp/queue.json status" \
	-n "$QUEUED-queued" "$pool --store $qfull --pool $tmp/queue.json status" >/dev/null

python3 - "$tmp/nowait.json" "$tmp/status.json" "$QUEUED" <<'EOF'
import json, sys
def medians(path):
    return [(r["command"], r["median"] * 1000) for r in json.load(open(path))["results"]]
nw = medians(sys.argv[1]); st = medians(sys.argv[2])
print("| measure | base case | scaled case | ratio | target |")
print("|---|---|---|---|---|")
r = nw[1][1] / nw[0][1]
print(f"| pool acquire --no-wait, 100 slots | none held: {nw[0][1]:.2f} ms | 99 held: {nw[1][1]:.2f} ms | {r:.2f}x | <= 2x: {'met' if r <= 2 else 'MISSED'} |")
r = st[1][1] / st[0][1]
ok = r <= 10 and st[1][1] <= 200
print(f"| pool status | empty queue: {st[0][1]:.2f} ms | {sys.argv[3]} queued: {st[1][1]:.2f} ms | {r:.2f}x | <= 10x and <= 200 ms: {'met' if ok else 'MISSED'} |")
EOF
