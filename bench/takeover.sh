#!/bin/sh
# bench/takeover.sh: what a takeover costs when the lapsed lease's record
# names its holder's work (a cgroup), so that the successor first ends
# what is left in it (PROTOCOL §4.4), against the same takeover of a
# record that names none. hyperfine, RUNS runs each after WARMUP:
#
#   plain       lease acquire over a lapsed record without work
#   empty       ... whose work's cgroup is there but empty (a run that
#               ended and whose pool-run died before removing it)
#   one         ... whose cgroup holds one process (sleep)
#   fifty       ... whose cgroup holds fifty processes
#
# Each run's --prepare writes the lapsed record and, for the last three,
# makes the cgroup and starts its processes (not timed). Needs root, or a
# writable cgroup v2 directory named by BENCH_CGROUP_PARENT.
#
# Environment: RUNS (default 100), WARMUP (default 5),
# BENCH_CGROUP_PARENT (default: a scratch cgroup beside this shell's).
# Usage: bench/takeover.sh   (from any directory)
set -eu

bench=bench/takeover.sh
. "$(dirname "$0")/lib/harness.sh"
need_hyperfine
need go stat

RUNS=${RUNS:-100}
WARMUP=${WARMUP:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/takeover-bench.XXXXXX")
mount=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "-") { if ($(i+1) == "cgroup2" && $4 == "/") { print $5; exit } break } }' /proc/self/mountinfo)
[ -n "$mount" ] || die "no cgroup v2 hierarchy on this host"
own=$(sed -n 's/^0:://p' /proc/self/cgroup)
parent=${BENCH_CGROUP_PARENT:-$mount${own%/}/takeover-bench-$$}
made=
if [ ! -d "$parent" ]; then
	mkdir "$parent" || die "cannot make $parent (run as root, or name a writable cgroup in BENCH_CGROUP_PARENT)"
	made=1
fi
cleanup() {
	for d in "$parent"/w "$parent"/*/; do
		[ -d "$d" ] || continue
		echo 1 >"$d/cgroup.kill" 2>/dev/null || true
	done
	sleep 0.2
	for d in "$parent"/w "$parent"/*/; do rmdir "$d" 2>/dev/null || true; done
	[ -z "$made" ] || rmdir "$parent" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
plain_paths "$tmp" "$parent"

mkdir "$tmp/bin"
(cd "$root" && CGO_ENABLED=0 go build -o "$tmp/bin" ./cmd/lease)
store=$tmp/store
mkdir -m 700 "$store"
boot=$(cat /proc/sys/kernel/random/boot_id)
cgpath=${parent#"$mount"}/w

# prepare N: a lapsed record of kind t, naming the cgroup w with N
# processes (N=-1: no work field; N=0: an empty cgroup).
cat >"$tmp/prepare.sh" <<EOF
n=\$1
rm -f $store/t.json
if [ -d $parent/w ]; then echo 1 > $parent/w/cgroup.kill; while grep -q 'populated 1' $parent/w/cgroup.events; do :; done; rmdir $parent/w; fi
work=
if [ "\$n" -ge 0 ]; then
	mkdir $parent/w
	i=0
	while [ \$i -lt "\$n" ]; do
		sh -c 'echo \$\$ > $parent/w/cgroup.procs && exec sleep 600' </dev/null >/dev/null 2>&1 &
		i=\$((i+1))
	done
	while [ "\$(wc -l < $parent/w/cgroup.procs)" -lt "\$n" ]; do :; done
	work=',"work":{"cgroup":"$cgpath","id":'\$(stat -c %i $parent/w)',"boot":"$boot"}'
fi
printf '{"v":1,"kind":"t","owner":"gone","token":"0123456789abcdef0123456789abcdef","heartbeat":"2020-01-01T00:00:00.000Z","ttlMinutes":1,"payload":null,"acquiredAt":"2020-01-01T00:00:00.000Z"%s}\n' "\$work" > $store/t.json
EOF
acquire="$tmp/bin/lease --store $store acquire --kind t --owner bench --ttl 1"

# Check: each takeover ends what the record names before it returns.
sh "$tmp/prepare.sh" 1
out=$($acquire 2>&1)
case $out in *'"tookOverExpired":true'*) ;; *) die "the takeover did not happen: $out" ;; esac
[ ! -d "$parent/w" ] || die "the takeover left the predecessor's cgroup: $(cat "$parent/w/cgroup.procs")"

echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "code:    $(describe "$root")"
echo "machine: $(cpus), load $(loadavg)"
echo "cgroup:  $parent"
hyperfine -N --runs "$RUNS" --warmup "$WARMUP" --export-json "$tmp/takeover.json" \
	-n plain --prepare "sh $tmp/prepare.sh -1" "$acquire" \
	-n empty --prepare "sh $tmp/prepare.sh 0" "$acquire" \
	-n one --prepare "sh $tmp/prepare.sh 1" "$acquire" \
	-n fifty --prepare "sh $tmp/prepare.sh 50" "$acquire"
