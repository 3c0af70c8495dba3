package node

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLocate: locate.sh finds the suite where it is expected (beside the
// checkout, beside the checkout a clone came from, in DL_NODE_SUITE, as
// the tool's copy or its lease directory), says none is expected (exit 3)
// in a clone anywhere, and calls a DL_NODE_SUITE or a ../shared without
// the suite a mistake (exit 1).
func TestLocate(t *testing.T) {
	script, err := os.ReadFile("locate.sh")
	if err != nil {
		t.Fatal(err)
	}
	// checkout makes a checkout at dir/name: its interop/node/locate.sh,
	// a git repository whose origin is origin ("" for none).
	checkout := func(dir, name, origin string) string {
		root := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Join(root, "interop", "node"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "interop", "node", "locate.sh"), script, 0o755); err != nil {
			t.Fatal(err)
		}
		git := func(args ...string) {
			if out, err := exec.Command("git", append([]string{"-C", root}, args...)...).CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
		git("init", "-q")
		if origin != "" {
			git("remote", "add", "origin", origin)
		}
		return root
	}
	// suite puts the suite's files in dir.
	suite := func(dir string) string {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"durable-lease.test.mjs", "pool-cli.mjs"} {
			if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	locate := func(root, env string) (string, int) {
		cmd := exec.Command("sh", filepath.Join(root, "interop", "node", "locate.sh"))
		cmd.Env = append(os.Environ(), "DL_NODE_SUITE="+env)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			return strings.TrimSpace(string(out)), exit.ExitCode()
		case err != nil:
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out)), 0
	}

	top := t.TempDir()
	beside := checkout(top, "project", "")
	lease := suite(filepath.Join(top, "shared", "reference", "node", "core", "lib", "lease"))
	elsewhere := t.TempDir()
	clone := checkout(elsewhere, "clone", beside)
	alone := checkout(elsewhere, "alone", "")
	wrongShared := t.TempDir()
	if err := os.MkdirAll(filepath.Join(wrongShared, "shared", "reference", "node"), 0o755); err != nil {
		t.Fatal(err)
	}
	broken := checkout(wrongShared, "project", "")
	leaseDir := suite(filepath.Join(t.TempDir(), "lease"))

	for _, tc := range []struct {
		name, root, env string
		code            int
		out             string
	}{
		{"beside the checkout", beside, "", 0, lease},
		{"beside the origin of a clone", clone, "", 0, lease},
		{"a clone anywhere", alone, "", 3, "no Node suite here"},
		{"DL_NODE_SUITE, the tool's copy", alone, filepath.Join(top, "shared", "reference", "node"), 0, lease},
		{"DL_NODE_SUITE, its lease directory", alone, leaseDir, 0, leaseDir},
		{"DL_NODE_SUITE missing", beside, filepath.Join(top, "nope"), 1, "no such directory"},
		{"DL_NODE_SUITE without the suite", beside, top, 1, "no durable-lease.test.mjs"},
		{"../shared without the suite", broken, "", 1, "no durable-lease.test.mjs"},
	} {
		out, code := locate(tc.root, tc.env)
		if code != tc.code || !strings.Contains(out, tc.out) {
			t.Errorf("%s: exit %d %q, want exit %d with %q", tc.name, code, out, tc.code, tc.out)
		}
	}
}
