package hooktest

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMergeBaton: examples/hooks/merge-baton serializes merges. While one
// session holds the baton, a second one waits, is told who holds it and
// until when, and merges once the first is done; the baton is free after.
func TestMergeBaton(t *testing.T) {
	needProgram(t, "git", "apt-get install -y git")
	dir := t.TempDir()
	env := isolatedEnv(t, dir)
	baton := filepath.Join(dir, "merge-baton")
	copyExample(t, "merge-baton", baton, 0o755)

	repo := filepath.Join(dir, "repo")
	must(t, dir, env, "git", "init", "-q", repo)
	writeFile(t, filepath.Join(repo, "a.txt"), "a\n", 0o644)
	must(t, repo, env, "git", "add", "-A")
	must(t, repo, env, "git", "commit", "-q", "-m", "a")
	must(t, repo, env, "git", "checkout", "-q", "-b", "topic")
	writeFile(t, filepath.Join(repo, "b.txt"), "b\n", 0o644)
	must(t, repo, env, "git", "add", "-A")
	must(t, repo, env, "git", "commit", "-q", "-m", "b")
	must(t, repo, env, "git", "checkout", "-q", "main")
	before := strings.TrimSpace(must(t, repo, env, "git", "rev-parse", "HEAD"))

	holding, release := filepath.Join(dir, "holding"), filepath.Join(dir, "release")
	ctx, cancel := context.WithTimeout(context.Background(), programTimeout)
	// However the test ends, both sessions are gone before their
	// directory is removed.
	var running sync.WaitGroup
	defer func() {
		_ = os.WriteFile(release, nil, 0o644)
		cancel()
		running.Wait()
	}()

	// The first session: holds the baton until told to let go.
	holder := exec.CommandContext(ctx, baton, "--", "sh", "-c",
		`: > "$HOLDING"; while [ ! -e "$RELEASE" ]; do sleep 0.05; done`)
	holder.Dir = repo
	holder.Env = append(env, "LEASE_OWNER=session-a", "HOLDING="+holding, "RELEASE="+release)
	var holderErr syncBuffer
	holder.Stderr = &holderErr
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	holderDone := make(chan error, 1)
	running.Add(1)
	go func() { defer running.Done(); holderDone <- holder.Wait() }()
	if !waitFor(20*time.Second, func() bool { return fileExists(holding) }) {
		t.Fatalf("the first session never got the baton:\n%s", holderErr.String())
	}

	var st struct {
		State  string `json:"state"`
		Record struct {
			Owner   string `json:"owner"`
			Payload struct {
				Command string `json:"command"`
				Dir     string `json:"dir"`
			} `json:"payload"`
		} `json:"record"`
	}
	out := must(t, repo, env, "lease", "status", "--kind", "merge-baton")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("lease status: %v\n%s", err, out)
	}
	realRepo, err := filepath.EvalSymlinks(repo)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != "held" || st.Record.Owner != "session-a" || !strings.HasPrefix(st.Record.Payload.Command, "sh -c") || st.Record.Payload.Dir != realRepo {
		t.Errorf("lease status while held: %s", out)
	}

	// The second session: a real merge, which has to wait.
	waiter := exec.CommandContext(ctx, baton, "--no-ff", "-q", "-m", "merge topic", "topic")
	waiter.Dir = repo
	waiter.Env = env
	var waiterErr syncBuffer
	waiter.Stdout, waiter.Stderr = &waiterErr, &waiterErr
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	waiterDone := make(chan error, 1)
	running.Add(1)
	go func() { defer running.Done(); waiterDone <- waiter.Wait() }()

	const told = `pool-run: merge-baton is held by "session-a" until 20`
	if !waitFor(20*time.Second, func() bool { return strings.Contains(waiterErr.String(), told) }) {
		t.Fatalf("the waiting session was not told who holds the baton; it said:\n%s", waiterErr.String())
	}
	select {
	case err := <-waiterDone:
		t.Fatalf("the second session finished (%v) while the first held the baton:\n%s", err, waiterErr.String())
	case <-time.After(200 * time.Millisecond):
	}
	if now := strings.TrimSpace(must(t, repo, env, "git", "rev-parse", "HEAD")); now != before {
		t.Fatalf("the merge happened while the baton was held elsewhere")
	}

	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-holderDone; err != nil {
		t.Fatalf("the first session: %v\n%s", err, holderErr.String())
	}
	if err := <-waiterDone; err != nil {
		t.Fatalf("the second session: %v\n%s", err, waiterErr.String())
	}
	if r := runIn(t, repo, env, "git", "merge-base", "--is-ancestor", "topic", "HEAD"); r.err != nil {
		t.Errorf("topic was not merged: %v", r.err)
	}
	if parents := strings.Fields(must(t, repo, env, "git", "log", "-1", "--format=%P")); len(parents) != 2 {
		t.Errorf("HEAD has %d parents, want the --no-ff merge commit", len(parents))
	}
	if !strings.Contains(waiterErr.String(), `held lease merge-baton`) {
		t.Errorf("no closing line from pool-run:\n%s", waiterErr.String())
	}

	out = must(t, repo, env, "lease", "status", "--kind", "merge-baton")
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.State != "free" {
		t.Errorf("the baton is not free afterwards: %v %s", err, out)
	}

	// The command's status is merge-baton's; no command is a usage error.
	if r := runIn(t, repo, env, baton, "--", "sh", "-c", "exit 7"); r.exitCode() != 7 {
		t.Errorf("merge-baton -- sh -c 'exit 7' exited %d, want 7\n%s", r.exitCode(), r.stderr)
	}
	if r := runIn(t, repo, env, baton); r.exitCode() != 2 {
		t.Errorf("merge-baton without arguments exited %d, want 2", r.exitCode())
	}
}

