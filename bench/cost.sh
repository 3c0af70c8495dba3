#!/bin/sh
# bench/cost.sh: what one lease operation costs a caller, per operation,
# against the cheapest process that takes a kernel lock, in the same run:
#
#   flock       flock STORE/x.lock true                the reference
#   acquire     lease acquire of a free kind           (record removed before each run)
#   release     lease release of a held lease          (record restored before each run)
#   status      lease status of a free kind            (start-up and a read, no write)
#   pool        pool --pool FILE status                (a one-slot pool)
#   pool-run    pool-run --kind K -- true              (acquire, run true, release)
#
# and prints (acquire + release) / (2 x flock) from the medians: the cost
# of a lease operation in flocks (issue 10, item 5: at most 1.2; issue 35,
# item 3: at most 1.1). With COUNTS, the same ratio in instructions: the
# user-space instructions of acquire, release and flock STORE/x.lock true
# (flock and its true) under valgrind's cachegrind, the median of COUNTS
# runs each, which the machine's load does not move (docs/FAST-PATHS.md).
#
# The CLIs are built as the README installs them (CGO_ENABLED=0, static).
# The store is a fresh directory on the disk of the default store (logs/
# of this checkout), not on tmpfs. The commands take turns: ROUNDS rounds
# of one hyperfine -N run of RUNS runs each, pooled, so drift on a loaded
# machine falls on every command alike; the spread is the lowest and
# highest per-round ratio. Setup (removing or restoring the record) runs
# in --prepare, which hyperfine does not time; flock's prepare is `true`,
# so every timed command follows one process start.
#
# Environment:
#   ROUNDS, RUNS         default 10 and 50 (RUNS at least 20)
#   BENCH_BASE=<commit>  also build that commit of this repository (git
#                        archive) and time its commands in the same rounds,
#                        as "base-acquire", "base-release" and so on
#   BENCH_CGO=1          also time acquire and release of a default build
#                        (cgo enabled: kong imports os/user, which then
#                        links libc), as "cgo-acquire" and "cgo-release"
#   BENCH_SRC=<dir>      build the CLIs from dir instead of this checkout
#                        (an export of a commit with some changes, say)
#   BENCH_STORE_PARENT   directory for the store (default: logs/ here)
#   BENCH_KEEP=1         keep the store, binaries and results
#   COUNTS=N             also count instructions, N runs each (default 0;
#                        needs valgrind)
#   QUICK=1              the CI form: ROUNDS=4 RUNS=20 unless set, and exit 1
#                        when the wall-clock ratio is more than 50 % over its
#                        target of 1.1 (1.65): a regression, not a timing
# Usage: bench/cost.sh   (from any directory)
set -eu

bench=bench/cost.sh
. "$(dirname "$0")/lib/harness.sh"
need_hyperfine
need go flock python3 git

if [ "${QUICK:-0}" = 1 ]; then
	ROUNDS=${ROUNDS:-4}
	RUNS=${RUNS:-20}
fi
ROUNDS=${ROUNDS:-10}
RUNS=${RUNS:-50}
COUNTS=${COUNTS:-0}
[ "$ROUNDS" -ge 1 ] 2>/dev/null || die "ROUNDS must be a number >= 1 (got $ROUNDS)"
[ "$RUNS" -ge 20 ] 2>/dev/null || die "RUNS must be a number >= 20 (got $RUNS)"

root=$(cd "$(dirname "$0")/.." && pwd)
src=$(cd "${BENCH_SRC:-$root}" && pwd)
scratch lease-cost bench-cost

# Built as the README installs them.
(cd "$src" && CGO_ENABLED=0 go build -o "$tmp/bin/" ./cmd/...)
if [ "${BENCH_CGO:-0}" = 1 ]; then
	(cd "$src" && CGO_ENABLED=1 go build -o "$tmp/cgo/" ./cmd/lease)
	file "$tmp/cgo/lease" | grep -q 'dynamically linked' || die "the cgo build is not dynamically linked"
