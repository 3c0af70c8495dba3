#!/bin/sh
# bench/quick.sh: the quick (CI) form of issue 35's figures measured by this
# checkout's bench commands, each both sides in the same rounds:
#
#   bench/shellpair.sh   pool-run --kind K -- true over the shell pair (target 1.0)
#                        and over lease acquire + release (target 1.3)
#   bench/cost.sh        lease acquire + release over flock STORE/x.lock true,
#                        per operation (target 1.1)
#
# Each runs with QUICK=1: a few short rounds, and a failure only for a
# ratio more than 50 % over its target (1.5, 1.95, 1.65), which catches a
# regression without timing the machine. It exits 1 if any failed, 2 if a
# command could not run (hyperfine missing, say). Meant for .ci/run.
# Environment: passed on (ROUNDS, RUNS, BENCH_STORE_PARENT, ...).
# Usage: bench/quick.sh [shellpair] [cost]   (from any directory; default both)
set -u

dir=$(dirname "$0")
status=0
[ $# -gt 0 ] || set -- shellpair cost
for b in "$@"; do
	case $b in
	shellpair | cost) ;;
	*)
		echo "bench/quick.sh: no figure $b (shellpair, cost)" >&2
		exit 2
		;;
	esac
	echo "== bench/$b.sh (QUICK=1)"
	QUICK=1 sh "$dir/$b.sh"
	rc=$?
	if [ "$rc" -gt "$status" ]; then
		status=$rc
	fi
	echo
done
exit $status
