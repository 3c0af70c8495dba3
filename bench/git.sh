#!/bin/sh
# bench/git.sh: what a lease on a git store costs, beside a plain git push
# of one commit to the same remote, on each transport it can run here
# hermetically: a bare repository (git+file://), git daemon (git://) and
# smart HTTP (git http-backend behind bench/githttp, http://), all on
# loopback (issue 20).
#
# It builds lease and durable-lease-git as the README installs them
# (CGO_ENABLED=0), makes a bare repository, serves it with git daemon and
# bench/githttp on free loopback ports, and times with hyperfine -N, RUNS
# runs each (after WARMUP warm-ups), per transport:
#
#   git-push       git push --force of a new empty commit to a branch:
#                  the reference (--prepare makes the commit)
#   acquire        lease acquire of a free kind   (--prepare force-releases it)
#   heartbeat      lease heartbeat of a held lease, same token each run
#   release        lease release with the token   (--prepare acquires again;
#                  run through sh -c to read the token, about 1 ms)
#
# and prints each median beside git-push's, as a ratio.
#
# Environment: RUNS (default 20), WARMUP (default 2), BENCH_KEEP=1 keeps
# the scratch directory.
# Usage: bench/git.sh   (from any directory)
set -eu

bench=bench/git.sh
. "$(dirname "$0")/lib/harness.sh"
need_hyperfine
need go git python3 jq
RUNS=${RUNS:-20}
WARMUP=${WARMUP:-2}
[ "$RUNS" -ge 3 ] 2>/dev/null || die "RUNS must be a number >= 3 (got $RUNS)"

root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lease-git.XXXXXX")
daemon_pid=
http_pid=
cleanup() {
	[ -z "$daemon_pid" ] || { kill "$daemon_pid" 2>/dev/null || true; wait "$daemon_pid" 2>/dev/null || true; }
	[ -z "$http_pid" ] || { kill "$http_pid" 2>/dev/null || true; wait "$http_pid" 2>/dev/null || true; }
	if [ "${BENCH_KEEP:-0}" = 1 ]; then echo "kept: $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
plain_paths "$tmp"

(cd "$root" && CGO_ENABLED=0 go build -o "$tmp/bin/" ./cmd/lease ./cmd/durable-lease-git &&
	go build -o "$tmp/bin/githttp" bench/githttp/main.go)
lease=$tmp/bin/lease
export XDG_CACHE_HOME="$tmp/cache"

git init -q --bare "$tmp/srv/leases.git"
git init -q "$tmp/work"
git -C "$tmp/work" -c user.name=bench -c user.email=bench@localhost commit -q --allow-empty -m start

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
git daemon --reuseaddr --export-all --enable=receive-pack --base-path="$tmp/srv" \
	--listen=127.0.0.1 --port="$port" "$tmp/srv" >"$tmp/daemon.log" 2>&1 &
daemon_pid=$!
i=0
until git ls-remote "git://127.0.0.1:$port/leases.git" >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 100 ] || { cat "$tmp/daemon.log" >&2; die "git daemon did not answer within 10 s"; }
	sleep 0.1
done

"$tmp/bin/githttp" "$tmp/srv" >"$tmp/http.url" 2>"$tmp/http.log" &
http_pid=$!
i=0
until [ -s "$tmp/http.url" ] && git ls-remote "$(cat "$tmp/http.url")/leases.git" >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 100 ] || { cat "$tmp/http.log" >&2; die "bench/githttp did not answer within 10 s"; }
	sleep 0.1
done
http_url=$(cat "$tmp/http.url")

echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "code:    $(describe "$root")"
echo "machine: $(cpus); load $(loadavg)"
echo "git:     $(git --version)"
echo "runs:    $RUNS each, $WARMUP warm-ups"
echo

commit_cmd="git -C $tmp/work -c user.name=bench -c user.email=bench@localhost commit -q --allow-empty -m next"
for transport in file daemon http; do
	case $transport in
	file) remote=file://$tmp/srv/leases.git ;;
	daemon) remote=git://127.0.0.1:$port/leases.git ;;
	http) remote=$http_url/leases.git ;;
	esac
	# one namespace per transport: both reach the same repository
	S=git+$remote#bench-$transport
	"$lease" acquire --store "$S" --kind hb --owner bench-one --ttl 10 >"$tmp/hb.json"
	hbtoken=$(jq -r .record.token "$tmp/hb.json")
	hyperfine -N --runs "$RUNS" --warmup "$WARMUP" --export-json "$tmp/$transport.json" --style basic \
		-n git-push --prepare "$commit_cmd" "git -C $tmp/work push -q --force $remote HEAD:refs/heads/bench" \
		-n acquire --prepare "$lease release --store $S --kind acq --force --owner bench-ops" \
		"$lease acquire --store $S --kind acq --owner bench-one --ttl 10" \
		-n heartbeat --prepare "true" "$lease heartbeat --store $S --kind hb --owner bench-one --token $hbtoken" \
		-n release --prepare "sh -c '$lease acquire --store $S --kind rel --owner bench-one --ttl 10 >$tmp/rel.json'" \
		"sh -c '$lease release --store $S --kind rel --owner bench-one --token \$(jq -r .record.token $tmp/rel.json)'" \
		>"$tmp/$transport.out" 2>&1 || { cat "$tmp/$transport.out" >&2; die "hyperfine failed on $transport"; }
	python3 - "$tmp/$transport.json" "$transport" <<'PY'
import json, sys
res = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
ref = res["git-push"]["median"]
print(f"{sys.argv[2]}:")
for name in ("git-push", "acquire", "heartbeat", "release"):
    r = res[name]
    print(f"  {name:10s} median {r['median']*1000:7.1f} ms  (min {r['min']*1000:6.1f}, max {r['max']*1000:6.1f})  {r['median']/ref:4.2f}x git-push")
PY
done
