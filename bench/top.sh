#!/bin/sh
# bench/top.sh: what `pool top` costs every other pool call. The live view's
# terminal UI library (bubbletea, lipgloss) is linked into durable-lease-top
# alone, and pool hands `pool top` to it; this checks that pool itself did
# not get slower. It times, in the same rounds, for a base commit and for
# the code under test:
#
#   status    pool --pool FILE status                 (a one-slot pool)
#   acquire   pool --pool FILE acquire --no-wait      (on the free slot;
#             hyperfine --prepare releases it with release --force, untimed)
#
# and prints each command's median, and the code's median over the base's,
# pooled and per round (issue 11, item 1: within 5%).
#
# Both are built as the README installs them (CGO_ENABLED=0, static): the
# base from a commit (git archive), the code from a directory. The store
# is a fresh directory on the disk of the default store (logs/ of this
# checkout). The commands take turns: ROUNDS rounds of one hyperfine -N
# run of RUNS runs each, in alternating order, pooled, so drift on a
# loaded machine falls on every command alike.
#
# Environment:
#   ROUNDS, RUNS         default 10 and 50 (RUNS at least 20)
#   BENCH_BASE=<commit>  the base (default HEAD)
#   BENCH_SRC=<dir>      the code under test (default: this checkout's
#                        working tree)
#   BENCH_ALSO=<name>=<dir>  one more build to time beside them, as
#                        "<name>-status" and "<name>-acquire" (a tree with
#                        only some of the changes, say)
#   BENCH_STORE_PARENT   directory for the store (default: logs/ here)
#   BENCH_KEEP=1         keep the store, binaries and results
# Usage: bench/top.sh   (from any directory)
set -eu

bench=bench/top.sh
. "$(dirname "$0")/lib/harness.sh"
need_hyperfine
need go python3 git

ROUNDS=${ROUNDS:-10}
RUNS=${RUNS:-50}
[ "$ROUNDS" -ge 1 ] 2>/dev/null || die "ROUNDS must be a number >= 1 (got $ROUNDS)"
[ "$RUNS" -ge 20 ] 2>/dev/null || die "RUNS must be a number >= 20 (got $RUNS)"

root=$(cd "$(dirname "$0")/.." && pwd)
src=$(cd "${BENCH_SRC:-$root}" && pwd)
base=$(git -C "$root" rev-parse --short "${BENCH_BASE:-HEAD}") || die "no commit ${BENCH_BASE:-HEAD}"
also_name= also_src=
if [ -n "${BENCH_ALSO:-}" ]; then
	also_name=${BENCH_ALSO%%=*}
	also_src=$(cd "${BENCH_ALSO#*=}" && pwd) || die "BENCH_ALSO: no directory ${BENCH_ALSO#*=}"
	case "$also_name" in
	'' | *[!A-Za-z0-9_]*) die "BENCH_ALSO must be NAME=DIR with a plain name (got $BENCH_ALSO)" ;;
	esac
fi
scratch pool-top-bench bench-top

# Built as the README installs them.
mkdir "$tmp/base-src"
git -C "$root" archive "$base" | tar -x -C "$tmp/base-src"
(cd "$tmp/base-src" && CGO_ENABLED=0 go build -o "$tmp/base/" ./cmd/pool)
(cd "$src" && CGO_ENABLED=0 go build -o "$tmp/code/" ./cmd/pool ./cmd/durable-lease-top)
if [ -n "$also_name" ]; then
	(cd "$also_src" && CGO_ENABLED=0 go build -o "$tmp/also/" ./cmd/pool)
fi

# The code's pool must not link the live view's library.
if go version -m "$tmp/code/pool" | grep -q 'charmbracelet'; then
	die "the code's pool links the terminal UI library: $(go version -m "$tmp/code/pool" | grep charmbracelet | head -3)"
fi

# Where and what was measured.
echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "base:    $base (git archive, built the same way)"
echo "code:    $(describe "$src")"
[ -z "$also_name" ] || echo "$also_name:    $(describe "$also_src")"
echo "machine: $(cpus)"
echo "load:    $(loadavg) (1, 5, 15 min) at the start"
echo "go:      $(go version)"
echo "tools:   $(hyperfine --version)"
echo "store:   $store ($(fstype "$store"))"
echo "binary:  pool $(wc -c <"$tmp/base/pool") bytes (base), $(wc -c <"$tmp/code/pool") bytes (code); durable-lease-top $(wc -c <"$tmp/code/durable-lease-top") bytes"

echo '{"name": "bench", "slots": [{"id": 1}], "provision": "true"}' >"$tmp/pool.json"
args="--store $store --pool $tmp/pool.json"
# The prepare of a timed acquire frees the slot again (whoever's build).
prep_acquire="$tmp/base/pool $args release --slot 1 --force --owner bench"

# name|prepare|command, one a line.
{
	for v in base code ${also_name:+also}; do
		name=$v
		[ "$v" != also ] || name=$also_name
		echo "$name-status|true|$tmp/$v/pool $args status"
		echo "$name-acquire|$prep_acquire|$tmp/$v/pool $args acquire --owner bench --no-wait"
	done
} >"$tmp/commands"

# Check that each prepared run does what it claims before timing it.
want() { # name: what its output must hold
	case "$1" in
	*status) echo '"state":"free"' ;;
	*acquire) echo '"token":' ;;
	esac
}
check_commands "$tmp/commands" "$prep_acquire"
$prep_acquire >/dev/null

python3 - "$tmp/commands" "$ROUNDS" "$RUNS" "$tmp" "${also_name:-}" "$bench_lib" <<'EOF'
import statistics, sys
sys.path.insert(0, sys.argv[6])
from rounds import run as run_rounds, pct
spec, rounds, runs, tmp, also = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
def progress(r, m):
    print(f"round {r + 1}/{rounds}: code/base status {m['code-status'] / m['base-status']:.3f}, "
          f"acquire {m['code-acquire'] / m['base-acquire']:.3f}", flush=True)
cmds, times, per_round = run_rounds(spec, rounds, runs, tmp, 5, "bench/top.sh", progress)

med = {k: statistics.median(v) for k, v in times.items()}
print()
print(f"{'command':<18} {'median':>8} {'p10':>8} {'p90':>8} {'runs':>5}")
for name, _, _ in cmds:
    t = times[name]
    print(f"{name:<18} {med[name]*1e3:>6.2f}ms {pct(t, .1)*1e3:>6.2f}ms {pct(t, .9)*1e3:>6.2f}ms {len(t):>5}")
print()
for v in ["code"] + ([also] if also else []):
    for op in ["status", "acquire"]:
        q = med[f"{v}-{op}"] / med[f"base-{op}"]
        qs = [m[f"{v}-{op}"] / m[f"base-{op}"] for m in per_round]
        verdict = "met" if q <= 1.05 else "MISSED"
        print(f"{v} / base, {op}: {q:.3f} (rounds {min(qs):.3f} to {max(qs):.3f})  (target <= 1.05: {verdict})")
EOF
echo "load:    $(loadavg) at the end"
