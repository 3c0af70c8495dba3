package poolruncli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/durable-lease/durable-lease/internal/cli/cliparse"
	"github.com/durable-lease/durable-lease/internal/cli/cliparse/cliparsetest"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	"github.com/durable-lease/durable-lease/lease"
)

// hotLines are the command lines a fresh process must read without
// building kong's model (see docs/PERFORMANCE.md).
var hotLines = [][]string{
	{"--store", "/s", "--owner", "bench", "--ttl", "1", "--kind", "k", "--", "true"},
	{"--pool", "pool.json", "--wait-ms", "60000", "--", "npm", "run", "test:e2e"},
	{"--kind", "merge-baton", "--owner", "me", "--", "git", "merge", "--ff-only", "topic"},
	{"--gate", "gate.yaml", "--summary-json", "out.json"},
	{"--kind", "k", "--heartbeat", "30s", "--kill-grace=5s", "--no-pty", "true", "--kind", "x"},
}

func newGrammar() any { return new(cli) }

// Every command line quick accepts, kong reads the same way: every flag,
// and many near misses.
func TestQuickParseIsKongParse(t *testing.T) {
	t.Parallel()
	samples := cliparsetest.Samples(new(cli))
	if len(samples) != 2 {
		t.Fatalf("quick does not read pool-run's grammar: %q", samples)
	}
	for _, args := range append(samples, hotLines...) {
		accepted, err := cliparsetest.CompareWithKong(newGrammar, kong.Vars{}, args)
		if err != nil {
			t.Fatal(err)
		}
		if !accepted {
			t.Errorf("%q is not read the quick way", args)
		}
		for _, v := range cliparsetest.VariantsToCompare(args, testrun.Race) {
			if _, err := cliparsetest.CompareWithKong(newGrammar, kong.Vars{}, v); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func FuzzQuickParse(f *testing.F) {
	for _, args := range append(cliparsetest.Samples(new(cli)), hotLines...) {
		f.Add(strings.Join(args, "\n"))
	}
	f.Fuzz(func(t *testing.T, input string) {
		if _, err := cliparsetest.CompareWithKong(newGrammar, kong.Vars{}, strings.Split(input, "\n")); err != nil {
			t.Fatal(err)
		}
	})
}

// pool-run's own flags end at the command's first word: what follows is
// the command's, --version and --help included, and the quick parser and
// kong read it the same way.
func TestFlagsEndAtTheCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args, command string
	}{
		{"--kind k git --version", "git --version"},
		{"--kind k ls --help", "ls --help"},
		{"--kind k ls -h", "ls -h"},
		{"--kind k --no-pty env --kind x --no-wait --version", "env --kind x --no-wait --version"},
		{"--kind k -- git --version", "-- git --version"},
	} {
		args := strings.Fields(tc.args)
		var c cli
		var stdout, stderr strings.Builder
		_, exited, _, err := cliparse.Parse(&c, "pool-run", description, kong.Vars{}, args, &stdout, &stderr)
		if exited || err != nil || strings.Join(c.Command, " ") != tc.command || c.Kind == nil || *c.Kind != "k" {
			t.Errorf("%s: exited %v, err %v, stdout %q: command %q, want %q", tc.args, exited, err, stdout.String(), c.Command, tc.command)
		}
		if accepted, err := cliparsetest.CompareWithKong(newGrammar, kong.Vars{}, args); err != nil || !accepted {
			t.Errorf("%s: quick accepted %v, %v", tc.args, accepted, err)
		}
	}
}

// TestDefaultOwnerNamesTheWorktree: without --owner, a gate's owner or
// LEASE_OWNER, the owner is pool-run@ and the worktree's name (the
// nearest directory up with a .git, directory or file), else the
// directory's, made to fit the default owner pattern.
func TestDefaultOwnerNamesTheWorktree(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"repo/.git", "repo/a/b", "wt x+y/deep", "plain dir", strings.Repeat("n", 150)} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "wt x+y", ".git"), []byte("gitdir: /elsewhere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pattern := regexp.MustCompile(lease.DefaultOwnerPattern)
	for dir, want := range map[string]string{
		"repo":                   "pool-run@repo",
		"repo/a/b":               "pool-run@repo",
		"wt x+y/deep":            "pool-run@wt_x_y",
		"plain dir":              "pool-run@plain_dir",
		strings.Repeat("n", 150): "pool-run@" + strings.Repeat("n", 100),
	} {
		got := defaultOwner(filepath.Join(root, dir))
		if got != want || !pattern.MatchString(got) {
			t.Errorf("%s: %q, want %q (matching the default owner pattern)", dir, got, want)
		}
	}
}
