#!/bin/sh
# bench/npm.sh: what the npm package's bin entry costs at each start of a
# command, over the binary run directly, beside a Node.js shim of the
# common kind (child_process.spawnSync, then the child's exit mirrored).
# It installs the packages release/build.sh packed (run
# `release/build.sh --snapshot --host` first) into a scratch npm project,
# offline, and times `pool-run --version` four ways with hyperfine:
#   the binary          node_modules/@durable-lease/cli-OS-CPU/bin/pool-run
#   the bin entry       node_modules/.bin/pool-run (npm's link to the sh shim)
#   the shim by path    node_modules/@durable-lease/cli/bin/pool-run (its
#                       slower search: uname, readlink, a subshell)
#   a Node.js shim      node shim.js, spawning the binary
#   RUNS=300 sh bench/npm.sh
set -eu
cd "$(dirname "$0")/.."
RUNS=${RUNS:-300}
main=$(ls dist/npm/durable-lease-cli-[0-9]*.tgz 2>/dev/null | head -1)
[ -n "$main" ] || { echo "bench/npm.sh: no dist/npm/durable-lease-cli-*.tgz: run release/build.sh --snapshot --host" >&2; exit 1; }
case $(go env GOARCH) in amd64) cpu=x64 ;; *) cpu=$(go env GOARCH) ;; esac
plat=$(go env GOOS)-$cpu
platball=$(ls "dist/npm/durable-lease-cli-$plat-"*.tgz 2>/dev/null | head -1)
[ -n "$platball" ] || { echo "bench/npm.sh: no dist/npm/durable-lease-cli-$plat-*.tgz" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
proj=$work/proj
mkdir -p "$proj"
printf '{"name":"bench","private":true,"overrides":{"@durable-lease/cli-%s":"file:%s"}}\n' "$plat" "$PWD/$platball" >"$proj/package.json"
here=$PWD
(cd "$proj" && npm install --offline --no-audit --no-fund --loglevel=error --cache "$work/cache" --save-dev "$here/$main" >/dev/null)
binary=$proj/node_modules/@durable-lease/cli-$plat/bin/pool-run
cat >"$work/shim.js" <<JS
const { spawnSync } = require('child_process');
const r = spawnSync('$binary', process.argv.slice(2), { stdio: 'inherit' });
if (r.signal) process.kill(process.pid, r.signal);
process.exit(r.status);
JS
echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(hyperfine --version), node $(node --version)"
hyperfine -N --warmup 30 --runs "$RUNS" \
  -n binary "$binary --version" \
  -n "bin entry" "$proj/node_modules/.bin/pool-run --version" \
  -n "shim by path" "$proj/node_modules/@durable-lease/cli/bin/pool-run --version" \
  -n "Node.js shim" "node $work/shim.js --version"
