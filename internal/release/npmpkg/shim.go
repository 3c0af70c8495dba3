package npmpkg

import "strings"

// shim is the main package's bin entry for one command: a POSIX sh
// script that finds this platform's package of binaries where npm (or
// pnpm, or yarn with node_modules) installed it and replaces itself with
// the binary (exec). Run through npm's or yarn's link in node_modules/.bin
// (npx, npm run, a PATH with node_modules/.bin) with one package of
// binaries where they put it, it starts no other process to find it; else
// it finds the package of this platform (uname) as Node resolves one:
// DIR/node_modules/@durable-lease/cli-OS-CPU for every DIR from the main
// package's own directory, symbolic links resolved, up to the root (three
// more processes: readlink, uname and a subshell). So the command
// runs as the same process the package manager started, with the same
// arguments, standard streams and environment; every signal sent to it
// reaches the binary itself, and its exit status (a signal's death
// included) is the binary's own. No Node.js process stands between:
// pool-run's own signal handling and its start-up time stay what they
// are (docs/PERFORMANCE.md has the cost of this script).
//
// On macOS on arm64 it also takes the x64 package, which Rosetta runs
// (npm installs that one under an x64 Node.js). Without a package it
// says which one is missing and exits 127, as a shell does for a command
// it cannot find.
const shim = `#!/bin/sh
# NAME, from the npm package @durable-lease/cli: runs the NAME executable
# of this platform's package of binaries (@durable-lease/cli-OS-CPU, an
# optional dependency npm installs beside this package) in place of this
# script, with the same arguments, standard streams, signals and exit
# status.
name=NAME
# npm and yarn link node_modules/.bin/NAME to ../@durable-lease/cli/bin/NAME
# and install the platform's package in that package's node_modules or
# beside it: where exactly one is there, run it without starting any
# other process.
case $0 in
*/node_modules/.bin/* | node_modules/.bin/*)
	nm=${0%/.bin/*} found= n=0
	for bin in "$nm"/@durable-lease/cli/node_modules/@durable-lease/cli-*/bin/"$name" "$nm"/@durable-lease/cli-*/bin/"$name"; do
		if [ -f "$bin" ] && [ -x "$bin" ]; then found=$bin n=$((n + 1)); fi
	done
	if [ "$n" = 1 ]; then exec "$found" "$@"; fi
	;;
esac
# Otherwise the package of this very platform, found as Node finds one.
self=$0
case $self in */*) ;; *) self=./$self ;; esac
# The package manager's bin link points here; follow it to this file.
while [ -L "$self" ]; do
	link=$(readlink "$self") || break
	case $link in
	/*) self=$link ;;
	*) self=${self%/*}/$link ;;
	esac
done
case $(uname -sm) in
"Linux x86_64") os=linux cpu=x64 ;;
"Linux aarch64" | "Linux arm64") os=linux cpu=arm64 ;;
"Darwin x86_64") os=darwin cpu=x64 ;;
"Darwin arm64") os=darwin cpu=arm64 ;;
"FreeBSD amd64") os=freebsd cpu=x64 ;;
"FreeBSD arm64" | "FreeBSD aarch64") os=freebsd cpu=arm64 ;;
*) os=$(uname -s) cpu=$(uname -m) ;;
esac
alt=
if [ "$os-$cpu" = darwin-arm64 ]; then alt=darwin-x64; fi # Rosetta runs it
# This package's directory with symbolic links resolved (pnpm links it
# from its store, where the platform package lies beside it), then up.
dir=$(unset CDPATH; cd -P -- "${self%/*}/.." && pwd) || exit 127
while :; do
	for pkg in "$dir/node_modules/@durable-lease/cli-$os-$cpu" ${alt:+"$dir/node_modules/@durable-lease/cli-$alt"}; do
		if [ -f "$pkg/bin/$name" ] && [ -x "$pkg/bin/$name" ]; then
			exec "$pkg/bin/$name" "$@"
		fi
	done
	[ -n "$dir" ] || break
	dir=${dir%/*}
done
echo "$name: no $name executable for $os $cpu: it comes with @durable-lease/cli-$os-$cpu, an optional dependency of @durable-lease/cli that is not installed (was it installed with --omit=optional or --no-optional, or is there no build for this platform?)" >&2
exit 127
`

// shimFor is the shim of the command name.
func shimFor(name string) string { return strings.ReplaceAll(shim, "NAME", name) }
