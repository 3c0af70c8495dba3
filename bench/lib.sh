#!/bin/sh
# bench/lib.sh: time the library's acquire+release in-process with the Go
# benchmark BenchmarkAcquireRelease (lease/bench_test.go) and print the
# median ns/op over the repeated counts.
#
#   go test -run '^$' -bench 'AcquireRelease' -benchtime 20000x -count 5 -benchmem ./lease/
#
# TMPDIR points at a fresh directory on tmpfs (/dev/shm) when available, so
# the benchmark's temporary store sits on the same kind of filesystem as the
# one bench/cli.sh uses. Environment: BENCHTIME (default 20000x), COUNT
# (default 5), BENCH_STORE_PARENT (default /dev/shm).
# Usage: bench/lib.sh   (from any directory)
set -eu

die() { echo "bench/lib.sh: $*" >&2; exit 2; }
for tool in go python3; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool is required but not installed"
done

root=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$root/lease/bench_test.go" ] || die "lease/bench_test.go (BenchmarkAcquireRelease) does not exist yet"

parent=${BENCH_STORE_PARENT:-/dev/shm}
if [ ! -d "$parent" ] || [ ! -w "$parent" ]; then
	parent=${TMPDIR:-/tmp}
fi
tmp=$(mktemp -d "$parent/lease-libbench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

out="$tmp/bench.txt"
(cd "$root" && TMPDIR="$tmp" go test -run '^$' -bench 'AcquireRelease' \
	-benchtime "${BENCHTIME:-20000x}" -count "${COUNT:-5}" -benchmem ./lease/) | tee "$out"

python3 - "$out" <<'EOF'
import re, statistics, sys, collections
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op", line)
    if m:
        runs[m.group(1)].append(float(m.group(2)))
if not runs:
    sys.exit("bench/lib.sh: no benchmark results in the output")
print()
for name, ns in runs.items():
    med = statistics.median(ns)
    print(f"{name}: median {med:.0f} ns/op ({med/1000:.1f} us) over {len(ns)} counts; "
          f"min {min(ns):.0f}, max {max(ns):.0f} (target < 100 us: {'met' if med < 100_000 else 'MISSED'})")
EOF
