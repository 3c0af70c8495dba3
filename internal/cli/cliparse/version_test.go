package cliparse_test

import (
	"bytes"
	"errors"
	"reflect"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/durable-lease/durable-lease/internal/cli/cliparse"
)

// A CLI that runs a command reads its own flags up to the command's first
// word: a --version after it is the command's, as are --help and the
// CLI's own flags. Before it, --version is the CLI's.
func TestVersionEndsAtTheCommand(t *testing.T) {
	for _, tc := range []struct {
		args    string
		version bool     // pool-run prints its version
		command []string // else the command it runs
		usage   bool     // else a usage error
	}{
		{args: "--version", version: true},
		{args: "--kind k --version", version: true},
		{args: "--no-pty --version true", version: true},
		{args: "--kind=k --version", version: true},
		{args: "--bogus --version", version: true},
		{args: "--kind k git --version", command: []string{"git", "--version"}},
		{args: "--kind=k --no-pty git --version", command: []string{"git", "--version"}},
		{args: "--kind k ls --help", command: []string{"ls", "--help"}},
		{args: "--kind k ls -h --kind x --version", command: []string{"ls", "-h", "--kind", "x", "--version"}},
		{args: "--kind k -- git --version", command: []string{"--", "git", "--version"}},
		{args: "--bogus git --version", usage: true},
	} {
		t.Run(tc.args, func(t *testing.T) {
			var g testRun
			var stdout, stderr bytes.Buffer
			_, exited, status, err := cliparse.Parse(&g, "test", "", nil, strings.Fields(tc.args), &stdout, &stderr)
			switch {
			case tc.version:
				if !exited || status != 0 || !strings.HasPrefix(stdout.String(), "test ") {
					t.Errorf("exited %v status %d stdout %q err %v, want the version", exited, status, stdout.String(), err)
				}
			case tc.usage:
				if exited || !errors.Is(err, cliparse.ErrUsage) {
					t.Errorf("exited %v stdout %q err %v, want a usage error", exited, stdout.String(), err)
				}
			default:
				if exited || err != nil || !reflect.DeepEqual(g.Command, tc.command) {
					t.Errorf("exited %v stdout %q err %v command %q, want command %q", exited, stdout.String(), err, g.Command, tc.command)
				}
			}
		})
	}
	// A CLI of verbs keeps --version anywhere before "--".
	var g testRoot
	var stdout bytes.Buffer
	if _, exited, _, _ := cliparse.Parse(&g, "test", "", testVars, []string{"take", "--owner", "o", "--version"}, &stdout, &stdout); !exited || !strings.HasPrefix(stdout.String(), "test ") {
		t.Errorf("take --owner o --version: exited %v, stdout %q", exited, stdout.String())
	}
}

// TestVersionSaysTheCommit: the version line gives the module version and
// the commit the build was made from, as the go command recorded them;
// without a record (GOFLAGS=-buildvcs=false, a linked worktree) it says
// the commit is unknown and why, or the commit (and version) a release
// build stamped.
func TestVersionSaysTheCommit(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		name    string
		bi      *debug.BuildInfo
		ok      bool
		stamped string
		want    string
		version string // StampedVersion
	}{
		{"a clone", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261201100000-0123456789ab+dirty"}, Settings: vcs}, true, "",
			"v0.0.0-20261201100000-0123456789ab+dirty, commit 0123456789abcdef0123456789abcdef01234567+dirty (2026-12-01T10:00:00Z), go1.26.8", ""},
		{"no VCS information", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, true, "",
			"(devel), commit unknown (built without VCS information: with -buildvcs=false, from a linked git worktree, or not from a git checkout), go1.26.8", ""},
		{"stamped", &debug.BuildInfo{GoVersion: "go1.26.8"}, true, "0123abc",
			"(devel), commit 0123abc (stamped at build time), go1.26.8", ""},
		{"a release build", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, true, "0123456789abcdef0123456789abcdef01234567",
			"v1.2.0, commit 0123456789abcdef0123456789abcdef01234567 (stamped at build time), go1.26.8", "v1.2.0"},
		{"the toolchain's version beats a stamped one", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.3.0"}}, true, "0123abc",
			"v1.3.0, commit 0123abc (stamped at build time), go1.26.8", "v1.2.0"},
		{"the toolchain's record beats a stamp", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}, Settings: vcs[:2]}, true, "0123abc",
			"v1.2.0, commit 0123456789abcdef0123456789abcdef01234567, go1.26.8", ""},
		{"a test build", &debug.BuildInfo{GoVersion: "go1.26.8", Settings: []debug.BuildSetting{{Key: "-tags", Value: "dltestclock"}}}, true, "",
			"(devel), commit unknown (built without VCS information: with -buildvcs=false, from a linked git worktree, or not from a git checkout), go1.26.8, tags dltestclock", ""},
		{"no build information", nil, false, "", "(unknown: the binary carries no build information)", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oldCommit, oldVersion := cliparse.StampedCommit, cliparse.StampedVersion
			cliparse.StampedCommit, cliparse.StampedVersion = tc.stamped, tc.version
			defer func() { cliparse.StampedCommit, cliparse.StampedVersion = oldCommit, oldVersion }()
			if got := cliparse.VersionOf(tc.bi, tc.ok); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
