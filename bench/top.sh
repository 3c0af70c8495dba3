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

die() { echo "bench/top.sh: $*" >&2; exit 2; }

if ! command -v hyperfine >/dev/null 2>&1; then
	cat >&2 <<'EOF'
bench/top.sh: hyperfine is not installed. Install it, then re-run:
  Debian/Ubuntu:  sudo apt-get install hyperfine
  macOS:          brew install hyperfine
  any (Rust):     cargo install --locked hyperfine
EOF
	exit 2
fi
for tool in go python3 git; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool is required but not installed"
done

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
parent=${BENCH_STORE_PARENT:-$root/logs}
mkdir -p "$parent"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pool-top-bench.XXXXXX")
store=$(mktemp -d "$parent/bench-top.XXXXXX")
cleanup() {
	if [ "${BENCH_KEEP:-0}" != 1 ]; then
		rm -rf "$store" "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# hyperfine -N splits command lines like a shell; keep paths simple.
case "$tmp$store" in
*[!A-Za-z0-9/._-]*) die "temporary paths must not contain spaces or quotes: $tmp $store" ;;
esac

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
describe() { # dir
	if git -C "$1" rev-parse --git-dir >/dev/null 2>&1; then
		rev=$(git -C "$1" rev-parse --short HEAD)
		changed=$(git -C "$1" status --porcelain | awk '{print $2}' | tr '\n' ' ')
		if [ -n "$changed" ]; then rev="$rev plus uncommitted changes to: $changed"; fi
		echo "$rev"
	else
		echo "$1 (not a git checkout)"
	fi
}
echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "base:    $base (git archive, built the same way)"
echo "code:    $(describe "$src")"
[ -z "$also_name" ] || echo "$also_name:    $(describe "$also_src")"
echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1), kernel $(uname -r)"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null) (1, 5, 15 min) at the start"
echo "go:      $(go version)"
echo "tools:   $(hyperfine --version)"
echo "store:   $store ($(df -T "$store" | awk 'NR==2 {print $2 " on " $1}'))"
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
while IFS='|' read -r name prep cmd; do
	$prep_acquire >/dev/null
	out=$($cmd 2>&1) || die "$name failed: $out"
	case "$name" in
	*status) want='"state":"free"' ;;
	*acquire) want='"token":' ;;
	esac
	case "$out" in
	*"$want"*) ;;
	*) die "$name: expected $want, got: $out" ;;
	esac
done <"$tmp/commands"
$prep_acquire >/dev/null

python3 - "$tmp/commands" "$ROUNDS" "$RUNS" "$tmp" "${also_name:-}" <<'EOF'
import json, statistics, subprocess, sys
spec, rounds, runs, tmp, also = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
cmds = [line.rstrip("\n").split("|", 2) for line in open(spec) if line.strip()]
times = {name: [] for name, _, _ in cmds}
per_round = []
for r in range(rounds):
    order = cmds if r % 2 == 0 else cmds[::-1]  # no command always first
    args = ["hyperfine", "-N", "--warmup", "5", "--runs", str(runs), "--export-json", f"{tmp}/round.json"]
    for name, prep, cmd in order:
        args += ["-n", name, "-p", prep, cmd]
    run = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:  # its warnings about outliers are noise here
        sys.exit(f"bench/top.sh: hyperfine failed:\n{run.stderr}")
    res = {x["command"]: x["times"] for x in json.load(open(f"{tmp}/round.json"))["results"]}
    for name in res:
        times[name] += res[name]
    per_round.append({k: statistics.median(v) for k, v in res.items()})
    print(f"round {r + 1}/{rounds}: code/base status {per_round[-1]['code-status'] / per_round[-1]['base-status']:.3f}, "
          f"acquire {per_round[-1]['code-acquire'] / per_round[-1]['base-acquire']:.3f}", flush=True)

def pct(t, p):
    t = sorted(t)
    return t[min(len(t) - 1, int(p * len(t)))]

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
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null) at the end"
