#!/bin/sh
# bench/etcd.sh: what leases on etcd cost, against etcd's own lock command
# on the same etcd, in the same run (issue 10, item 5).
#
# It builds lease, pool-run and durable-lease-etcd as the README installs
# them (CGO_ENABLED=0, static) and the helper bench/etcd/main.go, starts a
# single-member etcd (ETCD, default /usr/bin/etcd) on free loopback ports
# with a fresh data directory, stops it at exit, and measures two things.
#
# 1. Per operation, with hyperfine -N: ROUNDS rounds of RUNS runs of each
#    command, taking turns (the order reversed every other round), pooled:
#
#      etcdctl-lock   etcdctl lock bench-lock true       the reference: an etcd
#                                                        mutex acquired and released
#                                                        around `true`
#      etcd-acquire   lease acquire of a free kind       (--prepare deletes it)
#      etcd-release   lease release of a held lease      (--prepare stores it again)
#      etcd-pool-run  pool-run --kind K -- true          acquire, run true, release
#      etcd-status    lease status of a free kind        start-up, connect, one read
#      dir-acquire, dir-release, dir-pool-run            the same on a directory
#                                                        store, on the disk of the
#                                                        default store (logs/ here)
#      flock          flock STORE/x.lock true            the directory store's floor
#
#    The --prepare steps on etcd run the helper (`prep`), which deletes the
#    kind's record through the etcd backend, or stores the record one
#    `lease acquire` wrote (token included) again as a new acquisition, so
#    a timed release always gives back a live lease under a fixed token.
#    hyperfine does not time --prepare; commands with nothing to prepare
#    prepare `true`, so every timed command follows one process start.
#    It prints (acquire + release) / etcdctl-lock from the medians: one lease
#    operation in `etcdctl lock NAME true`s.
#
# 2. Hand-off latency, with the helper (`handoff`): a holder in the helper
#    releases and a blocked waiter process acquires; from just before the
#    release call to the waiter's first output line. HANDOFFS hand-offs to
#    a `lease acquire --wait-ms` waiter behind a lease, and as many to an
#    `etcdctl lock NAME` waiter behind an etcd mutex, taking turns.
#
# Environment:
#   ROUNDS, RUNS         default 10 and 30 (RUNS at least 10)
#   HANDOFFS             default 30
#   BENCH_REV=<commit>   build that commit (git archive) instead of the
#                        working tree; the helper is this checkout's
#   BENCH_SRC=<dir>      build from dir instead (it must hold bench/etcd/main.go)
#   BENCH_STORE_PARENT   directory for the directory store (default: logs/ here)
#   ETCD_DATA_PARENT     directory for etcd's data (default: $TMPDIR or /tmp)
#   ETCD, ETCDCTL        default /usr/bin/etcd and /usr/bin/etcdctl
#   BENCH_KEEP=1         keep the store, binaries, etcd data and logs
# Usage: bench/etcd.sh   (from any directory)
set -eu

bench=bench/etcd.sh
. "$(dirname "$0")/lib/harness.sh"
need_hyperfine
need go flock python3 git
ETCD=${ETCD:-/usr/bin/etcd}
ETCDCTL=${ETCDCTL:-/usr/bin/etcdctl}
[ -x "$ETCD" ] || die "no etcd at $ETCD (Debian/Ubuntu: apt-get install etcd-server; or set ETCD)"
[ -x "$ETCDCTL" ] || die "no etcdctl at $ETCDCTL (Debian/Ubuntu: apt-get install etcd-client; or set ETCDCTL)"
export ETCDCTL_API=3

ROUNDS=${ROUNDS:-10}
RUNS=${RUNS:-30}
HANDOFFS=${HANDOFFS:-30}
[ "$ROUNDS" -ge 1 ] 2>/dev/null || die "ROUNDS must be a number >= 1 (got $ROUNDS)"
[ "$RUNS" -ge 10 ] 2>/dev/null || die "RUNS must be a number >= 10 (got $RUNS)"
[ "$HANDOFFS" -ge 1 ] 2>/dev/null || die "HANDOFFS must be a number >= 1 (got $HANDOFFS)"

