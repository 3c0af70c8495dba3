package cliparse_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/durable-lease/durable-lease/internal/cliparse"
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
