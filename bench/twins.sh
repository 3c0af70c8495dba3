#!/bin/sh
# bench/twins.sh: what each fast twin saves a lease call. For every
# variant of bench/twins/main.go (one twin replaced by the straightforward
# code it stands for, and "none": every twin replaced), a copy of this
# checkout (git archive HEAD plus the variant's edits) is built, and its
# lease is timed beside this checkout's, all in the same hyperfine runs:
#
#   flock              flock STORE/x.lock true          the floor
#   V-acquire          lease acquire of a free kind      (record removed before each run)
#   V-release          lease release of a held lease     (record restored before each run)
#   V-status           lease status of a held lease      (prints a token fingerprint)
#
# for V = head (this checkout, every twin in) and each variant. It prints,
# for each variant, (acquire + release) / (2 x flock) and the difference
# from head per acquire + release pair, with the spread over the rounds.
# The commands take turns: ROUNDS rounds of one hyperfine -N run of RUNS
# runs each, pooled, the order reversed every other round, so drift on a
# loaded machine falls on every variant alike.
#
# Wall-clock times on a shared machine drift by more than the smaller
# twins save, so each command is also counted in instructions: the user-
# space instructions of the whole process (Go runtime and start-up
# included) under valgrind's cachegrind, the median of COUNTS runs, which
# the load of the machine does not change (the kernel's share, exec and
# page faults, is not counted; the wall-clock rows have it).
#
# Environment: ROUNDS (0: no wall-clock times), RUNS (default 20 and 30), COUNTS (default 7; 0
# skips the counts, as does a machine without valgrind), VARIANTS (default: all),
# BENCH_STORE_PARENT (default: logs/ of this checkout), BENCH_KEEP=1.
# Usage: bench/twins.sh   (from any directory)
set -eu

die() { echo "bench/twins.sh: $*" >&2; exit 2; }
for tool in go flock python3 git hyperfine; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool is required but not installed (hyperfine: apt-get install hyperfine)"
done
ROUNDS=${ROUNDS:-20}
RUNS=${RUNS:-30}
VARIANTS=${VARIANTS:-"kong signals appendjson jsonfast fencefast sha256 patterns cryptorand getrandom none"}

root=$(cd "$(dirname "$0")/.." && pwd)
parent=${BENCH_STORE_PARENT:-$root/logs}
mkdir -p "$parent"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lease-twins.XXXXXX")
store=$(mktemp -d "$parent/bench-twins.XXXXXX")
cleanup() { [ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$store" "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
case "$tmp$store" in
*[!A-Za-z0-9/._-]*) die "temporary paths must not contain spaces or quotes: $tmp $store" ;;
esac

(cd "$root" && CGO_ENABLED=0 go build -o "$tmp/head/" ./cmd/lease)
for v in $VARIANTS; do
	mkdir -p "$tmp/src-$v"
	git -C "$root" archive HEAD | tar -x -C "$tmp/src-$v"
	(cd "$root" && go run ./bench/twins/main.go "$tmp/src-$v" "$v")
	(cd "$tmp/src-$v" && CGO_ENABLED=0 go build -o "$tmp/$v/" ./cmd/lease)
done

rev=$(git -C "$root" rev-parse --short HEAD)
[ -z "$(git -C "$root" status --porcelain)" ] || rev="$rev (head is built with uncommitted changes; variants from HEAD)"
echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "code:    $rev"
echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1), kernel $(uname -r)"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) at the start"
echo "go:      $(go version)"
echo "tools:   $(hyperfine --version), $(flock --version 2>&1 | head -1)"
echo "store:   $store ($(df -T "$store" | awk 'NR==2 {print $2 " on " $1}'))"

owner=bench
out=$("$tmp/head/lease" --store "$store" acquire --kind bench-rel --owner $owner --ttl 1440) || die "acquire failed: $out"
token=${out#*\"token\":\"}
token=${token%%\"*}
[ ${#token} -eq 32 ] || die "no token in: $out"
cp "$store/bench-rel.json" "$tmp/held.json"
"$tmp/head/lease" --store "$store" acquire --kind bench-held --owner $owner --ttl 1440 >/dev/null

{
	echo "flock|true|flock $store/x.lock true"
	for v in head $VARIANTS; do
		echo "$v-acquire|rm -f $store/bench-acq.json|$tmp/$v/lease --store $store acquire --kind bench-acq --owner $owner --ttl 10"
		echo "$v-release|cp $tmp/held.json $store/bench-rel.json|$tmp/$v/lease --store $store release --kind bench-rel --owner $owner --token $token"
		echo "$v-status|true|$tmp/$v/lease --store $store status --kind bench-held"
	done
} >"$tmp/commands"

# Each command does what its name says before it is timed.
while IFS='|' read -r name prep cmd; do
	$prep
	out=$($cmd 2>&1) || die "$name failed: $out"
	case "$name" in
	*acquire) want='"code":"acquired"' ;;
	*release) want='"code":"released"' ;;
	*status) want='"token":"sha256:' ;;
	*) want= ;;
	esac
	case "$out" in *"$want"*) ;; *) die "$name: expected $want, got: $out" ;; esac
