# provision.sh: make one slot clean. Runs on every grant (and on reset).
# The pool file sources it (". ./provision.sh --slot"), so it runs inside the
# pool process's POSIX shell interpreter and needs no sh or bash on the host.
# The pool passes the slot id as the last argument and describes the slot in
# POOL_SLOT_* variables; derive every resource name from those, and check
# them before use.
set -eu
slot="$2"
: "${POOL_SLOT_DB:?}" "${POOL_SLOT_CACHEDB:?}" "${POOL_SLOT_PORTS_API:?}"
case "$POOL_SLOT_DB" in
  acme_test_[0-9]*) ;;
  *) echo "provision: refusing database name $POOL_SLOT_DB" >&2; exit 2 ;;
esac
case "$POOL_SLOT_CACHEDB" in
  *[!0-9]*|'') echo "provision: refusing cache index $POOL_SLOT_CACHEDB" >&2; exit 2 ;;
esac

# A scratch directory per slot, emptied on every grant.
rm -rf "work/slot-$slot"
mkdir -p "work/slot-$slot"

# The database and the cache, when this machine has them: psql reads
# PGHOST, PGPORT and PGUSER as every libpq program does, and the Redis
# server is REDIS_HOST:REDIS_PORT (default 127.0.0.1:6379).
if command -v psql >/dev/null 2>&1 && psql -d postgres -c 'select 1' >/dev/null 2>&1; then
  psql -v ON_ERROR_STOP=1 -d postgres \
    -c "DROP DATABASE IF EXISTS $POOL_SLOT_DB WITH (FORCE);" \
    -c "CREATE DATABASE $POOL_SLOT_DB;" >&2
else
  echo "provision: no reachable PostgreSQL; skipping database $POOL_SLOT_DB" >&2
fi
redis() { redis-cli -h "${REDIS_HOST:-127.0.0.1}" -p "${REDIS_PORT:-6379}" "$@"; }
if command -v redis-cli >/dev/null 2>&1 && redis ping >/dev/null 2>&1; then
  redis -n "$POOL_SLOT_CACHEDB" FLUSHDB >/dev/null
else
  echo "provision: no reachable Redis; skipping cache index $POOL_SLOT_CACHEDB" >&2
fi
echo "provisioned slot $slot (api port $POOL_SLOT_PORTS_API, $POOL_ACTION)"