root=$(cd "$(dirname "$0")/.." && pwd)
parent=${BENCH_STORE_PARENT:-$root/logs}
mkdir -p "$parent"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lease-etcd.XXXXXX")
store=$(mktemp -d "$parent/bench-etcd.XXXXXX")
data=$(mktemp -d "${ETCD_DATA_PARENT:-${TMPDIR:-/tmp}}/bench-etcd-data.XXXXXX")
etcd_pid=
cleanup() {
	if [ -n "$etcd_pid" ]; then
		kill "$etcd_pid" 2>/dev/null || true
		wait "$etcd_pid" 2>/dev/null || true
	fi
	if [ "${BENCH_KEEP:-0}" != 1 ]; then
		rm -rf "$store" "$tmp" "$data"
	else
		echo "kept: $store $tmp $data" >&2
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# hyperfine -N splits command lines like a shell; keep paths simple.
plain_paths "$tmp" "$store" "$data" "$ETCDCTL"

if [ -n "${BENCH_REV:-}" ]; then
	rev=$(git -C "$root" rev-parse --short "$BENCH_REV") || die "no commit $BENCH_REV"
	src=$tmp/src
	mkdir "$src"
	git -C "$root" archive "$rev" | tar -x -C "$src"
	mkdir -p "$src/bench/etcd"
	cp "$root/bench/etcd/main.go" "$src/bench/etcd/main.go"
	code="$rev (git archive), with bench/etcd/main.go from $root; the working tree there was $(describe "$root"); of those changes only the helper's file is in this build"
else
	src=$(cd "${BENCH_SRC:-$root}" && pwd)
	[ -f "$src/bench/etcd/main.go" ] || die "$src has no bench/etcd/main.go"
	code=$(describe "$src")
fi

# Built as the README installs them; the helper the same way.
(cd "$src" && CGO_ENABLED=0 go build -o "$tmp/bin/" ./cmd/lease ./cmd/pool-run ./cmd/durable-lease-etcd)
(cd "$src" && CGO_ENABLED=0 go build -o "$tmp/bin/etcd-bench" ./bench/etcd/main.go)
helper=$tmp/bin/etcd-bench

# A single-member etcd on two free loopback ports.
ports=$(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
# shellcheck disable=SC2086 # two words, split on purpose
set -- $ports
cport=$1 pport=$2
endpoint=127.0.0.1:$cport
"$ETCD" --name bench --data-dir "$data/data" \
	--listen-client-urls "http://$endpoint" --advertise-client-urls "http://$endpoint" \
	--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
	--initial-cluster "bench=http://127.0.0.1:$pport" --initial-cluster-state new \
	--logger zap --log-outputs "$tmp/etcd.log" >"$tmp/etcd.out" 2>&1 &
etcd_pid=$!
i=0
until "$ETCDCTL" --endpoints="$endpoint" --command-timeout=1s endpoint health >/dev/null 2>&1; do
	kill -0 "$etcd_pid" 2>/dev/null || { cat "$tmp/etcd.out" "$tmp/etcd.log" >&2 2>/dev/null; etcd_pid=; die "etcd exited"; }
	i=$((i + 1))
	[ $i -lt 100 ] || { tail -20 "$tmp/etcd.log" >&2; die "etcd did not become healthy within 10 s"; }
	sleep 0.1
done
S=etcd://$endpoint/bench

echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "code:    $code"
echo "machine: $(cpus)"
echo "load:    $(loadavg) (1, 5, 15 min) at the start"
echo "go:      $(go version)"
echo "etcd:    $("$ETCD" --version | head -1), $("$ETCDCTL" version | head -1), single member, default flags, on $endpoint"
echo "         data in $data ($(fstype "$data"))"
echo "tools:   $(hyperfine --version), $(flock --version 2>&1 | head -1)"
echo "store:   $S, and a directory store $store ($(fstype "$store"))"
echo "binary:  lease $(wc -c <"$tmp/bin/lease") bytes, durable-lease-etcd $(wc -c <"$tmp/bin/durable-lease-etcd") bytes, $(file -b "$tmp/bin/durable-lease-etcd" | cut -d, -f1-4)"
echo

lease="$tmp/bin/lease"
owner=bench

# The held records timed releases give back: acquired once by the CLI
# itself, then stored again before every run. A day's TTL on the directory
# store; 10 minutes on etcd (each is a new etcd lease, revoked by the
# release).
out=$($lease --store "$S" acquire --kind bench-rel --owner $owner --ttl 10) || die "etcd acquire for the release record failed: $out"
printf '%s\n' "$out" >"$tmp/held-etcd.json"
etoken=${out#*\"token\":\"}
etoken=${etoken%%\"*}
[ ${#etoken} -eq 32 ] || die "no token in: $out"
$lease --store "$S" release --kind bench-rel --owner $owner --token "$etoken" >/dev/null
out=$($lease --store "$store" acquire --kind bench-rel --owner $owner --ttl 1440) || die "acquire for the release record failed: $out"
dtoken=${out#*\"token\":\"}
dtoken=${dtoken%%\"*}
[ ${#dtoken} -eq 32 ] || die "no token in: $out"
cp "$store/bench-rel.json" "$tmp/held.json"

# name|prepare|command, one a line.
{
	echo "etcdctl-lock|true|$ETCDCTL --endpoints=$endpoint lock bench-lock true"
	echo "etcd-acquire|$helper prep -store $S -kind bench-acq -free|$lease --store $S acquire --kind bench-acq --owner $owner --ttl 10"
	echo "etcd-release|$helper prep -store $S -kind bench-rel -held $tmp/held-etcd.json|$lease --store $S release --kind bench-rel --owner $owner --token $etoken"
	echo "etcd-pool-run|true|$tmp/bin/pool-run --store $S --owner $owner --ttl 1 --kind bench-run -- true"
	echo "etcd-status|true|$lease --store $S status --kind bench-free"
	echo "dir-acquire|rm -f $store/bench-acq.json|$lease --store $store acquire --kind bench-acq --owner $owner --ttl 10"
	echo "dir-release|cp $tmp/held.json $store/bench-rel.json|$lease --store $store release --kind bench-rel --owner $owner --token $dtoken"
	echo "dir-pool-run|true|$tmp/bin/pool-run --store $store --owner $owner --ttl 1 --kind bench-run -- true"
	echo "flock|true|flock $store/x.lock true"
} >"$tmp/commands"

# Check that each prepared run does what it claims before timing it:
# acquire must acquire, release must release (a release of a free kind
# also exits 0, as "not_held", and would time the wrong path), pool-run
# must run its command and give the lease back, etcdctl must leave no lock
# key behind.
want() { # name: what its output must hold
	case "$1" in
	*acquire) echo '"code":"acquired"' ;;
	*release) echo '"code":"released"' ;;
	*status) echo '"state":"free"' ;;
	*pool-run) echo 'exit 0' ;;
	*) echo ;;
	esac
}
check_commands "$tmp/commands"
for s in "$S" "$store"; do
	out=$($lease --store "$s" status --kind bench-run)
	case "$out" in *'"state":"free"'*) ;; *) die "pool-run left bench-run held on $s: $out" ;; esac
done
left=$("$ETCDCTL" --endpoints="$endpoint" get --prefix bench-lock --keys-only)
[ -z "$left" ] || die "etcdctl lock left keys behind: $left"

python3 - "$tmp/commands" "$ROUNDS" "$RUNS" "$tmp" "$bench_lib" <<'EOF'
import statistics, sys
sys.path.insert(0, sys.argv[5])
from rounds import run as run_rounds, pct
spec, rounds, runs, tmp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def per_op(m, prefix):
    return (m[prefix + "acquire"] + m[prefix + "release"]) / m["etcdctl-lock"]
def progress(r, m):
    print(f"round {r + 1}/{rounds}: etcd (acquire + release) / etcdctl lock = {per_op(m, 'etcd-'):.2f}", flush=True)
cmds, times, per_round = run_rounds(spec, rounds, runs, tmp, 3, "bench/etcd.sh", progress)

med = {k: statistics.median(v) for k, v in times.items()}
ref = med["etcdctl-lock"]
print()
print("| command | median | p10 | p90 | runs | median / etcdctl lock |")
print("|---|---|---|---|---|---|")
for name, _, cmd in cmds:
    t = times[name]
    print(f"| {name} | {med[name]*1e3:.2f} ms | {pct(t, .1)*1e3:.2f} ms | {pct(t, .9)*1e3:.2f} ms | {len(t)} | {med[name]/ref:.2f}x |")
print()
def spread(f):
    qs = [f(m) for m in per_round]
    return f(med), min(qs), max(qs)
rows = [
    ("etcd: (acquire + release) / etcdctl lock NAME true", lambda m: per_op(m, "etcd-")),
    ("etcd: pool-run -- true / etcdctl lock NAME true", lambda m: m["etcd-pool-run"] / m["etcdctl-lock"]),
    ("directory: (acquire + release) / etcdctl lock NAME true", lambda m: per_op(m, "dir-")),
    ("directory: (acquire + release) / (2 x flock)", lambda m: (m["dir-acquire"] + m["dir-release"]) / (2 * m["flock"])),
    ("etcd / directory, acquire + release", lambda m: (m["etcd-acquire"] + m["etcd-release"]) / (m["dir-acquire"] + m["dir-release"])),
]
print("| ratio of medians | pooled | per-round range |")
print("|---|---|---|")
for label, f in rows:
    q, lo, hi = spread(f)
    print(f"| {label} | **{q:.2f}x** | {lo:.2f}-{hi:.2f}x |")
EOF
echo
echo "load:    $(loadavg) after part 1"
echo
"$helper" handoff -store "$S" -endpoints "$endpoint" -bin "$tmp/bin" -etcdctl "$ETCDCTL" -rounds "$HANDOFFS" 2>"$tmp/handoff.log" ||
	{ cat "$tmp/handoff.log" >&2; die "the hand-off helper failed"; }
echo
echo "load:    $(loadavg) at the end"
echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ) at the end"

# Nothing may be left behind in the directory store but the records, the
# lock file and the fence counters.
leftovers=$(find "$store" -mindepth 1 -name '.guard*' -o -mindepth 1 -name '.tmp*' | head -5)
[ -z "$leftovers" ] || die "guard or temporary files left in the store: $leftovers"
