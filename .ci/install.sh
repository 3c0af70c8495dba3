#!/usr/bin/env bash
# install.sh: install what the hook tests (internal/testkit/hooktest) need, when it
# is missing: git, PostgreSQL, Redis and pre-commit from the distribution's
# packages (Debian), and lefthook, pinned, from npm into .ci/tools; and
# tmux, bash and python3 for the terminal tests (internal/cli/pooltop,
# internal/cli/poolruncli); jq for the docs' blocks (internal/testkit/doctest); man,
# zsh and fish for the man pages and completions (internal/cli/clidoc).
#
#   .ci/install.sh            install what is missing
#   .ci/install.sh lefthook   print the path of the pinned lefthook binary
set -euo pipefail
cd "$(dirname "$0")/.."

LEFTHOOK_VERSION=2.2.1
TOOLS=.ci/tools

# lefthook_bin prints the installed lefthook: the native binary of this
# platform's package, else npm's node wrapper.
lefthook_bin() {
  local f
  for f in "$TOOLS"/node_modules/lefthook-*/bin/lefthook "$TOOLS/node_modules/.bin/lefthook"; do
    if [ -x "$f" ]; then
      echo "$PWD/$f"
      return 0
    fi
  done
  return 1
}

if [ "${1:-}" = lefthook ]; then
  lefthook_bin
  exit
fi

have_initdb() {
  command -v initdb >/dev/null 2>&1 && return 0
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
}

missing=()
command -v git >/dev/null 2>&1 || missing+=(git)
have_initdb || missing+=(postgresql)
command -v psql >/dev/null 2>&1 || missing+=(postgresql-client)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v pre-commit >/dev/null 2>&1 || missing+=(pre-commit)
command -v npm >/dev/null 2>&1 || missing+=(npm)
# A real terminal for the tests of `pool top` (internal/cli/pooltop) and of
# pool-run's supervision (internal/cli/poolruncli), which also use bash as the
# interactive shell and python3 as a detached server holding a port.
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
command -v bash >/dev/null 2>&1 || missing+=(bash)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
# jq for the README's and docs' blocks, which internal/testkit/doctest runs as pasted.
command -v jq >/dev/null 2>&1 || missing+=(jq)
# The man pages are rendered with man -l, the completions loaded by the
# shells they are for (internal/cli/clidoc).
command -v man >/dev/null 2>&1 || missing+=(man-db)
command -v zsh >/dev/null 2>&1 || missing+=(zsh)
command -v fish >/dev/null 2>&1 || missing+=(fish)
# The distribution's etcd, to prove the client works with it (etcdstore's
# tests run against it with ETCDTEST_BINARY; go test itself embeds etcd).
[ -x /usr/bin/etcd ] || missing+=(etcd-server)

if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "install: missing ${missing[*]}; install them (on Debian: apt-get install -y ${missing[*]})" >&2
    exit 1
  fi
  echo "install: apt-get install ${missing[*]}"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

if bin=$(lefthook_bin) && [ "$("$bin" version 2>/dev/null)" = "$LEFTHOOK_VERSION" ]; then
  :
else
  echo "install: lefthook $LEFTHOOK_VERSION from npm into $TOOLS"
  mkdir -p "$TOOLS"
  [ -f "$TOOLS/package.json" ] || echo '{ "private": true }' >"$TOOLS/package.json"
  # --ignore-scripts: lefthook's postinstall runs `lefthook install` in the
  # enclosing repository, which would put a lefthook.yml and git hooks into
  # this checkout. The binary comes from an optional dependency and needs
  # no script.
  npm install --prefix "$TOOLS" --save-exact --ignore-scripts --no-audit --no-fund --loglevel=error \
    "lefthook@$LEFTHOOK_VERSION" >/dev/null
  bin=$(lefthook_bin) || { echo "install: npm installed no lefthook binary" >&2; exit 1; }
  got=$("$bin" version)
  [ "$got" = "$LEFTHOOK_VERSION" ] || { echo "install: lefthook is $got, want $LEFTHOOK_VERSION" >&2; exit 1; }
fi