fi
base=
if [ -n "${BENCH_BASE:-}" ]; then
	base=$(git -C "$root" rev-parse --short "$BENCH_BASE") || die "no commit $BENCH_BASE"
	mkdir "$tmp/base-src"
	git -C "$root" archive "$base" | tar -x -C "$tmp/base-src"
	(cd "$tmp/base-src" && CGO_ENABLED=0 go build -o "$tmp/base/" ./cmd/...)
fi

# Where and what was measured.
echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "code:    $(describe "$src")"
[ -z "$base" ] || echo "base:    $base (git archive, built the same way)"
echo "machine: $(cpus)"
echo "load:    $(loadavg) (1, 5, 15 min) at the start"
echo "go:      $(go version)"
echo "tools:   $(hyperfine --version), $(flock --version 2>&1 | head -1)"
echo "store:   $store ($(fstype "$store"))"
echo "binary:  $(wc -c <"$tmp/bin/lease") bytes, $(file -b "$tmp/bin/lease" | cut -d, -f1-4)"

lease="$tmp/bin/lease --store $store"
owner=bench

# The record a timed release gives back: acquired once by the CLI itself
# (so it is in whatever format the store writes), then copied back into
# the store before every run. A day's TTL keeps it live for the run.
out=$($lease acquire --kind bench-rel --owner $owner --ttl 1440) || die "acquire for the release record failed: $out"
token=${out#*\"token\":\"}
token=${token%%\"*}
[ ${#token} -eq 32 ] || die "no token in: $out"
cp "$store/bench-rel.json" "$tmp/held.json"
echo '{"name": "bench", "slots": [{"id": 1}], "provision": "true"}' >"$tmp/pool.json"

prep_acquire="rm -f $store/bench-acq.json"
prep_release="cp $tmp/held.json $store/bench-rel.json"
acquire_args="--store $store acquire --kind bench-acq --owner $owner --ttl 10"
release_args="--store $store release --kind bench-rel --owner $owner --token $token"

# name|prepare|command, one a line.
{
	echo "flock|true|flock $store/x.lock true"
	echo "acquire|$prep_acquire|$tmp/bin/lease $acquire_args"
	echo "release|$prep_release|$tmp/bin/lease $release_args"
	echo "status|true|$lease status --kind bench-free"
	echo "pool|true|$tmp/bin/pool --store $store --pool $tmp/pool.json status"
	echo "pool-run|true|$tmp/bin/pool-run --store $store --owner $owner --ttl 1 --kind bench-run -- true"
	if [ -n "$base" ]; then
		echo "base-acquire|$prep_acquire|$tmp/base/lease $acquire_args"
		echo "base-release|$prep_release|$tmp/base/lease $release_args"
		echo "base-status|true|$tmp/base/lease --store $store status --kind bench-free"
		echo "base-pool|true|$tmp/base/pool --store $store --pool $tmp/pool.json status"
		echo "base-pool-run|true|$tmp/base/pool-run --store $store --owner $owner --ttl 1 --kind bench-run -- true"
	fi
	if [ "${BENCH_CGO:-0}" = 1 ]; then
		echo "cgo-acquire|$prep_acquire|$tmp/cgo/lease $acquire_args"
		echo "cgo-release|$prep_release|$tmp/cgo/lease $release_args"
	fi
} >"$tmp/commands"

# Check that each prepared run does what it claims before timing it:
# acquire must acquire, release must release (a release of a free kind
# also exits 0, as "not_held", and would time the wrong path), pool-run
# must run its command. The same checks hold for every build.
want() { # name: what its output must hold
	case "$1" in
	*acquire) echo '"code":"acquired"' ;;
	*release) echo '"code":"released"' ;;
	*status) echo '"state":"free"' ;;
	*pool) echo '"ok":true' ;;
	*pool-run) echo 'exit 0' ;;
	*) echo ;;
	esac
}
check_commands "$tmp/commands"

