#!/usr/bin/env bash
# run.sh: run the Node tool's own compatibility suite (durable-lease.test.mjs
# and pool.test.mjs) with our CLIs in the reference seat, through the
# adapter in this directory. Fails if any test fails, or if fewer than all
# of the suite's cross-implementation tests ran and passed (a skipped one
# counts as a failure).
#
#   interop/node/run.sh              the suite from ../shared/reference/node
#   DL_NODE_SUITE=DIR run.sh         the suite from DIR: a copy of the Node
#                                    tool (DIR/core/lib/lease) or its lease
#                                    directory itself
#   DL_NODE_STORE_TMP=DIR run.sh     the suite's temporary stores under DIR
#                                    (a filesystem of your own, say)
#
# It runs the suite locate.sh finds. Where no suite is expected (no
# DL_NODE_SUITE, no ../shared/reference/node beside this checkout or the
# one it was cloned from) it says so and exits 0, CI=true or not; a suite
# expected but not there (a DL_NODE_SUITE naming a missing directory, say)
# is an error. Without node it says so and exits 0, unless CI=true, where a
# run that proves nothing fails. The direct CLI-to-CLI scenarios are a Go
# test: go test ./interop/node/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

# The suite's cross-implementation tests: 7 in durable-lease.test.mjs, 6 in
# pool.test.mjs, named "compat: ..." and "pool compat: ...".
WANT_COMPAT=13

missing() {
  if [ "${CI:-}" = true ]; then
    echo "interop: $1 (CI=true: failing instead of skipping)" >&2
    exit 1
  fi
  echo "interop: SKIP: $1" >&2
  exit 0
}

# The suite's lease directory, or why there is none.
found=0
leasedir=$(sh "$here/locate.sh" 2>&1) || found=$?
case $found in
0) ;;
3) echo "interop: SKIP: $leasedir" >&2; exit 0 ;;
*) echo "interop: FAILED: $leasedir" >&2; exit 1 ;;
esac
node=$(command -v node) || missing "no node on PATH"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dl-interop.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "== interop: building lease and pool with -tags dltestclock"
(cd "$root" && CGO_ENABLED=0 go build -tags dltestclock -o "$tmp/bin/" ./cmd/lease ./cmd/pool ./cmd/durable-lease-etcd)

# A writable copy of the suite: its lease directory and the directory
# above it (the tests import ../git-env.mjs).
mkdir -p "$tmp/suite" "$tmp/host-registry"
cp -R "$leasedir/.." "$tmp/suite/lib"
chmod -R u+w "$tmp/suite"
name=$(basename "$leasedir")

echo "== interop: node --test in a copy of $leasedir ($("$node" --version))"
status=0
(
  cd "$tmp/suite/lib/$name"
  # Nothing of the caller's environment may steer either implementation;
  # our pools are claimed in a host registry of the run's, not in /tmp.
  env -u LEASE_STORE -u LEASE_OWNER_PATTERN -u LEASE_POOL_FILE -u DL_TEST_NOW_MS \
    -u POOL_PROVISION_CMD -u POOL_RESET_CMD -u POOL_HEALTH_CMD -u POOL_NUDGE_CMD -u POOL_TTL_MINUTES -u POOL_POLL_MS \
    TMPDIR="${DL_NODE_STORE_TMP:-$tmp}" \
    LEASE_HOST_REGISTRY="$tmp/host-registry" \
    DL_INTEROP_BIN="$tmp/bin" \
    LEASE_REFERENCE_IMPL="$here/durable-lease.mjs" \
    LEASE_REFERENCE_POOL="$here/e2e-pool.mjs" \
    "$node" --test --test-reporter=tap durable-lease.test.mjs pool.test.mjs
) >"$tmp/tap" 2>&1 || status=$?

# Top-level results only (subtests are indented).
grep -E '^not ok ' "$tmp/tap" | sed 's/^/interop: FAILED: /' || true
compat_ok=$(grep -E '^ok [0-9]+ - (pool )?compat: ' "$tmp/tap" | grep -vc '# SKIP' || true)
compat_skipped=$(grep -E '^ok [0-9]+ - (pool )?compat: .*# SKIP' "$tmp/tap" || true)
total=$(sed -n 's/^# tests //p' "$tmp/tap")
pass=$(sed -n 's/^# pass //p' "$tmp/tap")
fail=$(sed -n 's/^# fail //p' "$tmp/tap")
skipped=$(sed -n 's/^# skipped //p' "$tmp/tap")
echo "interop: ${total:-?} tests, ${pass:-?} passed, ${fail:-?} failed, ${skipped:-?} skipped; cross-implementation: $compat_ok of $WANT_COMPAT passed"

if [ "$status" -ne 0 ] || [ "${fail:-1}" != 0 ] || [ "$compat_ok" -ne "$WANT_COMPAT" ] || [ -n "$compat_skipped" ]; then
  [ -z "$compat_skipped" ] || echo "$compat_skipped" | sed 's/^/interop: SKIPPED: /'
  echo "interop: the suite's output:"
  cat "$tmp/tap"
  echo "interop: FAILED (node exit $status)" >&2
  exit 1
fi
echo "interop: passed"
