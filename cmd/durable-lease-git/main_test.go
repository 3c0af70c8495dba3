package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/gitstore"
	"github.com/durable-lease/durable-lease/gitstore/gittest"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
)

func TestMain(m *testing.M) { testrun.Main(m, testrun.Parallel(8)) }

// installed returns the directory of the executables, built as the README
// installs them, once for the whole go test run (see testrun.Commands).
func installed(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		testrun.Skip(t, "-short (builds the CLIs)")
	}
	gittest.NeedGit(t)
	return testrun.Commands(t, "")
}

type result struct {
	code           int
	out            map[string]any
	stdout, stderr string
	took           time.Duration
}

// host is one machine's view: its own cache directory, so its own
// sightings of the remote's tips.
type host struct {
	t   *testing.T
	bin string
	env []string
}

func newHost(t *testing.T, bin string) *host {
	return &host{t: t, bin: bin, env: []string{"PATH=/usr/bin:/bin", "XDG_CACHE_HOME=" + t.TempDir(), "HOME=" + t.TempDir()}}
}

func (h *host) run(exe string, args ...string) result {
	h.t.Helper()
	cmd := exec.Command(filepath.Join(h.bin, exe), args...)
	cmd.Env = append(os.Environ(), h.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(began)}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		h.t.Fatalf("%s: %v", exe, err)
	}
	_ = json.Unmarshal(stdout.Bytes(), &r.out)
	return r
}

