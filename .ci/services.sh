#!/bin/sh
# services.sh: a throwaway PostgreSQL and Redis for the hook tests
# (internal/testkit/hooktest) and for trying examples/hooks by hand.
#
#   .ci/services.sh start     start both (a no-op for one already running)
#   .ci/services.sh env       print the export lines the hooks read (PGHOST,
#                             PGPORT, PGUSER, REDIS_HOST, REDIS_PORT) and
#                             those the tests read (DL_TEST_*)
#   .ci/services.sh test-env  print the tests' lines only (what .ci/run
#                             exports, so that no other test reaches them)
#   .ci/services.sh status    exit 0 when both answer
#   .ci/services.sh stop      stop both and delete their data
#
# Both listen on 127.0.0.1 only, on non-default ports, with data in a
# scratch directory, and run as an unprivileged user: as root, the user
# DL_SERVICES_USER (default postgres, created if missing); otherwise the
# caller. PostgreSQL trusts every local connection: test use only.
#
# Settings (environment): DL_TEST_PGPORT (55432), DL_TEST_REDIS_PORT
# (56379), DL_SERVICES_DIR (scratch directory, default under $TMPDIR),
# DL_SERVICES_USER.
set -eu

PGPORT_=${DL_TEST_PGPORT:-55432}
REDISPORT_=${DL_TEST_REDIS_PORT:-56379}
HOST_=127.0.0.1
PGSUPER_=postgres
DIR_=${DL_SERVICES_DIR:-${TMPDIR:-/tmp}/durable-lease-services-$(id -u)}
case $DIR_ in
  /*) ;;
  *) DIR_=$(pwd)/$DIR_ ;;
esac
# The service user runs initdb, pg_ctl and redis-server from the current
# directory, which it may be unable to enter (root's home is 0700): they
# then warn or fail. Every path here is absolute, so work from /.
cd /

say() { printf 'services: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# The PostgreSQL server programs: on PATH, else Debian's newest version.
pgbin() {
  if command -v initdb >/dev/null 2>&1; then
    # Often a symlink (/usr/local/bin/initdb): pg_isready and pg_ctl
    # live next to the real file.
    dirname "$(readlink -f "$(command -v initdb)")"
    return
  fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$d/initdb" ]; then
      echo "$d"
      return
    fi
  done
  return 1
}

# as USER CMD...: run CMD as the service user.
svc_user() {
  if [ "$(id -u)" != 0 ]; then
    id -un
    return
  fi
  u=${DL_SERVICES_USER:-postgres}
  if ! id "$u" >/dev/null 2>&1; then
    say "creating the system user $u"
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin "$u"
  fi
  echo "$u"
}
as() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u "$USER_" -- "$@"
  else
    "$@"
  fi
}

pg_up() { "$BIN_/pg_isready" -q -h "$HOST_" -p "$PGPORT_" 2>/dev/null; }
redis_up() { [ "$(redis-cli -h "$HOST_" -p "$REDISPORT_" ping 2>/dev/null)" = PONG ]; }

start() {
  BIN_=$(pgbin) || die "no PostgreSQL server programs (initdb): apt-get install -y postgresql"
  command -v redis-server >/dev/null 2>&1 || die "no redis-server: apt-get install -y redis-server"
  command -v redis-cli >/dev/null 2>&1 || die "no redis-cli: apt-get install -y redis-tools"
  USER_=$(svc_user)
  mkdir -p "$DIR_"
  chmod 755 "$DIR_"

  if pg_up; then
    say "PostgreSQL already answers on $HOST_:$PGPORT_"
  else
    rm -rf "$DIR_/pg" "$DIR_/pgsock"
    mkdir -p "$DIR_/pg" "$DIR_/pgsock"
    [ "$(id -u)" != 0 ] || chown "$USER_" "$DIR_/pg" "$DIR_/pgsock"
    chmod 700 "$DIR_/pg"
    as "$BIN_/initdb" -D "$DIR_/pg" -U "$PGSUPER_" --auth=trust -E UTF8 --no-locale >"$DIR_/initdb.log" 2>&1 ||
      { cat "$DIR_/initdb.log" >&2; die "initdb failed"; }
    # Durability is pointless for test data: no fsync makes DROP/CREATE
    # DATABASE on every grant fast.
    as "$BIN_/pg_ctl" -D "$DIR_/pg" -l "$DIR_/pg/server.log" -w -t 60 \
      -o "-p $PGPORT_ -k $DIR_/pgsock -c listen_addresses=$HOST_ -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
      start >/dev/null || { cat "$DIR_/pg/server.log" >&2; die "PostgreSQL did not start"; }
    say "PostgreSQL $("$BIN_/postgres" --version | awk '{print $3}') on $HOST_:$PGPORT_ as $USER_ (data $DIR_/pg)"
  fi

  if redis_up; then
    say "Redis already answers on $HOST_:$REDISPORT_"
  else
    rm -rf "$DIR_/redis"
    mkdir -p "$DIR_/redis"
    [ "$(id -u)" != 0 ] || chown "$USER_" "$DIR_/redis"
    as redis-server --port "$REDISPORT_" --bind "$HOST_" --protected-mode yes \
      --save '' --appendonly no --dir "$DIR_/redis" \
      --daemonize yes --pidfile "$DIR_/redis/redis.pid" --logfile "$DIR_/redis/redis.log"
    i=0
    until redis_up; do
      i=$((i + 1))
      [ "$i" -lt 100 ] || { cat "$DIR_/redis/redis.log" >&2; die "Redis did not start"; }
      sleep 0.1
    done
    say "Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') on $HOST_:$REDISPORT_ as $USER_"
  fi
}

stop() {
  BIN_=$(pgbin) || BIN_=
  if [ -f "$DIR_/pg/postmaster.pid" ] && [ -n "$BIN_" ]; then
    USER_=$(svc_user)
    as "$BIN_/pg_ctl" -D "$DIR_/pg" -m fast -w stop >/dev/null || say "pg_ctl stop failed"
    say "PostgreSQL on $HOST_:$PGPORT_ stopped"
  fi
  if [ -f "$DIR_/redis/redis.pid" ]; then
    pid=$(cat "$DIR_/redis/redis.pid")
    if kill "$pid" 2>/dev/null; then
      i=0
      while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 100 ]; do
        i=$((i + 1))
        sleep 0.1
      done
      say "Redis on $HOST_:$REDISPORT_ stopped"
    fi
  fi
  rm -rf "$DIR_"
}

# test_env_lines: the servers under the names internal/testkit/hooktest reads.
test_env_lines() {
  cat <<EOF
export DL_TEST_PGHOST=$HOST_
export DL_TEST_PGPORT=$PGPORT_
export DL_TEST_PGUSER=$PGSUPER_
export DL_TEST_REDIS_HOST=$HOST_
export DL_TEST_REDIS_PORT=$REDISPORT_
EOF
}

# env_lines: the same under the names the example hooks, provisioner and
# gate read (libpq's own, and REDIS_HOST and REDIS_PORT), then the tests'.
env_lines() {
  cat <<EOF
export PGHOST=$HOST_
export PGPORT=$PGPORT_
export PGUSER=$PGSUPER_
export REDIS_HOST=$HOST_
export REDIS_PORT=$REDISPORT_
EOF
  test_env_lines
}

status() {
  BIN_=$(pgbin) || die "no PostgreSQL server programs"
  ok=0
  if pg_up; then say "PostgreSQL answers on $HOST_:$PGPORT_"; else say "PostgreSQL: nothing on $HOST_:$PGPORT_"; ok=1; fi
  if redis_up; then say "Redis answers on $HOST_:$REDISPORT_"; else say "Redis: nothing on $HOST_:$REDISPORT_"; ok=1; fi
  return "$ok"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  env) env_lines ;;
  test-env) test_env_lines ;;
  status) status ;;
  *) echo "usage: $0 start|stop|env|test-env|status" >&2; exit 2 ;;
esac
