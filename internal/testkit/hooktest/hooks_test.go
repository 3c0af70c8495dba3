package hooktest

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The hook styles, each installed the way examples/hooks/README.md says.
const (
	styleGit       = "git"        // examples/hooks/pre-push copied into .git/hooks
	styleLefthook  = "lefthook"   // lefthook.yml + .lefthook/pre-push/e2e-gate
	stylePreCommit = "pre-commit" // .pre-commit-config.yaml, entry ci/pre-push
)

// testE2E replaces the example's e2e.sh in the test repositories. It
// leaves a record of each gate run in $HOOKTEST_MARKERS, with the
// PRE_PUSH_SHAS it got and the commits they bring that the remote's
// tracking branches lack (what a gate checking every pushed commit would
// list), waits there until $HOOKTEST_PEERS gates have reached this phase
// (so concurrent pushes are proven to hold their slots at the same time),
// fails when $HOOKTEST_FAIL is set, and ends with the example's own
// stand-in, which checks that the slot was reset after the smoke phase.
const testE2E = `#!/bin/sh
set -eu
m=$HOOKTEST_MARKERS
name=$(basename "$(git rev-parse --show-toplevel)")
printf '%s %s %s %s %s %s\n' "$name" "$POOL_RUN_SLOT" "$POOL_RUN_OWNER" "$PGDATABASE" "$REDIS_DB" "$APP_PORT" > "$m/run.$name.$$"
printf '%s\n' "${PRE_PUSH_SHAS-}" > "$m/shas.$name.$$"
if [ -n "${PRE_PUSH_SHAS-}" ]; then
  git rev-list $PRE_PUSH_SHAS --not --remotes="$PRE_PUSH_REMOTE" > "$m/commits.$name.$$"
fi
: > "$m/started.$name"
if [ -n "${HOOKTEST_PEERS:-}" ]; then
  i=0
  until [ "$(ls "$m" | grep -c '^started\.')" -ge "$HOOKTEST_PEERS" ]; do
    i=$((i + 1))
    if [ "$i" -gt 300 ]; then
      echo "e2e: the other push never reached its e2e phase" >&2
      exit 1
    fi
    sleep 0.1
  done
fi
if [ -n "${HOOKTEST_FAIL:-}" ]; then
  echo "e2e: failing on purpose" >&2
  exit 1
fi
exec sh ./e2e-example.sh
`

// repo is a test repository with a bare remote, its hooks installed in one
// style.
type repo struct {
	t      *testing.T
	style  string
	dir    string // the temporary directory holding everything
	main   string // the main worktree
	remote string // the bare remote
	env    []string
	svc    services
	pool   examplePool
	seq    int // for commit contents and marker directories
}