// TestLeaseOnGitStore: lease and pool-run hand a git+… store to
// durable-lease-git beside them and behave as on any store, over
// git+file://, git daemon and smart HTTP; pool refuses a git store.
func TestLeaseOnGitStore(t *testing.T) {
	bin := installed(t)
	for name, remote := range transports {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url := remote(t)
			h := newHost(t, bin)
			scratch := t.TempDir()
			h.env = append(h.env, "TMPDIR="+scratch)
			a := h.run("lease", "acquire", "--store", url, "--kind", "baton", "--owner", "ci-one", "--ttl", "5")
			if a.code != 0 || a.out["code"] != "acquired" || a.out["fence"] != float64(1) {
				t.Fatalf("acquire: exit %d %s %s", a.code, a.stdout, a.stderr)
			}
			token := a.out["record"].(map[string]any)["token"].(string)
			h.env = append(h.env, "LEASE_STORE="+url)
			b := h.run("lease", "acquire", "--kind", "baton", "--owner", "ci-two", "--ttl", "5")
			if b.code != 1 || b.out["code"] != "held" || b.out["holder"] != "ci-one" {
				t.Fatalf("second acquire: exit %d %s %s", b.code, b.stdout, b.stderr)
			}
			if s := h.run("lease", "status", "--kind", "baton"); s.code != 0 || s.out["state"] != "held" || s.out["fence"] != float64(1) {
				t.Fatalf("status: exit %d %s", s.code, s.stdout)
			}
			if hb := h.run("lease", "heartbeat", "--kind", "baton", "--owner", "ci-one", "--token", token); hb.code != 0 || hb.out["ok"] != true {
				t.Fatalf("heartbeat: exit %d %s %s", hb.code, hb.stdout, hb.stderr)
			}
			if r := h.run("lease", "reap", "--kind", "baton"); r.code != 1 || r.out["code"] != "not_dead" {
				t.Fatalf("reap of a live lease: exit %d %s", r.code, r.stdout)
			}
			if r := h.run("lease", "reconcile"); r.code != 0 || !strings.Contains(r.stdout, `"held":[{"kind":"baton","state":"held"`) {
				t.Fatalf("reconcile: exit %d %s", r.code, r.stdout)
			}
			// The store is named with its namespace, default or not.
			canonical := url
			if !strings.Contains(url, "#") {
				canonical += "#" + gitstore.DefaultNamespace
			}
			if l := h.run("lease", "list"); l.code != 0 || l.out["store"] != canonical || !strings.Contains(l.stdout, `"kind":"baton"`) {
				t.Fatalf("list: exit %d %s", l.code, l.stdout)
			}
			if r := h.run("lease", "release", "--kind", "baton", "--owner", "ci-one", "--token", token); r.code != 0 || r.out["released"] != true {
				t.Fatalf("release: exit %d %s %s", r.code, r.stdout, r.stderr)
			}
			if s := h.run("lease", "status", "--kind", "baton"); s.out["state"] != "free" {
				t.Fatalf("status after release: %s", s.stdout)
			}
			// pool-run holds the baton for its command, with a larger fence
			// (the release kept it).
			pr := h.run("pool-run", "--kind", "baton", "--owner", "ci-two", "--ttl", "5", "--", "sh", "-c", `echo "fence=$POOL_RUN_FENCE"`)
			if pr.code != 0 || strings.TrimSpace(pr.stdout) != "fence=2" {
				t.Fatalf("pool-run: exit %d %q %s", pr.code, pr.stdout, pr.stderr)
			}
			// A lease lost while the command runs (here it takes it away
			// itself) ends pool-run with 75.
			lost := h.run("pool-run", "--kind", "baton", "--owner", "ci-two", "--ttl", "5", "--",
				filepath.Join(bin, "lease"), "release", "--kind", "baton", "--force", "--owner", "ops")
			if lost.code != 75 || !strings.Contains(lost.stderr, "lease_lost (exit 75)") {
				t.Fatalf("pool-run losing its lease: exit %d %s", lost.code, lost.stderr)
			}
			// pool keeps no pools on a git store: a usage error that says
			// why, and nothing written.
			poolFile := filepath.Join(t.TempDir(), "pool.json")
			if err := os.WriteFile(poolFile, []byte(`{"name":"p","slots":[{"id":1}]}`), 0o644); err != nil {
				t.Fatal(err)
			}
			p := h.run("pool", "acquire", "--pool", poolFile, "--owner", "ci-one", "--no-wait")
			if p.code != 2 || p.out["code"] != "usage" || !strings.Contains(fmt.Sprint(p.out["error"]), "keeps no pools") {
				t.Fatalf("pool on a git store: exit %d %s", p.code, p.stdout)
			}
			// Every call removed its scratch repository (pool-run's
			// stayed behind, one per run).
			if left, _ := filepath.Glob(filepath.Join(scratch, "gitstore-*")); len(left) != 0 {
				t.Fatalf("scratch repositories left behind: %v", left)
			}
		})
	}
}

// TestTakeoverAcrossCalls: another host's CLI calls take a dead holder's
// lease over once they have watched its tip unchanged for the TTL plus
// the margin, each call a process of its own; the takeover is loud and
// journaled in the ref. Before the sightings outlived the process every
// call saw the tip for the first time and found it held for ever.
func TestTakeoverAcrossCalls(t *testing.T) {
	t.Parallel()
	bin := installed(t)
	url := "git+file://" + gittest.BareRepo(t)
	holder, contender := newHost(t, bin), newHost(t, bin)
	const ttl = "0.02" // minutes: 1.2 s, and a margin of 1 s
	a := holder.run("lease", "acquire", "--store", url, "--kind", "k", "--owner", "ci-dead", "--ttl", ttl)
	if a.code != 0 {
		t.Fatalf("acquire: exit %d %s %s", a.code, a.stdout, a.stderr)
	}
	if s := contender.run("lease", "status", "--store", url, "--kind", "k"); s.out["state"] != "held" {
		t.Fatalf("first sight: %s", s.stdout)
	}
	wait := 1200*time.Millisecond + gitstore.Margin(1200*time.Millisecond) + 300*time.Millisecond
	time.Sleep(wait) // the patience itself: no event to wait for
	if s := contender.run("lease", "status", "--store", url, "--kind", "k"); s.out["state"] != "unknown" {
		t.Fatalf("after TTL+margin: %s", s.stdout)
	}
	b := contender.run("lease", "acquire", "--store", url, "--kind", "k", "--owner", "ci-new", "--ttl", "5")
	if b.code != 0 || b.out["tookOverExpired"] != true || b.out["fence"] != float64(2) {
		t.Fatalf("takeover: exit %d %s %s", b.code, b.stdout, b.stderr)
	}
	if !strings.Contains(b.stderr, `took over the dead lease k of "ci-dead" (journaled in refs/durable-lease/default/journal)`) {
		t.Fatalf("takeover not told: %s", b.stderr)
	}
	token := a.out["record"].(map[string]any)["token"].(string)
	if hb := holder.run("lease", "heartbeat", "--store", url, "--kind", "k", "--owner", "ci-dead", "--token", token); hb.code != 1 {
		t.Fatalf("the displaced holder's heartbeat: exit %d %s (want a refusal, no revival)", hb.code, hb.stdout)
	}
}

