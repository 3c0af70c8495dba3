#!/bin/sh
# e2e.sh: where your end-to-end tests go; gate.yaml's e2e phase runs it on
# the slot pool-run holds, freshly reset. It gets:
#
#   APP_PORT, WEB_PORT   ports no other run on this machine uses right now
#   PGDATABASE           the slot's database (PGHOST, PGPORT, PGUSER as set)
#   REDIS_DB             the slot's Redis index (REDIS_HOST, REDIS_PORT as set)
#   POOL_RUN_SLOT, POOL_RUN_OWNER, POOL_RUN_TOKEN
#
# Replace the stand-in below with your suite, e.g. `exec npm run test:e2e`.
set -eu
cd "$(git rev-parse --show-toplevel)"
echo "e2e: slot $POOL_RUN_SLOT: ports $APP_PORT and $WEB_PORT, database $PGDATABASE, Redis index $REDIS_DB"

# Stand-in: the reset before this phase dropped what smoke wrote.
left=$(psql -X -q -t -A -v ON_ERROR_STOP=1 -c "SELECT to_regclass('gate_smoke') IS NOT NULL")
if [ "$left" != f ]; then
  echo "e2e: the slot was not reset: table gate_smoke is still there" >&2
  exit 1
fi