func newRepo(t *testing.T, style string) *repo {
	t.Helper()
	svc := needServices(t)
	needProgram(t, "git", "apt-get install -y git")
	dir := t.TempDir()
	r := &repo{t: t, style: style, dir: dir, main: filepath.Join(dir, "main"), remote: filepath.Join(dir, "remote.git"), svc: svc, pool: loadExamplePool(t)}
	extra := svc.env()
	switch style {
	case styleLefthook:
		extra = append(extra, "LEFTHOOK_BIN="+needLefthook(t))
	case stylePreCommit:
		needProgram(t, "pre-commit", "apt-get install -y pre-commit")
		// As at a terminal: pre-commit gives the hook a pseudo-terminal
		// for its output (and /dev/null for stdin).
		extra = append(extra, "PRE_COMMIT_COLOR=always")
	}
	r.env = isolatedEnv(t, dir, extra...)

	must(t, dir, r.env, "git", "init", "-q", "--bare", r.remote)
	must(t, dir, r.env, "git", "init", "-q", r.main)
	ci := filepath.Join(r.main, "ci")
	for _, name := range []string{"gate.yaml", "pool.json", "provision.sh"} {
		copyExample(t, name, filepath.Join(ci, name), 0o644)
	}
	copyExample(t, "e2e.sh", filepath.Join(ci, "e2e-example.sh"), 0o755)
	writeFile(t, filepath.Join(ci, "e2e.sh"), testE2E, 0o755)
	switch style {
	case styleLefthook:
		copyExample(t, "lefthook.yml", filepath.Join(r.main, "lefthook.yml"), 0o644)
		copyExample(t, "pre-push", filepath.Join(r.main, ".lefthook", "pre-push", "e2e-gate"), 0o755)
	case stylePreCommit:
		copyExample(t, ".pre-commit-config.yaml", filepath.Join(r.main, ".pre-commit-config.yaml"), 0o644)
		copyExample(t, "pre-push", filepath.Join(ci, "pre-push"), 0o755)
	}
	writeFile(t, filepath.Join(r.main, "app.txt"), "0\n", 0o644)
	r.git(r.main, "add", "-A")
	r.git(r.main, "commit", "-q", "-m", "initial")
	r.git(r.main, "remote", "add", "origin", r.remote)
	r.git(r.main, "push", "-q", "--no-verify", "-u", "origin", "main")

	switch style {
	case styleGit:
		hooks := strings.TrimSpace(r.git(r.main, "rev-parse", "--git-path", "hooks"))
		if !filepath.IsAbs(hooks) {
			hooks = filepath.Join(r.main, hooks)
		}
		copyExample(t, "pre-push", filepath.Join(hooks, "pre-push"), 0o755)
	case styleLefthook:
		must(t, r.main, r.env, needLefthook(t), "install")
	case stylePreCommit:
		must(t, r.main, r.env, "pre-commit", "install")
		must(t, r.main, r.env, "pre-commit", "install-hooks")
	}
	return r
}

// needLefthook finds lefthook: $DL_TEST_LEFTHOOK, the pinned npm install
// under .ci/tools, then PATH.
func needLefthook(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("DL_TEST_LEFTHOOK"); p != "" {
		if _, err := os.Stat(p); err != nil {
			missing(t, "DL_TEST_LEFTHOOK=%s: %v", p, err)
		}
		return p
	}
	nm := filepath.Join(moduleRoot, ".ci", "tools", "node_modules")
	if found, _ := filepath.Glob(filepath.Join(nm, "lefthook-*", "bin", "lefthook")); len(found) > 0 {
		return found[0]
	}
	if p := filepath.Join(nm, ".bin", "lefthook"); fileExists(p) {
		return p
	}
	return needProgram(t, "lefthook", "npm i -E lefthook@2.2.1 in .ci/tools, as .ci/run does")
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func (r *repo) git(dir string, args ...string) string {
	r.t.Helper()
	return must(r.t, dir, r.env, "git", args...)
}

// commit changes a tracked file in the worktree and commits it, so that
// every hook manager sees something to push.
func (r *repo) commit(worktree string) string {
	r.t.Helper()
	r.seq++
	writeFile(r.t, filepath.Join(worktree, "app.txt"), fmt.Sprintf("%d\n", r.seq), 0o644)
	r.git(worktree, "commit", "-q", "-a", "-m", fmt.Sprintf("change %d", r.seq))
	return strings.TrimSpace(r.git(worktree, "rev-parse", "HEAD"))
}

// remoteRef is the remote's sha for a branch, "" when it has none.
func (r *repo) remoteRef(branch string) string {
	r.t.Helper()
	out := must(r.t, r.dir, r.env, "git", "--git-dir", r.remote, "for-each-ref", "--format=%(objectname)", "refs/heads/"+branch)
	return strings.TrimSpace(out)
}

// markers is a fresh directory for the records of the gates of one push
// (or of a few concurrent ones).
func (r *repo) markers() string {
	r.t.Helper()
	r.seq++
	d := filepath.Join(r.dir, "markers", strconv.Itoa(r.seq))
	if err := os.MkdirAll(d, 0o755); err != nil {
		r.t.Fatal(err)
	}
	return d
}

// push runs git push in a worktree with extra environment.
func (r *repo) push(worktree string, extra []string, args ...string) result {
	r.t.Helper()
	return runIn(r.t, worktree, append(append([]string{}, r.env...), extra...), "git", append([]string{"push"}, args...)...)
}

// gateRun is one run of the gate, as testE2E recorded it.
type gateRun struct {
	worktree, slot, owner, db, redisDB, apiPort string
}

func readRuns(t *testing.T, markers string) []gateRun {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(markers, "run.*"))
	if err != nil {
		t.Fatal(err)
	}
	var runs []gateRun
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fields := strings.Fields(string(data))
		if len(fields) != 6 {
			t.Fatalf("%s: malformed record %q", f, data)
		}
		runs = append(runs, gateRun{fields[0], fields[1], fields[2], fields[3], fields[4], fields[5]})
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].worktree < runs[j].worktree })
	return runs
}