// TestRacingProcesses: processes racing for one kind on one remote, over
// each transport: one winner, every other refused as held, none
// unavailable.
func TestRacingProcesses(t *testing.T) {
	bin := installed(t)
	for name, remote := range transports {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			race(t, bin, remote(t))
		})
	}
}

// transports serve a new bare repository each and give its store URL.
var transports = map[string]func(t *testing.T) string{
	"file": func(t *testing.T) string { return "git+file://" + gittest.BareRepo(t) + "#ci" },
	"daemon": func(t *testing.T) string {
		dir := gittest.BareRepo(t)
		prefix, _ := gittest.Daemon(t, filepath.Dir(dir))
		return "git+" + prefix + "/" + filepath.Base(dir)
	},
	"http": func(t *testing.T) string {
		dir := gittest.BareRepo(t)
		srv := gittest.HTTP(t, filepath.Dir(dir))
		return "git+" + srv.URL + "/" + filepath.Base(dir) + "#ci"
	},
}

func race(t *testing.T, bin, url string) {
	const n = 6
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = newHost(t, bin).run("lease", "acquire", "--store", url, "--kind", "merge", "--owner", fmt.Sprintf("ci-r%d", i), "--ttl", "5")
		}()
	}
	wg.Wait()
	won := 0
	for i, r := range results {
		switch {
		case r.code == 0:
			won++
		case r.code == 1 && r.out["code"] == "held":
		default:
			t.Errorf("racer %d: exit %d %s %s", i, r.code, r.stdout, r.stderr)
		}
	}
	if won != 1 {
		t.Fatalf("%d winners, want 1", won)
	}
}

