#!/bin/sh
# bench/cli.sh: time the lease CLI against the cost of the cheapest process
# that takes a kernel lock, in one hyperfine run on the same machine.
#
#   flock       flock LOCKFILE true                    the floor
#   acquire     lease acquire of a free kind           (record removed before each run)
#   release     lease release of a held lease          (record restored before each run)
#   pair-floor  sh pairfloor.sh: out=$(flock ..); flock ..   shell shape of "pair"
#   pair        sh pair.sh: out=$(lease acquire); lease release --token <parsed>
#
# Every timed command runs with hyperfine -N (no intermediate shell), so all
# are measured the same way; the pair rows deliberately include one sh.
# Setup work (removing or restoring the record) runs in --prepare, which
# hyperfine does not time. The store lives on tmpfs (/dev/shm) when
# available, so the figures measure the program, not the disk.
#
# Environment: RUNS (default 300, at least 200), WARMUP (default 30),
# BENCH_STORE_PARENT (directory for the store; default /dev/shm, else the
# temporary directory), BENCH_KEEP=1 to keep the store and binary.
# Usage: bench/cli.sh   (from any directory)
set -eu

bench=bench/cli.sh
. "$(dirname "$0")/lib/harness.sh"
need_hyperfine
need go flock python3

RUNS=${RUNS:-300}
WARMUP=${WARMUP:-30}
[ "$RUNS" -ge 200 ] 2>/dev/null || die "RUNS must be a number >= 200 (got $RUNS)"

root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lease-bench.XXXXXX")
parent=${BENCH_STORE_PARENT:-/dev/shm}
if [ ! -d "$parent" ] || [ ! -w "$parent" ]; then
	parent=$tmp
fi
store=$(mktemp -d "$parent/lease-bench-store.XXXXXX")
cleanup() {
	if [ "${BENCH_KEEP:-0}" != 1 ]; then
		rm -rf "$store" "$tmp/lease"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# hyperfine -N splits command lines like a shell; keep paths simple.
plain_paths "$tmp" "$store"

# Built as the README installs it: CGO_ENABLED=0 gives a static binary that
# skips the dynamic loader and libc start-up (kong imports os/user, which
# otherwise links libc).
(cd "$root" && CGO_ENABLED=${CGO_ENABLED:-0} go build -o "$tmp/" ./cmd/lease ./cmd/durable-lease-etcd)

# Where and what was measured.
rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git -C "$root" status --porcelain 2>/dev/null)" ]; then rev="$rev + uncommitted changes"; fi
echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "code:    $rev"
echo "machine: $(cpus), load $(loadavg)"
echo "go:      $(go version)"
echo "store:   $store ($(df -T "$store" | awk 'NR==2 {print $2}'))"
echo "binary:  $(wc -c <"$tmp/lease") bytes, $(file -b "$tmp/lease" 2>/dev/null | cut -d, -f1-4)"
lease="$tmp/lease --store $store"

owner=bench
token=0123456789abcdef0123456789abcdef # fixed: the timed release command line is constant
held_record "$tmp/held.json" $owner $token
pair_script "$tmp/pair.sh" "$lease" $owner 10
cat >"$tmp/pairfloor.sh" <<EOF
out=\$(flock $store/x.lock true) || exit 1
exec flock $store/x.lock true
EOF

cmd_flock="flock $store/x.lock true"
cmd_acquire="$lease acquire --kind bench-acq --owner $owner --ttl 10"
cmd_release="$lease release --kind bench-rel --owner $owner --token $token"
prep_acquire="rm -f $store/bench-acq.json"
prep_release="cp $tmp/held.json $store/bench-rel.json"

# Check that each prepared run does what it claims before timing it:
# acquire must acquire, release must release (a release of a free kind
# also exits 0, as "not_held", and would time the wrong path).
$prep_acquire
expect acquire acquired $cmd_acquire
$prep_release
expect release released $cmd_release
out=$(sh "$tmp/pair.sh") || die "pair failed: $out"
case "$out" in *'"code":"released"'*) ;; *) die "pair: expected code released, got: $out" ;; esac

results="$tmp/results.json"
hyperfine -N --warmup "$WARMUP" --runs "$RUNS" --export-json "$results" \
	-n flock -p true "$cmd_flock" \
	-n acquire -p "$prep_acquire" "$cmd_acquire" \
	-n release -p "$prep_release" "$cmd_release" \
	-n pair-floor -p true "sh $tmp/pairfloor.sh" \
	-n pair -p true "sh $tmp/pair.sh"

# Nothing may be left behind but the records and the lock file.
leftovers=$(find "$store" -mindepth 1 -name '.*' | head -5)
[ -z "$leftovers" ] || die "guard or temporary files left in the store: $leftovers"

python3 - "$results" <<'EOF'
import json, statistics, sys
res = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
med = {k: statistics.median(r["times"]) for k, r in res.items()}
floor = med["flock"]
print()
mn = {k: min(r["times"]) for k, r in res.items()}
print(f"{'command':<11} {'median':>9} {'mean':>9} {'min':>9} {'runs':>5}  median ratio (min ratio)")
for k in ["flock", "acquire", "release", "pair-floor", "pair"]:
    r = res[k]
    ratio = f"{med[k]/floor:.2f}x flock ({mn[k]/mn['flock']:.2f}x)"
    if k == "pair":
        ratio += f", {med[k]/med['pair-floor']:.2f}x pair-floor ({mn[k]/mn['pair-floor']:.2f}x)"
    print(f"{k:<11} {med[k]*1e3:>7.2f}ms {r['mean']*1e3:>7.2f}ms {mn[k]*1e3:>7.2f}ms {len(r['times']):>5}  {ratio}")
print()
for k in ["acquire", "release"]:
    q = med[k] / floor
    print(f"{k}/flock median ratio: {q:.2f} (target <= 1.5: {'met' if q <= 1.5 else 'MISSED'})")
print(f"results: {sys.argv[1]}")
EOF