// readRecord returns the words of the one record named PREFIX.* in
// markers, "" for a record the gate did not leave.
func readRecord(t *testing.T, markers, prefix string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(markers, prefix+".*"))
	if err != nil {
		t.Fatal(err)
	}
	switch len(files) {
	case 0:
		return ""
	case 1:
		data, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(string(data)), " ")
	}
	t.Fatalf("%d %s records in %s, want one gate run", len(files), prefix, markers)
	return ""
}

// checkRun checks that a gate run got the environment of the slot it held
// and the owner the pre-push script gives it.
func (r *repo) checkRun(run gateRun, worktree string) {
	r.t.Helper()
	if run.worktree != worktree {
		r.t.Errorf("gate ran in worktree %s, want %s", run.worktree, worktree)
	}
	if wantOwner := "pre-push@" + worktree; run.owner != wantOwner {
		r.t.Errorf("gate in %s held its slot as %q, want %q", worktree, run.owner, wantOwner)
	}
	for _, s := range r.pool.Slots {
		if strconv.Itoa(s.ID) == run.slot {
			if run.db != s.DB || run.redisDB != strconv.Itoa(s.CacheDB) || run.apiPort != strconv.Itoa(s.Ports.API) {
				r.t.Errorf("gate on slot %s got database %s, Redis index %s, port %s; pool.json says %s, %d, %d",
					run.slot, run.db, run.redisDB, run.apiPort, s.DB, s.CacheDB, s.Ports.API)
			}
			return
		}
	}
	r.t.Errorf("gate ran on slot %q, which pool.json does not have", run.slot)
}

func (r *repo) assertFree() {
	r.t.Helper()
	assertPoolFree(r.t, r.env, filepath.Join(r.main, "ci", "pool.json"), r.main)
}

