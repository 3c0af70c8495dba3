package npmpkg

// platform is one platform the project releases for: Go's names for it
// and npm's (process.platform and process.arch, which a package's os and
// cpu fields are matched against).
type platform struct {
	goos, goarch string // linux, amd64
	os, cpu      string // linux, x64
}

// platforms are the release platforms, as .goreleaser.yaml's targets
// list them (TestPlatformsAreTheReleases holds the two together). The main
// package names a platform package for each, whether or not this build
// made it: npm skips an optional dependency it cannot have, and a
// snapshot of one platform (as .ci/run builds) installs on that one.
var platforms = []platform{
	{"linux", "amd64", "linux", "x64"},
	{"linux", "arm64", "linux", "arm64"},
	{"darwin", "amd64", "darwin", "x64"},
	{"darwin", "arm64", "darwin", "arm64"},
	{"freebsd", "amd64", "freebsd", "x64"},
	{"freebsd", "arm64", "freebsd", "arm64"},
}

// commands are the six executables, as the archives and the platform
// packages carry them, side by side in bin/: the CLIs find their helpers
// beside their own executable (internal/cli/storeopen), never on PATH.
var commands = []string{"lease", "pool", "pool-run", "durable-lease-etcd", "durable-lease-git", "durable-lease-top"}

// scope is the npm scope of every package; mainName the package a
// project installs.
const (
	scope    = "@durable-lease"
	mainName = scope + "/cli"
)

// packageName is the name of p's platform package.
func (p platform) packageName() string { return mainName + "-" + p.os + "-" + p.cpu }

// dirName is the directory of p's package under the output directory.
func (p platform) dirName() string { return "cli-" + p.os + "-" + p.cpu }
