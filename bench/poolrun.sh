#!/bin/sh
# bench/poolrun.sh: time pool-run's own cost, and the output throughput of a
# command run under it, each against a reference measured in the same
# hyperfine run on the same machine.
#
# Part 1, overhead (hyperfine -N, RUNS runs each after WARMUP warm-ups):
#   true        true                                   the floor: one exec
#   acquire     lease acquire of a free kind           (record removed before each run)
#   release     lease release of a held lease          (record restored before each run)
#   pair        sh pair.sh: out=$(lease acquire); lease release --token <parsed>
#               the reference: what a shell user does by hand (one sh included,
#               as in bench/cli.sh)
#   pool-run    pool-run --kind K -- true              acquire, first heartbeat,
#               start true in its own process group, wait, release
#
# Part 2, throughput (TP_ROUNDS rounds of hyperfine -N, TP_RUNS runs of each
# command per round after TP_WARMUP, the rounds' times pooled):
#   plain mode, stdout to /dev/null (hyperfine --output=null) and to a pipe
#   that hyperfine reads and discards (--output=pipe):
#     true, pool-run-true   the fixed start-up cost, to subtract
#     direct    head -c PLAIN_MIB M /dev/zero
#     pool-run  pool-run --kind K -- head -c PLAIN_MIB M /dev/zero
#               (the command inherits stdout: no copy)
#   through a pseudo-terminal: script(1) gives its command a pty, so pool-run
#   sees a terminal on stdin and stdout, gives head a pty of its own and
#   copies its output to script's pty (two pty hops; direct has one):
#     pty-true          script -qfec true /dev/null         script's own cost
#     pty-pool-run-true script -qfec 'pool-run -- true' /dev/null
#     pty-direct        script -qfec 'head -c PTY_MIB M /dev/zero' /dev/null
#     pty-pool-run      script -qfec 'pool-run -- head -c ...' /dev/null
#     pty-no-pty        script -qfec 'pool-run --no-pty -- head -c ...' /dev/null
#                       (head writes to script's pty itself: one hop)
#
# Before timing, the script checks each path does what it claims: pool-run
# acquires and releases (nothing left in the store), the plain-mode command
# writes straight to the file it was given, the pty-mode command is on a
# terminal other than script's (and on script's own with --no-pty), and every
# byte arrives.
#
# Binaries are built as the README installs them: CGO_ENABLED=0, static.
# The store lives on tmpfs (/dev/shm) when available.
#
# Environment: RUNS (default 300, at least 200), WARMUP (default 30),
# TP_ROUNDS (default 6), TP_RUNS (default 4), TP_WARMUP (default 1),
# PLAIN_MIB (default 300), PTY_MIB (default 100), BENCH_STORE_PARENT
# (directory for the store; default /dev/shm, else the temporary directory),
# BENCH_PARTS (default "overhead throughput"; either word alone runs that
# part), BENCH_KEEP=1 to keep the store and binaries, BENCH_BASE=<commit>
# to also time that commit's pool-run (pool-run-base) in the overhead part,
# in the same hyperfine run.
# Usage: bench/poolrun.sh   (from any directory)
set -eu

bench=bench/poolrun.sh
. "$(dirname "$0")/lib/harness.sh"
need_hyperfine
need go python3 head tr wc

