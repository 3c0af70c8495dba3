package hosttest

import (
	"github.com/durable-lease/durable-lease/internal/testrun"
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

// Two clones with the default store each: the first to use the pool
// serves it on this host, and the second is refused (it would hand out
// slot 1 again: the same port and database) with the first store and the
// fix named, until the first clone is gone.
func TestTwoClonesDoNotBothGrantASlot(t *testing.T) {
	a, b := project(t, clonePool)
	env := home(t)
	first := mustRun(t, nil, a, env, "pool", "--pool", "pool.json", "acquire", "--owner", "agent-a", "--no-wait")
	if first.json(t)["slot"] != float64(1) {
		t.Fatalf("clone a: %s", first.stdout)
	}
	for _, args := range [][]string{
		{"pool", "--pool", "pool.json", "acquire", "--owner", "agent-b", "--no-wait"},
		{"pool", "--pool", "pool.json", "status"},
		{"pool-run", "--pool", "pool.json", "--", "true"},
	} {
		r := run(t, nil, b, 0o022, env, args[0], args[1:]...)
		text := r.stderr
		if args[0] == "pool" {
			out := r.json(t)
			if out["code"] != "store_conflict" {
				t.Errorf("clone b %v: %s, want code store_conflict", args, r.stdout)
			}
			text, _ = out["error"].(string)
		}
		if r.exit != 2 || !strings.Contains(text, filepath.Join(a, "logs", "leases")) || !strings.Contains(text, `"store"`) {
			t.Errorf("clone b %v: exit %d, want 2 with clone a's store and the fix named:\n%s", args, r.exit, text)
		}
	}
	if _, err := os.Stat(filepath.Join(b, "logs")); err == nil {
		t.Error("the refused clone made a store")
	}
	// A linked worktree of clone a shares its store: no conflict.
	mustRun(t, nil, a, nil, "git", "worktree", "add", "-q", filepath.Join(a, "..", "wt-a"))
	wt := mustRun(t, nil, filepath.Join(a, "..", "wt-a"), env, "pool", "--pool", "pool.json", "acquire", "--owner", "agent-w", "--no-wait")
	if wt.json(t)["slot"] != float64(2) {
		t.Errorf("the worktree of clone a: %s", wt.stdout)
	}
	// Once clone a is gone, clone b serves the pool.
	if err := os.RemoveAll(a); err != nil {
		t.Fatal(err)
	}
	if r := mustRun(t, nil, b, env, "pool", "--pool", "pool.json", "acquire", "--owner", "agent-b", "--no-wait"); r.json(t)["slot"] != float64(1) {
		t.Errorf("clone b after clone a was removed: %s", r.stdout)
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