done <"$tmp/commands"

[ "$ROUNDS" -eq 0 ] || python3 - "$tmp/commands" "$ROUNDS" "$RUNS" "$tmp" "$VARIANTS" <<'PY'
import json, statistics, subprocess, sys
spec, rounds, runs, tmp, variants = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5].split()
cmds = [line.rstrip("\n").split("|", 2) for line in open(spec) if line.strip()]
times = {name: [] for name, _, _ in cmds}
per_round = []
for r in range(rounds):
    order = cmds if r % 2 == 0 else cmds[::-1]
    args = ["hyperfine", "-N", "--warmup", "3", "--runs", str(runs), "--export-json", f"{tmp}/round.json"]
    for name, prep, cmd in order:
        args += ["-n", name, "-p", prep, cmd]
    run = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        sys.exit(f"bench/twins.sh: hyperfine failed:\n{run.stderr}")
    res = {x["command"]: x["times"] for x in json.load(open(f"{tmp}/round.json"))["results"]}
    for k, v in res.items():
        times[k] += v
    per_round.append({k: statistics.median(v) for k, v in res.items()})
    print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
med = {k: statistics.median(v) for k, v in times.items()}
def pair(m, v): return m[v + "-acquire"] + m[v + "-release"]
print()
print(f"{'variant':<11} {'acquire':>8} {'release':>8} {'status':>8}  (acq+rel)/(2 flock)  pair - head's (rounds)     status - head's")
for v in ["head"] + variants:
    q = pair(med, v) / (2 * med["flock"])
    d = (pair(med, v) - pair(med, "head")) * 1e6
    ds = [(pair(m, v) - pair(m, "head")) * 1e6 for m in per_round]
    st = (med[v + "-status"] - med["head-status"]) * 1e6
    print(f"{v:<11} {med[v+'-acquire']*1e3:>6.3f}ms {med[v+'-release']*1e3:>6.3f}ms {med[v+'-status']*1e3:>6.3f}ms  {q:>18.3f}  {d:>+7.0f} µs ({min(ds):+.0f} to {max(ds):+.0f})  {st:>+7.0f} µs")
print(f"\nflock median {med['flock']*1e3:.3f} ms; {len(times['flock'])} runs of each command")
PY
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) at the end"

COUNTS=${COUNTS:-7}
if [ "$COUNTS" -gt 0 ] && ! command -v valgrind >/dev/null 2>&1; then
	echo "instructions: not counted (valgrind is not installed: apt-get install valgrind)"
	COUNTS=0
fi
[ "$COUNTS" -gt 0 ] || exit 0
count() { # prepare command...: the I refs of one run
	prep=$1
	shift
	$prep
	valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
		sed -n 's/.*I *refs: *//p' | tr -d ,
}
echo
echo "instructions (user space, median of $COUNTS runs under cachegrind):"
printf '%-11s %10s %10s %10s %12s %12s\n' variant acquire release status "acq+rel" "- head's"
headpair=
for v in head $VARIANTS; do
	l="$tmp/$v/lease --store $store"
	for what in acquire release status; do
		: >"$tmp/counts"
		i=0
		while [ $i -lt "$COUNTS" ]; do
			case $what in
			acquire) count "rm -f $store/bench-acq.json" $l acquire --kind bench-acq --owner $owner --ttl 10 ;;
			release) count "cp $tmp/held.json $store/bench-rel.json" $l release --kind bench-rel --owner $owner --token "$token" ;;
			status) count true $l status --kind bench-held ;;
			esac >>"$tmp/counts"
			i=$((i + 1))
		done
		eval "n_$what=$(sort -n "$tmp/counts" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
	done
	pair=$((n_acquire + n_release))
	[ -n "$headpair" ] || headpair=$pair
	printf '%-11s %10d %10d %10d %12d %+12d\n' "$v" "$n_acquire" "$n_release" "$n_status" "$pair" $((pair - headpair))
done
