#!/usr/bin/env bash
# release/build.sh: a release of this checkout's HEAD, in dist/: one archive
# per platform with checksums.txt (goreleaser, .goreleaser.yaml), and the
# npm packages made from the same binaries (internal/release/npmpkg), packed in
# dist/npm/ with checksums of their own. It publishes nothing
# (docs/RELEASING.md).
#
#   release/build.sh                    every platform; HEAD must carry a vX.Y.Z tag
#   release/build.sh --snapshot         any HEAD, as version X.Y.Z-SNAPSHOT-<commit>
#   release/build.sh --snapshot --host  this machine's platform alone (.ci/run's)
#
# Two runs on one commit write the same bytes. Installs the pinned
# goreleaser (go install, from the module proxy) when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

GORELEASER_VERSION=v2.17.0

snapshot= host=false
for arg in "$@"; do
  case $arg in
    --snapshot) snapshot=--snapshot ;;
    --host) host=true ;;
    *) echo "usage: release/build.sh [--snapshot [--host]]" >&2; exit 2 ;;
  esac
done
if $host && [ -z "$snapshot" ]; then
  echo "release/build.sh: --host builds a snapshot: a release has every platform" >&2
  exit 2
fi

bindir=$(go env GOBIN)
[ -n "$bindir" ] || bindir="$(go env GOPATH)/bin"
export PATH="$bindir:$PATH"
if ! goreleaser --version 2>/dev/null | grep -q "GitVersion: *${GORELEASER_VERSION}\$"; then
  echo "release: installing goreleaser $GORELEASER_VERSION"
  go install "github.com/goreleaser/goreleaser/v2@$GORELEASER_VERSION"
fi

goreleaser check -f .goreleaser.yaml
config=.goreleaser.yaml
if $host; then
  # The one line of .goreleaser.yaml that lists the platforms.
  [ "$(grep -c '^    targets: ' "$config")" = 1 ] || { echo "release: .goreleaser.yaml must list its targets on one line" >&2; exit 1; }
  config=$(mktemp --suffix=.yaml)
  trap 'rm -f "$config"' EXIT
  sed "s|^    targets: .*|    targets: [$(go env GOOS)_$(go env GOARCH)]|" .goreleaser.yaml >"$config"
fi

# -p 1: goreleaser packs an archive's binaries in the order their builds
# finished, so builds in parallel make archives that differ run to run.
goreleaser release --clean $snapshot -p 1 -f "$config"

go run ./internal/release/npmpkg/gen.go -dist dist -out dist/npm >/dev/null
for dir in dist/npm/*/; do
  (cd "$dir" && npm pack --silent --pack-destination .. >/dev/null)
done
(cd dist/npm && sha256sum -- *.tgz >checksums.txt)
echo "release: dist/"
(cd dist && ls -l -- *.tar.gz checksums.txt npm/*.tgz npm/checksums.txt)
