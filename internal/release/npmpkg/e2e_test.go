package npmpkg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
)

// releaseDistEnv names a goreleaser dist directory to take the binaries
// from (.ci/run sets it to its snapshot's), instead of the test's own
// build of ./cmd/...: so that CI installs what a release ships.
const releaseDistEnv = "DL_TEST_RELEASE_DIST"

// npmProject is a fresh npm project with the packages installed from
// their tarballs, offline, and the environment its npm commands run in.
type npmProject struct {
	dir      string
	env      []string
	platform string // the platform package's directory, installed
}

// run runs name args in the project and returns its stdout; a failure
// fails the test with both streams.
func (p *npmProject) run(t *testing.T, name string, args ...string) string {
	t.Helper()
	start := time.Now()
	defer func() {
		t.Logf("%s %s: %s", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	}()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = p.dir, p.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// npmEnv is an environment in which npm uses no registry, no cache and no
// configuration of the caller's, and the commands no store of theirs.
func npmEnv(t *testing.T, tmp string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(strings.ToLower(kv), "npm_config_") && !strings.HasPrefix(kv, "LEASE_STORE=") && !strings.HasPrefix(kv, "LEASE_POOL_FILE=") && !strings.HasPrefix(kv, "POOL_") {
			env = append(env, kv)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "npmrc"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return append(env,
		"npm_config_cache="+filepath.Join(tmp, "npm-cache"),
		"npm_config_userconfig="+filepath.Join(tmp, "npmrc"),
		"npm_config_offline=true", // nothing from a registry: the tarballs are files
		"npm_config_audit=false", "npm_config_fund=false", "npm_config_update_notifier=false",
		"npm_config_loglevel=error",
		"LEASE_STORE="+filepath.Join(tmp, "store"),
		testrun.HostRegistryEnv())
}

// tarballs are the packed packages, made once for every test that
// installs them (packing 60 MB of binaries takes seconds).
var tarballs struct {
	once           sync.Once
	dir            string
	main, platform string
	err            error
}

// pack generates the packages from a build (goreleaser's where
// releaseDistEnv names one, else the test run's build of ./cmd/...) and
// packs the main one and this platform's with npm pack.
func pack(t *testing.T) (main, platform string) {
	t.Helper()
	p := hostPlatform(t)
	for _, tool := range []string{"node", "npm", "npx"} {
		if _, err := exec.LookPath(tool); err != nil {
			testrun.Missing(t, "%s is not installed (apt-get install nodejs npm)", tool)
		}
	}
	dist := os.Getenv(releaseDistEnv)
	if dist == "" {
		if os.Getenv("CI") == "true" {
			// Not twice: packing 80 MB of binaries is seconds of a core,
			// beside the suite's timing-sensitive tests.
			testrun.Skip(t, ".ci/run runs the npm tests after the suite, on its release snapshot (%s)", releaseDistEnv)
		}
		if testrun.Race {
			// Packing and installing 60 MB of binaries is a tenth of the
			// race suite's CPU and half a minute of one of a 2-core
			// machine's two package slots, and the race detector watches
			// only this binary, whose part is to start npm.
			testrun.Skip(t, "-race: the npm tests run npm and the commands, where the race detector sees nothing; run them with go test -run TestNpm ./internal/release/npmpkg/ (.ci/run does, on its release snapshot)")
		}
		dist = fakeDist(t, testrun.Commands(t, ""), "0.0.0-e2e")
	}
	tarballs.once.Do(func() {
		tarballs.dir, tarballs.err = os.MkdirTemp("", "durable-lease-npm-")
		if tarballs.err != nil {
			return
		}
		out := filepath.Join(tarballs.dir, "npm")
		if _, tarballs.err = Generate(Options{Dist: dist, Out: out, Root: root}); tarballs.err != nil {
			return
		}
		env := npmEnv(t, tarballs.dir)
		packOne := func(dir string) string {
			if tarballs.err != nil {
				return ""
			}
			cmd := exec.Command("npm", "pack", "--pack-destination", tarballs.dir)
			cmd.Dir, cmd.Env = dir, env
			name, err := cmd.Output()
			if err != nil {
				tarballs.err = fmt.Errorf("npm pack in %s: %w", dir, err)
				return ""
			}
			return filepath.Join(tarballs.dir, strings.TrimSpace(string(name)))
		}
		tarballs.main, tarballs.platform = packOne(filepath.Join(out, "cli")), packOne(filepath.Join(out, p.dirName()))
	})
	if tarballs.err != nil {
		t.Fatal(tarballs.err)
	}
	return tarballs.main, tarballs.platform
}

// installed installs the main package into a fresh npm project, as a
// project's developer does with npm install --save-dev, with its optional
// dependency for this platform taken from its tarball instead of the
// registry (overrides).
func installed(t *testing.T, omitOptional bool) *npmProject {
	t.Helper()
	p := hostPlatform(t)
	mainTarball, platTarball := pack(t)
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := npmEnv(t, tmp)
	proj := &npmProject{dir: filepath.Join(tmp, "project"), env: env, platform: filepath.Join("node_modules", "@durable-lease", p.dirName())}
	if err := os.MkdirAll(filepath.Join(proj.dir, "running"), 0o755); err != nil {
		t.Fatal(err)
	}
	manifest, _ := json.MarshalIndent(map[string]any{
		"name": "e2e-project", "version": "1.0.0", "private": true,
		"scripts": map[string]string{
			"test:e2e":      "sh ./e2e.sh",
			"test:e2e:slot": "pool-run --pool pool.json -- npm run test:e2e",
		},
		"overrides": map[string]string{p.packageName(): "file:" + platTarball},
	}, "", "  ")
	files := map[string]string{
		"package.json": string(manifest),
		// Two databases, one per slot.
		"pool.json": `{
  "ttlMinutes": 1,
  "grantEnv": { "DATABASE_URL": "postgresql://localhost:5432/{db}" },
  "slots": [
    { "id": 1, "db": "app_test_1" },
    { "id": 2, "db": "app_test_2" }
  ]
}
`,
		// The "suite" says which slot it got, then holds it until the
		// other run holds one too (or gives up), so the two hold at once.
		"e2e.sh": `echo "slot $POOL_RUN_SLOT $DATABASE_URL"
: >"running/$POOL_RUN_SLOT"
i=0
while [ "$(ls running | wc -l)" -lt 2 ]; do
	i=$((i + 1))
	[ "$i" -lt 600 ] || { echo "the other run never held a slot" >&2; exit 1; }
	sleep 0.05
done
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(proj.dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"install", "--save-dev", mainTarball}
	if omitOptional {
		args = append(args, "--omit=optional")
	}
	proj.run(t, "npm", args...)
	return proj
}

// TestNpmInstall is the npm install path end to end, offline: the packed
// packages installed into a fresh project put the six commands in
// node_modules/.bin; npx pool-run run twice at once gets two slots of the
// project's pool, each running npm run test:e2e; npx lease --version and
// the package.json script that holds a slot work too.
func TestNpmInstall(t *testing.T) {
	t.Parallel()
	proj := installed(t, false)
	for _, c := range commands {
		if _, err := os.Stat(filepath.Join(proj.dir, "node_modules", ".bin", c)); err != nil {
			t.Errorf("node_modules/.bin: %v", err)
		}
	}
	if out := proj.run(t, "npx", "lease", "--version"); !strings.HasPrefix(out, "lease ") || !strings.Contains(out, ", commit ") {
		t.Errorf("npx lease --version: %q", out)
	}
	if dist := os.Getenv(releaseDistEnv); dist != "" {
		// The release's stamp: its version and its commit.
		var meta struct{ Version, Commit string }
		readJSON(t, filepath.Join(dist, "metadata.json"), &meta)
		want := fmt.Sprintf("lease v%s, commit %s (stamped at build time), %s\n", meta.Version, meta.Commit, runtime.Version())
		if out := proj.run(t, "npx", "lease", "version"); out != want {
			t.Errorf("npx lease version: %q, want %q", out, want)
		}
	}

	// Two runs at once, each holding a slot while its suite runs.
	type result struct {
		out string
		err error
	}
	done := make(chan result, 2)
	for range 2 {
		go func() {
			cmd := exec.Command("npx", "pool-run", "--pool", "pool.json", "--", "npm", "run", "test:e2e")
			cmd.Dir, cmd.Env = proj.dir, proj.env
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			done <- result{out.String(), err}
		}()
	}
	slots := map[string]bool{}
	for range 2 {
		r := <-done
		if r.err != nil {
			t.Fatalf("npx pool-run --pool pool.json -- npm run test:e2e: %v\n%s", r.err, r.out)
		}
		for _, line := range strings.Split(r.out, "\n") {
			if slot, ok := strings.CutPrefix(line, "slot "); ok {
				slots[slot] = true
			}
		}
	}
	want := map[string]bool{"1 postgresql://localhost:5432/app_test_1": true, "2 postgresql://localhost:5432/app_test_2": true}
	if fmt.Sprint(slots) != fmt.Sprint(want) {
		t.Errorf("the two runs held %v, want each its own slot: %v", slots, want)
	}

	// The script of package.json, pool-run found on npm's PATH; alone
	// now, its suite waits for the other's mark, left by the runs above.
	if out := proj.run(t, "npm", "run", "--silent", "test:e2e:slot"); !strings.HasPrefix(out, "slot ") {
		t.Errorf("npm run test:e2e:slot: %q", out)
	}
}

// TestNpmBinIsTheBinary: a bin entry of the package is the platform's
// binary itself once it runs (the shim execs it: the same process), so a
// signal sent to it reaches pool-run, which passes it to its command and
// exits as it does without the package; arguments, standard input and
// exit statuses pass unchanged; and without the platform package (npm
// install --omit=optional) the entry says what is missing and exits 127.
func TestNpmBinIsTheBinary(t *testing.T) {
	t.Parallel()
	proj := installed(t, false)
	bin := func(name string) string { return filepath.Join(proj.dir, "node_modules", ".bin", name) }
	native := func(name string) string { return filepath.Join(proj.dir, proj.platform, "bin", name) }

	for _, exe := range []string{bin("pool-run"), native("pool-run")} {
		// Arguments and standard input, untouched.
		cmd := exec.Command(exe, "--kind", "e2e-args", "--", "sh", "-c", `printf '[%s]' "$@"; cat`, "sh", "a b", "", "*", "$HOME")
		cmd.Dir, cmd.Env = proj.dir, proj.env
		cmd.Stdin = strings.NewReader("from stdin\n")
		out, err := cmd.Output()
		if err != nil || string(out) != "[a b][][*][$HOME]from stdin\n" {
			t.Errorf("%s: %q, %v", exe, out, err)
		}
		// The command's exit status is pool-run's.
		cmd = exec.Command(exe, "--kind", "e2e-exit", "--", "sh", "-c", "exit 7")
		cmd.Dir, cmd.Env = proj.dir, proj.env
		if err := cmd.Run(); exitCode(err) != 7 {
			t.Errorf("%s -- sh -c 'exit 7': %v, want exit 7", exe, err)
		}
	}

	// A signal to the process npm's bin entry started.
	statuses := map[string]int{}
	for _, exe := range []string{bin("pool-run"), native("pool-run")} {
		marker := filepath.Join(t.TempDir(), "started")
		cmd := exec.Command(exe, "--kind", "e2e-signal", "--", "sh", "-c", `: >"$1"; exec sleep 60`, "sh", marker)
		cmd.Dir, cmd.Env = proj.dir, proj.env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for !exists(marker) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if runtime.GOOS == "linux" {
			// The process is pool-run itself, not a shell or node.
			if got, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid)); err != nil || got != native("pool-run") {
				t.Errorf("%s runs as %q (%v), want %s", exe, got, err, native("pool-run"))
			}
		}
		cmd.Process.Signal(syscall.SIGTERM)
		err := cmd.Wait()
		statuses[exe] = exitCode(err)
		// pool-run gave the lease back on its way out.
		if out := proj.run(t, native("lease"), "status", "--kind", "e2e-signal"); !strings.Contains(out, `"state":"free"`) {
			t.Errorf("after SIGTERM to %s: %s\n%s", exe, out, stderr.String())
		}
	}
	if statuses[bin("pool-run")] != statuses[native("pool-run")] || statuses[bin("pool-run")] != 128+int(syscall.SIGTERM) {
		t.Errorf("pool-run exited %v after SIGTERM (bin entry, binary), want %d for both", statuses, 128+int(syscall.SIGTERM))
	}

	// Without the platform package.
	bare := installed(t, true)
	if exists(filepath.Join(bare.dir, bare.platform)) {
		t.Fatal("npm install --omit=optional installed the platform package")
	}
	cmd := exec.Command(filepath.Join(bare.dir, "node_modules", ".bin", "lease"), "--version")
	cmd.Dir, cmd.Env = bare.dir, bare.env
	out, err := cmd.CombinedOutput()
	if exitCode(err) != 127 || !strings.Contains(string(out), "an optional dependency of @durable-lease/cli that is not installed") {
		t.Errorf("lease without its binary: %v\n%s", err, out)
	}
}

func exitCode(err error) int {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return exit.ExitCode()
	}
	return -1
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