status=0
python3 - "$tmp/commands" "$ROUNDS" "$RUNS" "$tmp" "$bench_lib" "${QUICK:-0}" <<'EOF' || status=$?
import statistics, sys
sys.path.insert(0, sys.argv[5])
from rounds import run as run_rounds, pct
spec, rounds, runs, tmp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def progress(r, m):
    print(f"round {r + 1}/{rounds}: (acquire + release) / (2 x flock) = "
          f"{(m['acquire'] + m['release']) / (2 * m['flock']):.2f}", flush=True)
cmds, times, per_round = run_rounds(spec, rounds, runs, tmp, 5, "bench/cost.sh", progress)

med = {k: statistics.median(v) for k, v in times.items()}
flock = med["flock"]
print()
print(f"{'command':<13} {'median':>8} {'p10':>8} {'p90':>8} {'runs':>5}  median / flock")
for name, _, _ in cmds:
    t = times[name]
    print(f"{name:<13} {med[name]*1e3:>6.2f}ms {pct(t, .1)*1e3:>6.2f}ms {pct(t, .9)*1e3:>6.2f}ms {len(t):>5}  {med[name]/flock:.2f}x")
print()
def per_op(prefix):
    q = (med[prefix + "acquire"] + med[prefix + "release"]) / (2 * flock)
    qs = [(m[prefix + "acquire"] + m[prefix + "release"]) / (2 * m["flock"]) for m in per_round]
    return q, min(qs), max(qs)
fail = False
for prefix, label in [("", "this build"), ("base-", "base"), ("cgo-", "cgo build")]:
    if prefix + "acquire" in med:
        q, lo, hi = per_op(prefix)
        verdict = "" if prefix else f"  (target <= 1.1: {'met' if q <= 1.1 else 'MISSED'})"
        if not prefix and sys.argv[6] == "1" and q > 1.65:
            verdict += "; FAILED: more than 50 % over the target (1.65)"
            fail = True
        print(f"per operation, {label}: (acquire + release) / (2 x flock) = {q:.2f} "
              f"(rounds {lo:.2f} to {hi:.2f}){verdict}")
sys.exit(1 if fail else 0)
EOF
echo "load:    $(loadavg) at the end"

# Nothing may be left behind but the records, the lock file and the
# fence counters.
leftovers=$(find "$store" -mindepth 1 -name '.guard*' -o -mindepth 1 -name '.tmp*' | head -5)
[ -z "$leftovers" ] || die "guard or temporary files left in the store: $leftovers"

if [ "$COUNTS" -gt 0 ]; then
	need valgrind
	count() { # prepare command...: the instructions of one run, children included
		prep=$1
		shift
		$prep
		valgrind --tool=cachegrind --cache-sim=no --trace-children=yes --cachegrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
			sed -n 's/.*I *refs: *//p' | tr -d , | awk '{s += $1} END {print s}'
	}
	median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
	for what in flock acquire release base-acquire base-release; do
		line=$(grep "^$what|" "$tmp/commands") || continue
		prep=$(echo "$line" | cut -d'|' -f2)
		cmd=$(echo "$line" | cut -d'|' -f3)
		i=0
		while [ $i -lt "$COUNTS" ]; do
			count "$prep" $cmd
			i=$((i + 1))
		done | median >"$tmp/count.$what"
	done
	echo
	echo "instructions (user space, children included, median of $COUNTS runs under cachegrind):"
	for prefix in "" base-; do
		[ -s "$tmp/count.${prefix}acquire" ] || continue
		a=$(cat "$tmp/count.${prefix}acquire") r=$(cat "$tmp/count.${prefix}release") f=$(cat "$tmp/count.flock")
		awk -v a="$a" -v r="$r" -v f="$f" -v l="$( [ -z "$prefix" ] && echo "this build" || echo base)" 'BEGIN {
			printf "  %s: acquire %d, release %d, flock STORE/x.lock true %d: (acquire + release) / (2 x flock) = %.2f (target <= 1.1)\n", l, a, r, f, (a + r) / (2 * f) }'
	done
fi
exit $status