// TestGitStoreMistakes: a URL with credentials is refused without
// echoing them; an unreachable remote is exit 3 (unavailable); without
// durable-lease-git beside lease the store is a usage error that says
// where it looked; an scp-like remote is a git store, not a directory.
func TestGitStoreMistakes(t *testing.T) {
	t.Parallel()
	bin := installed(t)
	h := newHost(t, bin)
	c := h.run("lease", "status", "--store", "git+https://ci:hunter2@example.invalid/r.git", "--kind", "k")
	if c.code != 2 || c.out["code"] != "usage" || !strings.Contains(c.stdout, "credential helper") || strings.Contains(c.stdout+c.stderr, "hunter2") {
		t.Fatalf("credentials: exit %d %s %s", c.code, c.stdout, c.stderr)
	}
	u := h.run("lease", "status", "--store", "git+git://127.0.0.1:1/r.git", "--kind", "k")
	if u.code != 3 || u.out["code"] != "unavailable" {
		t.Fatalf("unreachable: exit %d %s %s", u.code, u.stdout, u.stderr)
	}
	alone := t.TempDir()
	data, err := os.ReadFile(filepath.Join(bin, "lease"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(alone, "lease"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	solo := &host{t: t, bin: alone, env: h.env}
	n := solo.run("lease", "status", "--store", "git+file://"+gittest.BareRepo(t), "--kind", "k")
	if n.code != 2 || !strings.Contains(n.stdout, "durable-lease-git") || !strings.Contains(n.stdout, filepath.Join(alone, "durable-lease-git")) {
		t.Fatalf("without the helper: exit %d %s", n.code, n.stdout)
	}
	// (git runs ssh for it: here "false", so nothing is contacted.)
	ssh := &host{t: t, bin: bin, env: append(h.env, "GIT_SSH_COMMAND=false")}
	scp := ssh.run("lease", "status", "--store", "git+nobody@127.0.0.1:r.git", "--kind", "k")
	if scp.code != 3 || scp.out["code"] != "unavailable" {
		t.Fatalf("scp-like remote: exit %d %s %s (want it tried as a git remote)", scp.code, scp.stdout, scp.stderr)
	}
}

// TestLiveGitHub runs a baton on a real GitHub repository over HTTPS, with
// the server's Date deciding, when DL_GITHUB_REPO (owner/name) and
// DL_GITHUB_TOKEN (a token allowed to push to it) are set; it is opt-in
// and skipped otherwise. Each run uses a namespace of its own
// (refs/durable-lease/live-<random>/), which it leaves behind: delete
// old ones with git push --delete.
func TestLiveGitHub(t *testing.T) {
	repo, token := os.Getenv("DL_GITHUB_REPO"), os.Getenv("DL_GITHUB_TOKEN")
	if repo == "" || token == "" {
		testrun.Skip(t, "set DL_GITHUB_REPO=owner/name and DL_GITHUB_TOKEN to run a baton on a real GitHub repository")
	}
	bin := installed(t)
	h := newHost(t, bin)
	home := strings.TrimPrefix(h.env[2], "HOME=")
	// The token reaches git through a credential helper, as a user's
	// would: never in the URL or argv.
	helper := "[credential]\n\thelper = \"!f() { test \\\"$1\\\" = get && echo username=x-access-token && echo password=$DL_GITHUB_TOKEN; }; f\"\n"
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(helper), 0o600); err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("live-%d", time.Now().UnixNano())
	url := "git+https://github.com/" + repo + ".git#" + ns
	a := h.run("lease", "acquire", "--store", url, "--kind", "baton", "--owner", "ci-live", "--ttl", "10")
	if a.code != 0 || a.out["fence"] != float64(1) {
		t.Fatalf("acquire: exit %d %s %s", a.code, a.stdout, a.stderr)
	}
	if strings.Contains(a.stdout+a.stderr, token) {
		t.Fatal("the token appeared in the output")
	}
	token1 := a.out["record"].(map[string]any)["token"].(string)
	other := &host{t: t, bin: bin, env: []string{"PATH=/usr/bin:/bin", "XDG_CACHE_HOME=" + t.TempDir(), "HOME=" + home}}
	if s := other.run("lease", "status", "--store", url, "--kind", "baton"); s.out["state"] != "held" {
		t.Fatalf("another host's status: %s %s", s.stdout, s.stderr)
	}
	hb := h.run("lease", "heartbeat", "--store", url, "--kind", "baton", "--owner", "ci-live", "--token", token1)
	if hb.code != 0 {
		t.Fatalf("heartbeat: exit %d %s %s", hb.code, hb.stdout, hb.stderr)
	}
	rel := h.run("lease", "release", "--store", url, "--kind", "baton", "--owner", "ci-live", "--token", token1)
	if rel.code != 0 {
		t.Fatalf("release: exit %d %s %s", rel.code, rel.stdout, rel.stderr)
	}
	t.Logf("acquire %s, heartbeat %s, release %s", a.took.Round(time.Millisecond), hb.took.Round(time.Millisecond), rel.took.Round(time.Millisecond))
}