// pushScenarios are what every hook style must do, in order, on one repo.
func pushScenarios(t *testing.T, style string) {
	start := time.Now()
	r := newRepo(t, style)
	t.Logf("%s: repository and hooks set up in %s", style, time.Since(start).Round(time.Millisecond))

	t.Run("push runs the gate", func(t *testing.T) {
		r.t = t
		sha := r.commit(r.main)
		m := r.markers()
		res := r.push(r.main, []string{"HOOKTEST_MARKERS=" + m}, "origin", "main")
		if res.err != nil {
			t.Fatalf("git push: %v\n%s", res.err, res.output())
		}
		runs := readRuns(t, m)
		if len(runs) != 1 {
			t.Fatalf("the gate ran %d times, want once; git push said:\n%s", len(runs), res.output())
		}
		r.checkRun(runs[0], "main")
		if got := r.remoteRef("main"); got != sha {
			t.Errorf("remote main is %s, want the pushed %s", got, sha)
		}
		t.Logf("push with a passing gate: %s", res.took.Round(time.Millisecond))
		r.assertFree()
	})

	t.Run("failing gate blocks the push", func(t *testing.T) {
		r.t = t
		before := r.remoteRef("main")
		r.commit(r.main)
		m := r.markers()
		res := r.push(r.main, []string{"HOOKTEST_MARKERS=" + m, "HOOKTEST_FAIL=1"}, "origin", "main")
		if res.err == nil {
			t.Fatalf("git push succeeded past a failing gate:\n%s", res.stderr)
		}
		if len(readRuns(t, m)) != 1 {
			t.Errorf("the gate did not run; git push said:\n%s", res.stderr)
		}
		if !strings.Contains(res.output(), "failing on purpose") {
			t.Errorf("git push's output does not show the gate's failure:\n%s", res.output())
		}
		if got := r.remoteRef("main"); got != before {
			t.Errorf("remote main moved to %s past a failing gate (was %s)", got, before)
		}
		t.Logf("push blocked by a failing gate: %s", res.took.Round(time.Millisecond))
		r.assertFree()
	})

	t.Run("deleting a remote branch does not run the gate", func(t *testing.T) {
		r.t = t
		r.git(r.main, "push", "-q", "--no-verify", "origin", "HEAD:refs/heads/doomed")
		if r.remoteRef("doomed") == "" {
			t.Fatal("setup: the branch to delete is not on the remote")
		}
		m := r.markers()
		res := r.push(r.main, []string{"HOOKTEST_MARKERS=" + m}, "origin", "--delete", "doomed")
		if res.err != nil {
			t.Fatalf("git push --delete: %v\n%s", res.err, res.stderr)
		}
		if runs := readRuns(t, m); len(runs) != 0 {
			t.Errorf("the gate ran %d times for a deletion", len(runs))
		}
		if strings.Contains(res.output(), "pool-run:") {
			t.Errorf("pool-run ran for a deletion:\n%s", res.output())
		}
		if got := r.remoteRef("doomed"); got != "" {
			t.Errorf("the remote branch is still there (%s)", got)
		}
		t.Logf("deletion: %s", res.took.Round(time.Millisecond))
		r.assertFree()
	})

	t.Run("two worktrees pushing at once get different slots", func(t *testing.T) {
		r.t = t
		names := []string{"wt-a", "wt-b"}
		shas := map[string]string{}
		for _, name := range names {
			wt := filepath.Join(r.dir, name)
			r.git(r.main, "worktree", "add", "-q", "-b", name, wt, "main")
			shas[name] = r.commit(wt)
		}
		m := r.markers()
		results := make([]result, len(names))
		var wg sync.WaitGroup
		for i, name := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = r.push(filepath.Join(r.dir, name), []string{"HOOKTEST_MARKERS=" + m, "HOOKTEST_PEERS=2"}, "-u", "origin", name)
			}()
		}
		wg.Wait()
		for i, name := range names {
			if results[i].err != nil {
				t.Errorf("git push in %s: %v\n%s", name, results[i].err, results[i].output())
				continue
			}
			if got := r.remoteRef(name); got != shas[name] {
				t.Errorf("remote %s is %q, want the pushed %s", name, got, shas[name])
			}
			t.Logf("concurrent push from %s: %s", name, results[i].took.Round(time.Millisecond))
		}
		runs := readRuns(t, m)
		if len(runs) != 2 {
			t.Fatalf("%d gate runs recorded, want one per worktree", len(runs))
		}
		for i, run := range runs {
			r.checkRun(run, names[i])
		}
		if runs[0].slot == runs[1].slot {
			t.Errorf("both worktrees' gates held slot %s at the same time", runs[0].slot)
		}
		r.assertFree()
	})
}

// TestGitHookPrePush: examples/hooks/pre-push as .git/hooks/pre-push.
func TestGitHookPrePush(t *testing.T) { pushScenarios(t, styleGit) }

// TestLefthookPrePush: examples/hooks/lefthook.yml with the pre-push
// script as a lefthook script job, under the pinned lefthook.
func TestLefthookPrePush(t *testing.T) { pushScenarios(t, styleLefthook) }

// TestPreCommitPrePush: examples/hooks/.pre-commit-config.yaml under
// pre-commit, output on a pseudo-terminal as at a terminal.
func TestPreCommitPrePush(t *testing.T) { pushScenarios(t, stylePreCommit) }

