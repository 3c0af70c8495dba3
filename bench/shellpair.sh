#!/bin/sh
# bench/shellpair.sh: pool-run against what it replaces, in the same rounds
# (issue 35, item 1):
#
#   pair        sh pair.sh: out=$(lease acquire ...), the token cut out with
#               shell expansion, lease release --token ... (the hand-written
#               shell pair; one sh included)
#   acquire     lease acquire of a free kind           (record removed before each run)
#   release     lease release of a held lease          (record restored before each run)
#   pool-run    pool-run --kind K -- true              (acquire, the guardian, the
#               run's cgroup where one can be made, true, release)
#   flock       flock STORE/x.lock true                for scale
#
# and prints, from the medians of all rounds pooled,
#
#   pool-run / pair                   target <= 1.0
#   pool-run / (acquire + release)    target <= 1.3
#
# with the lowest and highest per-round ratio. The CLIs are built as the
# README installs them (CGO_ENABLED=0). The store is on tmpfs (/dev/shm)
# when there is one, as in bench/poolrun.sh. The commands take turns
# (bench/lib/rounds.py): ROUNDS rounds of one hyperfine -N run of RUNS
# runs of each, the order reversed every other round.
#
# Environment:
#   ROUNDS, RUNS         default 30 and 20 (RUNS at least 5)
#   QUICK=1              the CI form: ROUNDS=5 RUNS=10 unless set, and exit 1
#                        when a ratio is more than 50 % over its target
#                        (1.5 and 1.95): a regression, not a timing
#   BENCH_BASE=<commit>  also time that commit's pool-run (base-pool-run) in
#                        the same rounds
#   BENCH_STORE_PARENT   directory for the store (default /dev/shm, else $TMPDIR)
#   BENCH_KEEP=1         keep the store, binaries and results
# Usage: bench/shellpair.sh   (from any directory)
set -eu

bench=bench/shellpair.sh
. "$(dirname "$0")/lib/harness.sh"
need_hyperfine
need go flock python3 git

if [ "${QUICK:-0}" = 1 ]; then
	ROUNDS=${ROUNDS:-5}
	RUNS=${RUNS:-10}
fi
ROUNDS=${ROUNDS:-30}
RUNS=${RUNS:-20}
[ "$ROUNDS" -ge 1 ] 2>/dev/null || die "ROUNDS must be a number >= 1 (got $ROUNDS)"
[ "$RUNS" -ge 5 ] 2>/dev/null || die "RUNS must be a number >= 5 (got $RUNS)"

root=$(cd "$(dirname "$0")/.." && pwd)
parent=${BENCH_STORE_PARENT:-/dev/shm}
[ -d "$parent" ] && [ -w "$parent" ] || parent=${TMPDIR:-/tmp}
BENCH_STORE_PARENT=$parent
scratch shellpair bench-shellpair

(cd "$root" && CGO_ENABLED=0 go build -o "$tmp/bin/" ./cmd/lease ./cmd/pool-run)
base=
if [ -n "${BENCH_BASE:-}" ]; then
	base=$(git -C "$root" rev-parse --short "$BENCH_BASE") || die "no commit $BENCH_BASE"
	mkdir "$tmp/base-src"
	git -C "$root" archive "$base" | tar -x -C "$tmp/base-src"
	(cd "$tmp/base-src" && CGO_ENABLED=0 go build -o "$tmp/base/" ./cmd/pool-run)
fi

echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "code:    $(describe "$root")"
[ -z "$base" ] || echo "base:    $base (git archive, built the same way)"
echo "machine: $(cpus)"
echo "load:    $(loadavg) (1, 5, 15 min) at the start"
echo "go:      $(go version)"
echo "tools:   $(hyperfine --version), $(flock --version 2>&1 | head -1)"
echo "store:   $store ($(fstype "$store"))"