RUNS=${RUNS:-300}
WARMUP=${WARMUP:-30}
TP_ROUNDS=${TP_ROUNDS:-6}
TP_RUNS=${TP_RUNS:-4}
TP_WARMUP=${TP_WARMUP:-1}
PLAIN_MIB=${PLAIN_MIB:-300}
PTY_MIB=${PTY_MIB:-100}
BENCH_PARTS=${BENCH_PARTS:-overhead throughput}
[ "$RUNS" -ge 200 ] 2>/dev/null || die "RUNS must be a number >= 200 (got $RUNS)"
[ "$TP_RUNS" -ge 2 ] 2>/dev/null || die "TP_RUNS must be a number >= 2 (got $TP_RUNS)"
[ "$TP_ROUNDS" -ge 1 ] 2>/dev/null || die "TP_ROUNDS must be a positive number (got $TP_ROUNDS)"
[ "$PLAIN_MIB" -ge 1 ] 2>/dev/null || die "PLAIN_MIB must be a positive number (got $PLAIN_MIB)"
[ "$PTY_MIB" -ge 1 ] 2>/dev/null || die "PTY_MIB must be a positive number (got $PTY_MIB)"
part() { case " $BENCH_PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
if part throughput; then
	command -v script >/dev/null 2>&1 || die "script (util-linux) is required for the pty part: apt-get install util-linux, or BENCH_PARTS=overhead"
fi

root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/poolrun-bench.XXXXXX")
parent=${BENCH_STORE_PARENT:-/dev/shm}
if [ ! -d "$parent" ] || [ ! -w "$parent" ]; then
	parent=$tmp
fi
store=$(mktemp -d "$parent/poolrun-bench-store.XXXXXX")
cleanup() {
	if [ "${BENCH_KEEP:-0}" != 1 ]; then
		rm -rf "$store" "${tmp:?}/bin"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# hyperfine -N splits command lines like a shell; keep paths simple.
plain_paths "$tmp" "$store"

# Built as the README installs them: CGO_ENABLED=0 gives static binaries
# that skip the dynamic loader and libc start-up.
mkdir "$tmp/bin"
(cd "$root" && CGO_ENABLED=${CGO_ENABLED:-0} go build -o "$tmp/bin" ./cmd/...)
[ -x "$tmp/bin/pool-run" ] || die "go build ./cmd/... made no pool-run binary"
base=
if [ -n "${BENCH_BASE:-}" ]; then
	base=$(git -C "$root" rev-parse --short "$BENCH_BASE") || die "no commit $BENCH_BASE"
	mkdir "$tmp/base-src" "$tmp/bin/base"
	git -C "$root" archive "$base" | tar -x -C "$tmp/base-src"
	(cd "$tmp/base-src" && CGO_ENABLED=${CGO_ENABLED:-0} go build -o "$tmp/bin/base/" ./cmd/pool-run)
	rm -rf "$tmp/base-src"
fi

# script(1) runs its command with $SHELL -c; fix the shell so runs compare.
SHELL=/bin/sh
export SHELL

# Where and what was measured.
rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$root" status --porcelain 2>/dev/null | awk '{print $NF}')
if [ -n "$dirty" ]; then
	ndirty=$(echo "$dirty" | wc -l)
	more=""
	[ "$ndirty" -le 5 ] || more=" ..."
	rev="$rev + uncommitted changes ($ndirty paths: $(echo "$dirty" | head -5 | tr '\n' ' ' | sed 's/ $//')$more)"
fi
load=$(loadavg || echo unknown)
echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "code:    $rev"
echo "machine: $(cpus), load $load"
echo "go:      $(go version)"
[ -z "$base" ] || echo "base:    pool-run-base is commit $base"
echo "tools:   $(hyperfine --version), $(script --version 2>/dev/null || echo 'no script')"
echo "store:   $store ($(df -T "$store" | awk 'NR==2 {print $2}'))"
for b in lease pool-run; do
	echo "binary:  $b $(wc -c <"$tmp/bin/$b") bytes, $(file -b "$tmp/bin/$b" 2>/dev/null | cut -d, -f1-4)"
done
case $load in
[0-9].*) awk -v l="${load%% *}" 'BEGIN { exit !(l > 0.5) }' &&
	echo "warning: the 1-minute load is ${load%% *}; the machine is not idle and the figures will be noisy" >&2 ;;
esac

lease="$tmp/bin/lease --store $store"
poolrun="$tmp/bin/pool-run --store $store --owner bench --ttl 1"
owner=bench

clean_store() { # nothing may be left behind but the named records
	leftovers=$(find "$store" -mindepth 1 -name '.*' | head -5)
	[ -z "$leftovers" ] || die "guard or temporary files left in the store: $leftovers"
	[ ! -e "$store/bench-run.json" ] || die "pool-run left its lease record behind: $store/bench-run.json"
}

summaries=""

if part overhead; then
	token=0123456789abcdef0123456789abcdef # fixed: the timed release command line is constant
	held_record "$tmp/held.json" $owner $token
	pair_script "$tmp/pair.sh" "$lease" $owner 1
	cmd_acquire="$lease acquire --kind bench-acq --owner $owner --ttl 1"
	cmd_release="$lease release --kind bench-rel --owner $owner --token $token"
	cmd_poolrun="$poolrun --kind bench-run -- true"
	prep_acquire="rm -f $store/bench-acq.json"
	prep_release="cp $tmp/held.json $store/bench-rel.json"

	$prep_acquire
	expect acquire acquired $cmd_acquire
	$prep_release
	expect release released $cmd_release
	out=$(sh "$tmp/pair.sh") || die "pair failed: $out"
	case "$out" in *'"code":"released"'*) ;; *) die "pair: expected code released, got: $out" ;; esac
	# pool-run must really hold the lease while the command runs, and let go.
	out=$($poolrun --kind bench-run -- $lease status --kind bench-run 2>&1) || die "pool-run failed: $out"
	case "$out" in
	*'"state":"held"'*'pool-run: held lease bench-run'*'exit 0'*) ;;
	*) die "pool-run: expected the lease held during the command and a clean exit, got: $out" ;;
	esac
	clean_store

	echo
	echo "== overhead: hyperfine -N, $RUNS runs after $WARMUP warm-ups"
	set -- -n pool-run -p true "$cmd_poolrun"
	if [ -n "$base" ]; then
		set -- "$@" -n pool-run-base -p true "$tmp/bin/base/pool-run --store $store --owner bench --ttl 1 --kind bench-run -- true"
	fi
	hyperfine -N --warmup "$WARMUP" --runs "$RUNS" --export-json "$tmp/overhead.json" \
		-n true -p true "true" \
		-n acquire -p "$prep_acquire" "$cmd_acquire" \
		-n release -p "$prep_release" "$cmd_release" \
		-n pair -p true "sh $tmp/pair.sh" \
		"$@"
	clean_store
	summaries="$summaries overhead"
