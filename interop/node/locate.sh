#!/bin/sh
# locate.sh: where the Node tool's suite is, for run.sh and for the Go
# scenarios (scenarios_test.go), so both look in the same places.
#
# A suite is expected here when DL_NODE_SUITE is set, or when
# ../shared/reference/node stands beside this checkout or beside the
# checkout it was cloned from (a clone of a local path, as CI makes).
# DL_NODE_SUITE names a copy of the Node tool (DIR/core/lib/lease) or its
# lease directory itself.
#
# Prints the suite's lease directory (durable-lease.test.mjs,
# pool.test.mjs, lease-cli.mjs, pool-cli.mjs) and exits 0; or says why on
# stderr and exits 3 when no suite is expected here (nothing to run, not a
# failure), or 1 when one is expected but is not there (a mistake: fix the
# path, or unset DL_NODE_SUITE).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

# lease_dir DIR: DIR or DIR/core/lib/lease, whichever holds the suite.
lease_dir() {
	for d in "$1" "$1/core/lib/lease"; do
		if [ -f "$d/durable-lease.test.mjs" ] && [ -f "$d/pool-cli.mjs" ]; then
			(cd "$d" && pwd)
			return 0
		fi
	done
	return 1
}

if [ -n "${DL_NODE_SUITE:-}" ]; then
	if [ ! -d "$DL_NODE_SUITE" ]; then
		echo "DL_NODE_SUITE=$DL_NODE_SUITE: no such directory" >&2
		exit 1
	fi
	lease_dir "$DL_NODE_SUITE" && exit 0
	echo "DL_NODE_SUITE=$DL_NODE_SUITE: no durable-lease.test.mjs and pool-cli.mjs there or in its core/lib/lease" >&2
	exit 1
fi

# candidate DIR: the suite when DIR holds it; a mistake when DIR is there
# without it; else on to the next place.
candidate() {
	[ -d "$1" ] || return 0
	lease_dir "$1" && exit 0
	echo "$1: no durable-lease.test.mjs and pool-cli.mjs there or in its core/lib/lease" >&2
	exit 1
}
candidate "$root/../shared/reference/node"
origin=$(git -C "$root" config --get remote.origin.url 2>/dev/null || true)
case $origin in
/*) candidate "$origin/../shared/reference/node" ;;
*) origin= ;;
esac
echo "no Node suite here: none in ../shared/reference/node beside this checkout${origin:+ or beside $origin}; set DL_NODE_SUITE to a copy of the Node tool to run it" >&2
exit 3