lease="$tmp/bin/lease --store $store"
owner=bench
out=$($lease acquire --kind bench-rel --owner $owner --ttl 1440) || die "acquire for the release record failed: $out"
token=${out#*\"token\":\"}
token=${token%%\"*}
[ ${#token} -eq 32 ] || die "no token in: $out"
cp "$store/bench-rel.json" "$tmp/held.json"
pair_script "$tmp/pair.sh" "$lease" $owner 1

{
	echo "flock|true|flock $store/x.lock true"
	echo "acquire|rm -f $store/bench-acq.json|$lease acquire --kind bench-acq --owner $owner --ttl 1"
	echo "release|cp $tmp/held.json $store/bench-rel.json|$lease release --kind bench-rel --owner $owner --token $token"
	echo "pair|true|sh $tmp/pair.sh"
	echo "pool-run|true|$tmp/bin/pool-run --store $store --owner $owner --ttl 1 --kind bench-run -- true"
	[ -z "$base" ] || echo "base-pool-run|true|$tmp/base/pool-run --store $store --owner $owner --ttl 1 --kind bench-run -- true"
} >"$tmp/commands"

want() {
	case "$1" in
	acquire) echo '"code":"acquired"' ;;
	release | pair) echo '"code":"released"' ;;
	*pool-run) echo 'exit 0' ;;
	*) echo ;;
	esac
}
check_commands "$tmp/commands"
# pool-run really holds the lease while its command runs, in its cgroup
# where one can be made.
out=$($tmp/bin/pool-run --store $store --owner $owner --ttl 1 --kind bench-run -- $lease status --kind bench-run 2>&1) || die "pool-run failed: $out"
case "$out" in *'"state":"held"'*'exit 0'*) ;; *) die "pool-run: expected the lease held during the command, got: $out" ;; esac
echo "contain: $($tmp/bin/pool-run --store $store --kind bench-run --explain | python3 -c 'import json, sys; c = json.load(sys.stdin)["containment"]; print(c["kind"], c.get("cgroup", ""), "(" + c["why"] + ")")')"

python3 - "$tmp/commands" "$ROUNDS" "$RUNS" "$tmp" "$bench_lib" "${QUICK:-0}" <<'EOF'
import statistics, sys
sys.path.insert(0, sys.argv[5])
from rounds import run as run_rounds, pct
spec, rounds, runs, tmp, quick = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[6] == "1"
def ratios(m, p="pool-run"):
    return m[p] / m["pair"], m[p] / (m["acquire"] + m["release"])
def progress(r, m):
    a, b = ratios(m)
    print(f"round {r + 1}/{rounds}: pool-run / pair {a:.2f}, / (acquire + release) {b:.2f}", flush=True)
cmds, times, per_round = run_rounds(spec, rounds, runs, tmp, 3, "bench/shellpair.sh", progress)
med = {k: statistics.median(v) for k, v in times.items()}
print()
print(f"{'command':<14} {'median':>8} {'p10':>8} {'p90':>8} {'runs':>5}")
for name, _, _ in cmds:
    t = times[name]
    print(f"{name:<14} {med[name]*1e3:>6.2f}ms {pct(t, .1)*1e3:>6.2f}ms {pct(t, .9)*1e3:>6.2f}ms {len(t):>5}")
print()
fail = False
for i, (what, target) in enumerate([("pool-run / pair", 1.0), ("pool-run / (acquire + release)", 1.3)]):
    q = ratios(med)[i]
    qs = [ratios(m)[i] for m in per_round]
    verdict = "met" if q <= target else "MISSED"
    if quick and q > 1.5 * target:
        verdict, fail = f"FAILED: more than 50 % over the target ({1.5 * target:.2f})", True
    print(f"{what} = {q:.2f} (rounds {min(qs):.2f} to {max(qs):.2f}; target <= {target}: {verdict})")
if "base-pool-run" in med:
    a, b = ratios(med, "base-pool-run")
    print(f"base: pool-run / pair = {a:.2f}, / (acquire + release) = {b:.2f}; this pool-run / the base's = {med['pool-run'] / med['base-pool-run']:.2f}")
sys.exit(1 if fail else 0)
EOF
echo "load:    $(loadavg) at the end"
leftovers=$(find "$store" -mindepth 1 -name '.guard*' -o -mindepth 1 -name '.tmp*' | head -5)
[ -z "$leftovers" ] || die "guard or temporary files left in the store: $leftovers"
