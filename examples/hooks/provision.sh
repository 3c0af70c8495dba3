# provision.sh: give a slot of pool.json a fresh database and an empty Redis
# index, or check that it has them.
#
# pool.json sources this file, so it runs inside the pool-run (or pool)
# process, through its POSIX shell interpreter; only psql and redis-cli
# are started as programs. The pool appends the slot id as the last word:
#
#   . ./provision.sh --provision ID   on every grant, and as the reset
#                                     between gate phases
#   . ./provision.sh --health ID      after each of those: the slot must
#                                     answer and be empty
#
# Resource names come from the slot's own values only (POOL_SLOT_DB,
# POOL_SLOT_CACHEDB, POOL_SLOT_PORTS_*), and each is held to a strict
# pattern before anything is dropped. Where the servers are comes from the
# environment:
#
#   PGHOST, PGPORT, PGUSER   libpq's own variables (PGPASSWORD or ~/.pgpass
#                            as usual); PG_ADMIN_DB is the database used to
#                            drop and create the slot's (default postgres)
#   REDIS_HOST, REDIS_PORT   default 127.0.0.1 and 6379 (REDISCLI_AUTH for a
#                            password)
#
# A server that cannot be reached fails the grant, loudly: a gate never runs
# on a slot that was not cleaned.
set -eu

mode=${1:-}
slot=${2:-?}

fail() {
  echo "provision: slot $slot: $*" >&2
  exit 1
}

db=${POOL_SLOT_DB:-}
index=${POOL_SLOT_CACHEDB:-}

# The database: lower-case letters, digits and underscores, ending in
# _test_<number>, at most 63 bytes (PostgreSQL's limit). This is what
# keeps a slip in pool.json from dropping "postgres" or a real database.
case $db in
  [a-z]*_test_[0-9]*) ;;
  *) fail "database name '$db' must look like name_test_N" ;;
esac
case $db in
  *[!a-z0-9_]*) fail "database name '$db' may only hold a-z, 0-9 and _" ;;
esac
case ${db##*_test_} in
  *[!0-9]*) fail "database name '$db' must end in _test_ and a number" ;;
esac
[ "${#db}" -le 63 ] || fail "database name '$db' is longer than 63 bytes"

# The Redis index: 1 to 99, never 0, the index every client uses by default.
case $index in
  [1-9] | [1-9][0-9]) ;;
  *) fail "Redis index '$index' must be a number from 1 to 99" ;;
esac

# The ports, when the slot has them: unprivileged, in range.
check_port() {
  case $1 in
    [1-9][0-9][0-9][0-9] | [1-9][0-9][0-9][0-9][0-9]) ;;
    *) fail "port '$1' must be a number from 1024 to 65535" ;;
  esac
  [ "$1" -ge 1024 ] && [ "$1" -le 65535 ] || fail "port '$1' must be from 1024 to 65535"
}
[ -z "${POOL_SLOT_PORTS_API+set}" ] || check_port "$POOL_SLOT_PORTS_API"
[ -z "${POOL_SLOT_PORTS_WEB+set}" ] || check_port "$POOL_SLOT_PORTS_WEB"

pg_where="PostgreSQL at ${PGHOST:-the default socket}:${PGPORT:-5432}"
redis_host=${REDIS_HOST:-127.0.0.1}
redis_port=${REDIS_PORT:-6379}

# in_index CMD: run a Redis command in the slot's index and print the reply.
# Not "redis-cli -n N CMD": when SELECT N fails (an index past the server's
# "databases"), redis-cli runs CMD in index 0 anyway. A script selects and
# runs in one step and stops at the first error.
in_index() {
  redis-cli -h "$redis_host" -p "$redis_port" \
    EVAL "redis.call('SELECT', ARGV[1]) return redis.call(ARGV[2])" 0 "$index" "$1" 2>&1
}

case $mode in
  --provision)
    # (client_min_messages: no NOTICE when the database is not there yet.)
    PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning" \
      psql -X -q -v ON_ERROR_STOP=1 -d "${PG_ADMIN_DB:-postgres}" \
        -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" \
        -c "CREATE DATABASE \"$db\"" >&2 ||
      fail "could not drop and create database $db on $pg_where"
    if ! reply=$(in_index FLUSHDB); then
      fail "could not flush index $index on Redis at $redis_host:$redis_port: $reply"
    fi
    [ "$reply" = OK ] || fail "Redis at $redis_host:$redis_port refused to flush index $index: $reply"
    echo "provision: slot $slot: database $db created afresh, Redis index $index flushed (${POOL_ACTION:-provision})"
    ;;
  --health)
    tables=$(psql -X -q -t -A -v ON_ERROR_STOP=1 -d "$db" -c \
      "SELECT count(*) FROM information_schema.tables WHERE table_schema NOT IN ('pg_catalog', 'information_schema')") ||
      fail "database $db does not answer on $pg_where"
    [ "$tables" = 0 ] || fail "database $db still holds $tables tables after provisioning"
    if ! keys=$(in_index DBSIZE); then
      fail "Redis at $redis_host:$redis_port does not answer: $keys"
    fi
    [ "$keys" = 0 ] || fail "Redis index $index is not empty after provisioning: $keys"
    ;;
  *)
    fail "usage: . ./provision.sh --provision|--health SLOT"
    ;;
esac