// TestMergeBatonAcrossClones: with no LEASE_STORE, two separate clones of
// one project (each with a logs/leases of its own) share one baton, the
// user's: while a session of one clone holds it, the other's merge-baton
// is told who holds it and gives up after MERGE_BATON_WAIT_MS.
func TestMergeBatonAcrossClones(t *testing.T) {
	needProgram(t, "git", "apt-get install -y git")
	dir := t.TempDir()
	var env []string
	for _, kv := range isolatedEnv(t, dir) {
		if !strings.HasPrefix(kv, "LEASE_STORE=") {
			env = append(env, kv)
		}
	}
	baton := filepath.Join(dir, "merge-baton")
	copyExample(t, "merge-baton", baton, 0o755)
	origin := filepath.Join(dir, "origin")
	must(t, dir, env, "git", "init", "-q", origin)
	writeFile(t, filepath.Join(origin, "a.txt"), "a\n", 0o644)
	must(t, origin, env, "git", "add", "-A")
	must(t, origin, env, "git", "commit", "-q", "-m", "a")
	a, b := filepath.Join(dir, "clone-a"), filepath.Join(dir, "clone-b")
	must(t, dir, env, "git", "clone", "-q", origin, a)
	must(t, dir, env, "git", "clone", "-q", origin, b)

	holding, release := filepath.Join(dir, "holding"), filepath.Join(dir, "release")
	ctx, cancel := context.WithTimeout(context.Background(), programTimeout)
	var running sync.WaitGroup
	defer func() {
		_ = os.WriteFile(release, nil, 0o644)
		cancel()
		running.Wait()
	}()
	holder := exec.CommandContext(ctx, baton, "--", "sh", "-c",
		`: > "$HOLDING"; while [ ! -e "$RELEASE" ]; do sleep 0.05; done`)
	holder.Dir = a
	holder.Env = append(env, "LEASE_OWNER=session-a", "HOLDING="+holding, "RELEASE="+release)
	var holderErr syncBuffer
	holder.Stderr = &holderErr
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	running.Add(1)
	go func() { defer running.Done(); _ = holder.Wait() }()
	if !waitFor(20*time.Second, func() bool { return fileExists(holding) }) {
		t.Fatalf("the first clone never got the baton:\n%s", holderErr.String())
	}
	second := exec.CommandContext(ctx, baton, "--", "true")
	second.Dir = b
	second.Env = append(env, "LEASE_OWNER=session-b", "MERGE_BATON_WAIT_MS=300")
	out, err := second.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), `"session-a"`) {
		t.Fatalf("the second clone's merge-baton: %v, want exit 1 naming session-a:\n%s", err, out)
	}
	for _, c := range []string{a, b} {
		if fileExists(filepath.Join(c, "logs")) {
			t.Errorf("%s has a store of its own", c)
		}
	}
}

