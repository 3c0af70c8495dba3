# health.sh: check that a freshly provisioned slot is usable before it is
# handed out. A non-zero exit releases the slot and fails the grant.
set -eu
slot="$2"
[ -d "work/slot-$slot" ] || { echo "health: work/slot-$slot is missing" >&2; exit 1; }
if command -v pg_isready >/dev/null 2>&1 && pg_isready -q 2>/dev/null; then
  psql -d "$POOL_SLOT_DB" -c 'select 1' >/dev/null
fi
