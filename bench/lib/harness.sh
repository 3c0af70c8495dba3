# bench/lib/harness.sh: what the bench scripts share, sourced by each
# (POSIX sh) after it sets bench=<its name>, e.g. bench=bench/cost.sh:
#
#   die MESSAGE...          print "<bench>: MESSAGE" on stderr, exit 2
#   need_hyperfine          exit 2 with how to install it, where it is missing
#   need TOOL...            die where a tool is missing
#   plain_paths PATH...     die where a path would not survive hyperfine -N's
#                           word splitting (spaces, quotes)
#   describe DIR            the commit DIR is at, and its uncommitted changes
#   cpus, loadavg           "N CPUs, <model>, kernel <release>"; the load
#                           averages (1, 5, 15 min)
#   fstype DIR              "<type> on <device>" of DIR's filesystem
#   check_commands FILE [BEFORE]
#                           run each name|prepare|command line of FILE once,
#                           after BEFORE (if given) and the prepare (their
#                           output discarded), and die unless its output
#                           holds $(want NAME), a function of the script's
#
# and rounds.py beside it, the hyperfine rounds themselves (see there).
bench_lib=$(cd "$(dirname "$0")/lib" && pwd)

die() { echo "$bench: $*" >&2; exit 2; }

need_hyperfine() {
	command -v hyperfine >/dev/null 2>&1 && return 0
	cat >&2 <<EOF_
$bench: hyperfine is not installed. Install it, then re-run:
  Debian/Ubuntu:  sudo apt-get install hyperfine
  macOS:          brew install hyperfine
  any (Rust):     cargo install --locked hyperfine
EOF_
	exit 2
}

need() {
	for tool in "$@"; do
		command -v "$tool" >/dev/null 2>&1 || die "$tool is required but not installed"
	done
}

plain_paths() {
	for p in "$@"; do
		case "$p" in
		*[!A-Za-z0-9/._-]*) die "paths must not contain spaces or quotes: $*" ;;
		esac
	done
}

describe() { # dir
	if git -C "$1" rev-parse --git-dir >/dev/null 2>&1; then
		rev=$(git -C "$1" rev-parse --short HEAD)
		changed=$(git -C "$1" status --porcelain | awk '{print $2}' | tr '\n' ' ' | sed 's/ $//')
		if [ -n "$changed" ]; then rev="$rev plus uncommitted changes to: $changed"; fi
		echo "$rev"
	else
		echo "$1 (not a git checkout)"
	fi
}

cpus() {
	echo "$(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1), kernel $(uname -r)"
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null; }

fstype() { df -T "$1" | awk 'NR==2 {print $2 " on " $1}'; }

check_commands() { # file [before]
	while IFS='|' read -r name prep cmd; do
		[ -z "${2:-}" ] || $2 >/dev/null
		$prep >/dev/null
		out=$($cmd 2>&1) || die "$name failed: $out"
		w=$(want "$name")
		case "$out" in
		*"$w"*) ;;
		*) die "$name: expected $w, got: $out" ;;
		esac
	done <"$1"
}

# expect NAME CODE COMMAND...: run the command once; die unless it exits 0
# with "code":"CODE" in its output.
expect() {
	name=$1 want=$2
	shift 2
	out=$("$@") || die "$name failed: $out"
	case "$out" in
	*"\"code\":\"$want\""*) ;;
	*) die "$name: expected code $want, got: $out" ;;
	esac
}

# held_record FILE OWNER TOKEN: write a live record of kind bench-rel in
# the on-disk format (lease/record.go), held by OWNER under TOKEN, to be
# copied into the store before every timed release. A day's TTL keeps it
# live for the whole run.
held_record() {
	now=$(date -u +%Y-%m-%dT%H:%M:%S.000Z)
	cat >"$1" <<EOF_
{
  "v": 1,
  "kind": "bench-rel",
  "owner": "$2",
  "token": "$3",
  "heartbeat": "$now",
  "ttlMinutes": 1440,
  "payload": null,
  "acquiredAt": "$now"
}
EOF_
}

# pair_script FILE LEASE OWNER TTL: write the shell user's pair to FILE:
# out=$(LEASE acquire), then LEASE release with the token parsed from it
# (LEASE is the lease command line, store included).
pair_script() {
	cat >"$1" <<EOF_
out=\$($2 acquire --kind bench-pair --owner $3 --ttl $4) || exit 1
tok=\${out#*\\"token\\":\\"}
tok=\${tok%%\\"*}
exec $2 release --kind bench-pair --owner $3 --token "\$tok"
EOF_
}

# scratch TMP STORE: make a temporary directory $TMPDIR/TMP.XXXXXX (tmp)
# and a store STORE.XXXXXX under $BENCH_STORE_PARENT (default: logs/ of
# this checkout, on the disk of the default store), both removed at exit
# unless BENCH_KEEP=1, and check that hyperfine can take their paths.
scratch() {
	parent=${BENCH_STORE_PARENT:-$root/logs}
	mkdir -p "$parent"
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
	store=$(mktemp -d "$parent/$2.XXXXXX")
	trap scratch_cleanup EXIT
	trap 'exit 130' INT TERM
	# hyperfine -N splits command lines like a shell; keep paths simple.
	plain_paths "$tmp" "$store"
}
scratch_cleanup() {
	if [ "${BENCH_KEEP:-0}" != 1 ]; then
		rm -rf "$store" "$tmp"
	fi
}