// TestOneBatonFromEveryDirectory: with no LEASE_STORE, the merge-baton
// hook, pool-run --kind merge-baton and lease all use the user's store
// for the host, so the baton the hook holds in a linked worktree of one
// clone is the baton lease and pool-run see from the main checkout,
// from a second clone and from a directory outside git: lease status
// shows its holder and the command it runs, quoted as it was given.
func TestOneBatonFromEveryDirectory(t *testing.T) {
	needProgram(t, "git", "apt-get install -y git")
	dir := t.TempDir()
	var env []string
	for _, kv := range isolatedEnv(t, dir) {
		if !strings.HasPrefix(kv, "LEASE_STORE=") {
			env = append(env, kv)
		}
	}
	baton := filepath.Join(dir, "merge-baton")
	copyExample(t, "merge-baton", baton, 0o755)
	origin := filepath.Join(dir, "origin")
	must(t, dir, env, "git", "init", "-q", origin)
	writeFile(t, filepath.Join(origin, "a.txt"), "a\n", 0o644)
	must(t, origin, env, "git", "add", "-A")
	must(t, origin, env, "git", "commit", "-q", "-m", "a")
	a, b := filepath.Join(dir, "clone-a"), filepath.Join(dir, "clone-b")
	must(t, dir, env, "git", "clone", "-q", origin, a)
	must(t, dir, env, "git", "clone", "-q", origin, b)
	wt := filepath.Join(dir, "wt-a")
	must(t, a, env, "git", "worktree", "add", "-q", "-b", "topic", wt)
	outside := filepath.Join(dir, "plain")
	writeFile(t, filepath.Join(outside, "x"), "", 0o644)

	holding, release := filepath.Join(dir, "holding"), filepath.Join(dir, "release")
	ctx, cancel := context.WithTimeout(context.Background(), programTimeout)
	var running sync.WaitGroup
	defer func() {
		_ = os.WriteFile(release, nil, 0o644)
		cancel()
		running.Wait()
	}()
	// A command whose words need quoting: a script with spaces, quotes
	// and a semicolon, an empty word and a word with a single quote.
	script := `: > "$HOLDING"; while [ ! -e "$RELEASE" ]; do sleep 0.05; done`
	holder := exec.CommandContext(ctx, baton, "--", "sh", "-c", script, "", "it's")
	holder.Dir = wt
	holder.Env = append(env, "HOLDING="+holding, "RELEASE="+release)
	var holderErr syncBuffer
	holder.Stderr = &holderErr
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	running.Add(1)
	go func() { defer running.Done(); _ = holder.Wait() }()
	if !waitFor(20*time.Second, func() bool { return fileExists(holding) }) {
		t.Fatalf("the hook never got the baton:\n%s", holderErr.String())
	}

	wantCommand := `sh -c '` + script + `' '' 'it'\''s'`
	for _, from := range []string{wt, a, b, outside} {
		var st struct {
			State  string `json:"state"`
			Holder string `json:"holder"`
			Record struct {
				Payload struct {
					Command string `json:"command"`
				} `json:"payload"`
			} `json:"record"`
		}
		out := must(t, from, env, "lease", "status", "--kind", "merge-baton")
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("lease status in %s: %v\n%s", from, err, out)
		}
		if st.State != "held" || st.Holder != "merge@wt-a" || st.Record.Payload.Command != wantCommand {
			t.Errorf("lease status in %s: %s\nwant held by merge@wt-a running %s", from, out, wantCommand)
		}
	}
	// The payload's command reads back, in sh, as the very words run.
	r := runIn(t, dir, env, "sh", "-c", `eval "set -- $1"; printf '[%s]' "$@"`, "sh", wantCommand)
	if want := "[sh][-c][" + script + "][][it's]"; r.stdout != want {
		t.Errorf("the payload's command reads back as %s, want %s (%v)", r.stdout, want, r.err)
	}

	// Nobody else takes it, from anywhere.
	if r := runIn(t, b, env, "lease", "acquire", "--kind", "merge-baton", "--owner", "agent-8", "--ttl", "1"); r.exitCode() != 1 || !strings.Contains(r.stdout, `"code":"held"`) {
		t.Errorf("lease acquire in clone b: exit %d %s, want 1, held", r.exitCode(), r.stdout)
	}
	if r := runIn(t, a, env, "pool-run", "--kind", "merge-baton", "--owner", "agent-7", "--no-wait", "--", "true"); r.exitCode() != 1 || !strings.Contains(r.stderr, `"merge@wt-a"`) {
		t.Errorf("pool-run --kind merge-baton in clone a: exit %d, want 1 naming the hook's holder\n%s", r.exitCode(), r.stderr)
	}
	if r := runIn(t, outside, env, "pool-run", "--kind", "merge-baton", "--owner", "agent-9", "--no-wait", "--", "true"); r.exitCode() != 1 {
		t.Errorf("pool-run --kind merge-baton outside git: exit %d, want 1\n%s", r.exitCode(), r.stderr)
	}
	for _, c := range []string{a, b, wt, outside} {
		if fileExists(filepath.Join(c, "logs")) {
			t.Errorf("%s has a store of its own", c)
		}
	}
}