fi

if part throughput; then
	plain_bytes=$((PLAIN_MIB * 1048576))
	pty_bytes=$((PTY_MIB * 1048576))
	prk="$poolrun --kind bench-run"

	# Plain mode: the command gets pool-run's stdout itself, not a copy.
	$prk -- readlink /proc/self/fd/1 >"$tmp/fd1.txt" 2>/dev/null </dev/null || die "pool-run readlink failed"
	[ "$(cat "$tmp/fd1.txt")" = "$tmp/fd1.txt" ] ||
		die "plain mode: the command's stdout is $(cat "$tmp/fd1.txt"), not the file pool-run was given"
	n=$($prk -- head -c "${PLAIN_MIB}M" /dev/zero 2>/dev/null </dev/null | wc -c)
	[ "$n" -eq "$plain_bytes" ] || die "plain mode: $n bytes arrived, not $plain_bytes"

	# Pty mode: under script, pool-run gives the command a terminal of its
	# own; with --no-pty the command is on script's terminal.
	ttys=$(script -qfec "tty; $prk -- tty" /dev/null </dev/null | tr -d '\r')
	t0=$(echo "$ttys" | sed -n 1p) t1=$(echo "$ttys" | sed -n 2p)
	case "$t0,$t1" in
	/dev/pts/*,/dev/pts/*) [ "$t0" != "$t1" ] || die "pty mode: the command is on script's terminal $t0, not a pty of its own" ;;
	*) die "pty mode: expected two terminals, got: $ttys" ;;
	esac
	echo "pty:     script's terminal $t0, the command's under pool-run $t1"
	ttys=$(script -qfec "tty; $prk --no-pty -- tty" /dev/null </dev/null | tr -d '\r')
	[ "$(echo "$ttys" | sed -n 1p)" = "$(echo "$ttys" | sed -n 2p)" ] ||
		die "--no-pty: expected the command on script's terminal, got: $ttys"
	for c in "head -c ${PTY_MIB}M /dev/zero" "$prk -- head -c ${PTY_MIB}M /dev/zero" "$prk --no-pty -- head -c ${PTY_MIB}M /dev/zero"; do
		n=$(script -qfec "$c" /dev/null </dev/null | tr -cd '\000' | wc -c)
		[ "$n" -eq "$pty_bytes" ] || die "through the pty ($c): $n zero bytes arrived, not $pty_bytes"
	done
	clean_store

	# Throughput on this VM drifts by tens of percent from one minute to
	# the next, so the commands take turns: TP_ROUNDS hyperfine runs of
	# TP_RUNS each, the times of all rounds pooled.
	rounds() { # name hyperfine-args...
		name=$1
		shift
		r=1
		while [ "$r" -le "$TP_ROUNDS" ]; do
			echo
			echo "== $name, round $r of $TP_ROUNDS: hyperfine -N, $TP_RUNS runs after $TP_WARMUP warm-up(s)"
			hyperfine -N --warmup "$TP_WARMUP" --runs "$TP_RUNS" --export-json "$tmp/$name.$r.json" "$@"
			r=$((r + 1))
		done
		summaries="$summaries $name"
	}
	for output in null pipe; do
		rounds "plain-$output" --output="$output" \
			-n true "true" \
			-n pool-run-true "$prk -- true" \
			-n direct "head -c ${PLAIN_MIB}M /dev/zero" \
			-n pool-run "$prk -- head -c ${PLAIN_MIB}M /dev/zero"
	done
	rounds pty \
		-n pty-true "script -qfec true /dev/null" \
		-n pty-pool-run-true "script -qfec \"$prk -- true\" /dev/null" \
		-n pty-direct "script -qfec \"head -c ${PTY_MIB}M /dev/zero\" /dev/null" \
		-n pty-pool-run "script -qfec \"$prk -- head -c ${PTY_MIB}M /dev/zero\" /dev/null" \
		-n pty-no-pty "script -qfec \"$prk --no-pty -- head -c ${PTY_MIB}M /dev/zero\" /dev/null"
	clean_store
fi

python3 - "$tmp" "$PLAIN_MIB" "$PTY_MIB" $summaries <<'EOF'
import glob, json, os, statistics, sys
tmp, plain_mib, pty_mib, parts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
def load(name):
    # one file, or the rounds name.1.json, name.2.json, ... pooled
    files = [os.path.join(tmp, name + ".json")]
    if not os.path.exists(files[0]):
        files = sorted(glob.glob(os.path.join(tmp, name + ".*.json")))
    out = {}
    for f in files:
        for r in json.load(open(f))["results"]:
            o = out.setdefault(r["command"], {"times": []})
            o["times"] += r["times"]
    for o in out.values():
        o["mean"] = statistics.mean(o["times"])
    return out
med = lambda r: statistics.median(r["times"])
def row(name, r, extra=""):
    print(f"{name:<18} {med(r)*1e3:>9.2f}ms {r['mean']*1e3:>9.2f}ms {min(r['times'])*1e3:>9.2f}ms {len(r['times']):>5}  {extra}")
def head():
    print(f"{'command':<18} {'median':>11} {'mean':>11} {'min':>11} {'runs':>5}")
verdict = []
if "overhead" in parts:
    o = load("overhead")
    m = {k: med(r) for k, r in o.items()}
    print(); head()
    for k in ["true", "acquire", "release", "pair", "pool-run"]:
        row(k, o[k])
    over = m["pool-run"] - m["true"]
    ar = m["acquire"] + m["release"]
    q = over / m["pair"]
    print()
    print(f"pool-run overhead (pool-run -- true minus true): {over*1e3:.2f} ms")
    print(f"  / pair (sh: acquire, then release with the token): {q:.2f}x; pool-run -- true / pair: {m['pool-run']/m['pair']:.2f}x")
    print(f"  / (acquire + release, each without sh, {ar*1e3:.2f} ms): {over/ar:.2f}x")
    verdict.append(f"overhead / pair median ratio: {q:.2f} (target <= 2: {'met' if q <= 2 else 'MISSED'})")
    if "pool-run-base" in o:
        row("pool-run-base", o["pool-run-base"])
        ob = m["pool-run-base"] - m["true"]
        print(f"pool-run-base overhead: {ob*1e3:.2f} ms; this pool-run's / the base's: {over/ob:.2f}x (pool-run -- true: {m['pool-run']/m['pool-run-base']:.2f}x)")
def throughput(res, direct, via, nbytes, floor_direct=None, floor_via=None):
    td, tv = med(res[direct]), med(res[via])
    mbd, mbv = nbytes / td / 1e6, nbytes / tv / 1e6
    line = f"  {via}: {mbv:.0f} MB/s against {direct} {mbd:.0f} MB/s: {td/tv*100:.1f}% of direct"
    if floor_direct and floor_via:
        fd, fv = med(res[floor_direct]), med(res[floor_via])
        line += (f"; without the fixed start-up ({floor_direct} {fd*1e3:.1f} ms, {floor_via} {fv*1e3:.1f} ms): "
                 f"{nbytes/(tv-fv)/1e6:.0f} against {nbytes/(td-fd)/1e6:.0f} MB/s, {(td-fd)/(tv-fv)*100:.1f}%")
    print(line)
    return td / tv
for output in ["null", "pipe"]:
    if "plain-" + output in parts:
        p = load("plain-" + output)
        nb = plain_mib * 1048576
        print(); print(f"plain mode, {nb} bytes, stdout to {output}"); head()
        for k in ["true", "pool-run-true", "direct", "pool-run"]:
            row(k, p[k], f"{nb/med(p[k])/1e6:.0f} MB/s" if "true" not in k else "")
        r = throughput(p, "direct", "pool-run", nb, "true", "pool-run-true")
        verdict.append(f"plain to {output}: pool-run at {r*100:.1f}% of direct (target >= 90%: {'met' if r >= 0.9 else 'MISSED'})")
if "pty" in parts:
    p = load("pty")
    nb = pty_mib * 1048576
    print(); print(f"through a pty, {nb} bytes"); head()
    for k in ["pty-true", "pty-pool-run-true", "pty-direct", "pty-pool-run", "pty-no-pty"]:
        row(k, p[k], f"{nb/med(p[k])/1e6:.0f} MB/s" if "true" not in k else "")
    r = throughput(p, "pty-direct", "pty-pool-run", nb, "pty-true", "pty-pool-run-true")
    throughput(p, "pty-direct", "pty-no-pty", nb, "pty-true", "pty-pool-run-true")
    verdict.append(f"pty: pool-run at {r*100:.1f}% of direct (target >= 90%: {'met' if r >= 0.9 else 'MISSED'})")
print()
for v in verdict:
    print(v)
print(f"results: {tmp}/*.json")
EOF