// TestFirstPushFromRootCommit pushes, in every hook style, history that
// starts at a root commit the remote lacks: a new branch with a history of
// its own, and a first push to an empty remote. pre-commit then sets
// neither PRE_COMMIT_FROM_REF nor PRE_COMMIT_TO_REF (it runs its hooks on
// all files instead), and the gate must still get the pushed sha.
func TestFirstPushFromRootCommit(t *testing.T) {
	for _, style := range []string{styleGit, styleLefthook, stylePreCommit} {
		t.Run(style, func(t *testing.T) {
			r := newRepo(t, style)
			// Two commits of the worktree's files on a new root, made with
			// commit-tree so that the worktree stays on main.
			root := strings.TrimSpace(r.git(r.main, "commit-tree", "-m", "new root", "HEAD^{tree}"))
			tip := strings.TrimSpace(r.git(r.main, "commit-tree", "-p", root, "-m", "on the new root", "HEAD^{tree}"))
			r.git(r.main, "branch", "fresh", tip)
			empty := filepath.Join(r.dir, "empty.git")
			r.git(r.dir, "init", "-q", "--bare", empty)
			r.git(r.main, "remote", "add", "empty", empty)

			for _, tc := range []struct{ name, remote, remoteDir, branch string }{
				{"new branch from a root commit", "origin", r.remote, "fresh"},
				{"first push to an empty remote", "empty", empty, "main"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					r.t = t
					want := strings.TrimSpace(r.git(r.main, "rev-parse", "refs/heads/"+tc.branch))
					wantCommits := strings.Join(strings.Fields(r.git(r.main, "rev-list", want)), " ")
					m := r.markers()
					res := r.push(r.main, []string{"HOOKTEST_MARKERS=" + m}, tc.remote, tc.branch)
					if res.err != nil {
						t.Fatalf("git push %s %s: %v\n%s", tc.remote, tc.branch, res.err, res.output())
					}
					if len(readRuns(t, m)) != 1 {
						t.Fatalf("the gate did not run once; git push said:\n%s", res.output())
					}
					if got := strings.TrimSpace(r.git(r.dir, "--git-dir", tc.remoteDir, "rev-parse", "refs/heads/"+tc.branch)); got != want {
						t.Fatalf("the remote's %s is %s after the push, want %s", tc.branch, got, want)
					}
					if got := readRecord(t, m, "shas"); got != want {
						t.Errorf("the gate got PRE_PUSH_SHAS=%q, want the pushed %s", got, want)
					}
					// Every commit of the branch is new to the remote.
					if got := readRecord(t, m, "commits"); got != wantCommits {
						t.Errorf("the gate found %q new to the remote, want git rev-list %s: %q", got, tc.branch, wantCommits)
					}
				})
			}
			r.t = t
			r.assertFree()
		})
	}
}

// TestPrePushHookInput runs the pre-push script directly, as each hook
// manager would, on inputs a push through git does not produce in the
// tests above.
func TestPrePushHookInput(t *testing.T) {
	r := newRepo(t, styleGit)
	hook := filepath.Join(r.main, ".git", "hooks", "pre-push")
	head := strings.TrimSpace(r.git(r.main, "rev-parse", "HEAD"))
	zero := strings.Repeat("0", 40)
	cases := []struct {
		name, stdin string
		env         []string
		gate        bool
	}{
		{name: "deletions only", stdin: "(delete) " + zero + " refs/heads/a " + head + "\n(delete) " + zero + " refs/heads/b " + head + "\n"},
		{name: "a deletion and an update", stdin: "(delete) " + zero + " refs/heads/a " + head + "\nrefs/heads/main " + head + " refs/heads/main " + zero + "\n", gate: true},
		{name: "no lines at all", gate: true},
		{name: "under pre-commit, stdin at /dev/null", env: []string{"PRE_COMMIT_REMOTE_NAME=origin", "PRE_COMMIT_TO_REF=" + head}, gate: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r.t = t
			m := r.markers()
			env := append(append([]string{}, r.env...), append(tc.env, "HOOKTEST_MARKERS="+m)...)
			res := runInput(t, r.main, env, tc.stdin, hook, "origin", r.remote)
			if res.err != nil {
				t.Fatalf("the hook failed: %v\n%s", res.err, res.stderr)
			}
			runs := readRuns(t, m)
			switch {
			case tc.gate && len(runs) != 1:
				t.Errorf("the gate ran %d times, want once:\n%s", len(runs), res.stderr)
			case !tc.gate && (len(runs) != 0 || strings.Contains(res.stderr, "pool-run:")):
				t.Errorf("the gate ran:\n%s", res.stderr)
			}
		})
	}
	r.t = t
	r.assertFree()
}
