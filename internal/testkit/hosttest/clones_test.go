package hosttest

import (
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// project makes a git repository holding pool.json with body, and two
// real clones of it (separate clones, not linked worktrees: the layout
// of parallel agent sessions), and returns the clones.
func project(t *testing.T, body string) (a, b string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testrun.Missing(t, "git is not installed")
	}
	top := scratch(t)
	origin := filepath.Join(top, "origin")
	if err := os.Mkdir(origin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(origin, "pool.json"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	git := []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid"}
	mustRun(t, nil, origin, git, "git", "init", "-q")
	mustRun(t, nil, origin, git, "git", "add", "pool.json")
	mustRun(t, nil, origin, git, "git", "commit", "-q", "-m", "pool")
	a, b = filepath.Join(top, "clone-a"), filepath.Join(top, "clone-b")
	mustRun(t, nil, top, git, "git", "clone", "-q", origin, a)
	mustRun(t, nil, top, git, "git", "clone", "-q", origin, b)
	return a, b
}

// home is a fresh HOME for the CLIs (the registry of which store serves
// which pool lives under it).
func home(t *testing.T) []string {
	t.Helper()
	h := filepath.Join(scratch(t), "home")
	if err := os.Mkdir(h, 0o700); err != nil {
		t.Fatal(err)
	}
	return []string{"HOME=" + h}
}

const clonePool = `{"name": "e2e", "ttlMinutes": 5, "provision": "true",
  "slots": [{"id": 1, "port": 41010, "db": "app_test_1"}, {"id": 2, "port": 41020, "db": "app_test_2"}]}`

// Two clones with no store named share the default store, the user's for
// the host: the second gets the other slot, a third caller finds both
// held, and neither clone grows a store of its own; a linked worktree
// is no different.
func TestTwoClonesShareTheDefaultStore(t *testing.T) {
	a, b := project(t, clonePool)
	env := home(t)
	first := mustRun(t, nil, a, env, "pool", "--pool", "pool.json", "acquire", "--owner", "agent-a", "--no-wait")
	second := mustRun(t, nil, b, env, "pool", "--pool", "pool.json", "acquire", "--owner", "agent-b", "--no-wait")
	if first.json(t)["slot"] != float64(1) || second.json(t)["slot"] != float64(2) {
		t.Fatalf("slots: clone a %s, clone b %s; want 1 and 2", first.stdout, second.stdout)
	}
	mustRun(t, nil, a, nil, "git", "worktree", "add", "-q", filepath.Join(a, "..", "wt-a"))
	r := run(t, nil, filepath.Join(a, "..", "wt-a"), 0o022, env, "pool", "--pool", "pool.json", "acquire", "--owner", "agent-w", "--no-wait")
	if r.exit != 1 || r.json(t)["code"] != "saturated" {
		t.Errorf("the worktree of clone a: exit %d %s, want saturated (both slots held)", r.exit, r.stdout)
	}
	r = run(t, nil, b, 0o022, env, "pool-run", "--pool", "pool.json", "--no-wait", "--", "true")
	if r.exit != 1 {
		t.Errorf("pool-run in clone b: exit %d, want 1 (both slots held)\n%s", r.exit, r.stderr)
	}
	for _, c := range []string{a, b, filepath.Join(a, "..", "wt-a")} {
		if _, err := os.Stat(filepath.Join(c, "logs")); err == nil {
			t.Errorf("%s made a store of its own", c)
		}
	}
}

// With "store" in the pool file naming a host-wide store, as the
// examples do, both clones share one store and get different slots.
func TestTwoClonesShareTheStoreThePoolFileNames(t *testing.T) {
	named := strings.Replace(clonePool, `"name": "e2e",`, `"name": "e2e", "store": "~/.local/state/durable-lease/leases",`, 1)
	a, b := project(t, named)
	env := home(t)
	ra := mustRun(t, nil, a, env, "pool", "--pool", "pool.json", "acquire", "--owner", "agent-a", "--no-wait")
	rb := mustRun(t, nil, b, env, "pool", "--pool", "pool.json", "acquire", "--owner", "agent-b", "--no-wait")
	if ra.json(t)["slot"] != float64(1) || rb.json(t)["slot"] != float64(2) {
		t.Errorf("slots: clone a %s, clone b %s; want 1 and 2", ra.stdout, rb.stdout)
	}
	r := run(t, nil, b, 0o022, env, "pool", "--pool", "pool.json", "acquire", "--owner", "agent-c", "--no-wait")
	if r.exit != 1 || r.json(t)["code"] != "saturated" {
		t.Errorf("a third acquire: exit %d %s, want saturated", r.exit, r.stdout)
	}
	store := filepath.Join(strings.TrimPrefix(env[0], "HOME="), ".local", "state", "durable-lease", "leases")
	if fi, err := os.Stat(store); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the shared store: %v %v, want a directory 0700", fi, err)
	}
	for _, c := range []string{a, b} {
		if _, err := os.Stat(filepath.Join(c, "logs")); err == nil {
			t.Errorf("%s made a store of its own", c)
		}
	}
}
