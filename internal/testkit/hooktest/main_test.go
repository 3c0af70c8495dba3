package hooktest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// modulePath is this module; TestMain finds its root by walking up to the
// go.mod that declares it.
const modulePath = "github.com/durable-lease/durable-lease"

var (
	// moduleRoot is the repository root; hooksDir is examples/hooks in it.
	moduleRoot, hooksDir string
	// binDir holds lease, pool and pool-run built from this checkout.
	binDir string
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	root, err := findModuleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hooktest:", err)
		return 1
	}
	moduleRoot, hooksDir = root, filepath.Join(root, "examples", "hooks")
	// Built as the README installs them, once for the whole go test run.
	dir, err := testrun.BuildCommands("")
	if err != nil {
		fmt.Fprintln(os.Stderr, "hooktest:", err)
		return 1
	}
	for _, name := range []string{"lease", "pool", "pool-run"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			fmt.Fprintf(os.Stderr, "hooktest: go build ./cmd/... made no %s: %v\n", name, err)
			return 1
		}
	}
	binDir = dir
	os.Setenv("PATH", dir+string(filepath.ListSeparator)+os.Getenv("PATH"))
	return testrun.Run(m)
}

func findModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module "+modulePath+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of " + modulePath + " above the working directory")
		}
		dir = parent
	}
}

// missing reports a prerequisite that is not there: a skip on a developer's
// machine, a failure under CI=true, where .ci/run provides everything.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	testrun.Missing(t, "%s; start the services with .ci/services.sh (see the package doc)", fmt.Sprintf(format, args...))
}

// needProgram returns the path of a program on PATH.
func needProgram(t *testing.T, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		missing(t, "%s is not installed (%s)", name, install)
	}
	return p
}

// services are where the PostgreSQL and Redis servers of the tests are.
type services struct {
	pgHost, pgPort, pgUser string
	redisHost, redisPort   string
}

// env is the servers' settings under the names the example provisioner
// and gate read.
func (s services) env() []string {
	return []string{
		"PGHOST=" + s.pgHost, "PGPORT=" + s.pgPort, "PGUSER=" + s.pgUser,
		"REDIS_HOST=" + s.redisHost, "REDIS_PORT=" + s.redisPort,
	}
}

// needServices returns the servers from DL_TEST_*, once both answer.
func needServices(t *testing.T) services {
	t.Helper()
	needProgram(t, "psql", "apt-get install -y postgresql-client")
	needProgram(t, "redis-cli", "apt-get install -y redis-tools")
	vars := map[string]string{}
	var unset []string
	for _, name := range []string{"DL_TEST_PGHOST", "DL_TEST_PGPORT", "DL_TEST_PGUSER", "DL_TEST_REDIS_HOST", "DL_TEST_REDIS_PORT"} {
		vars[name] = os.Getenv(name)
		if vars[name] == "" {
			unset = append(unset, name)
		}
	}
	if len(unset) > 0 {
		missing(t, "no PostgreSQL and Redis for the tests: %s unset", strings.Join(unset, ", "))
	}
	s := services{
		pgHost: vars["DL_TEST_PGHOST"], pgPort: vars["DL_TEST_PGPORT"], pgUser: vars["DL_TEST_PGUSER"],
		redisHost: vars["DL_TEST_REDIS_HOST"], redisPort: vars["DL_TEST_REDIS_PORT"],
	}
	if out, err := s.psql(t, "postgres", "SELECT 1"); err != nil {
		missing(t, "PostgreSQL at %s:%s does not answer: %v %s", s.pgHost, s.pgPort, err, out)
	}
	if out, err := s.redis(t, "PING"); err != nil || out != "PONG" {
		missing(t, "Redis at %s:%s does not answer: %v %s", s.redisHost, s.redisPort, err, out)
	}
	return s
}

// psql runs one SQL command on db and returns its unaligned output.
func (s services) psql(t *testing.T, db, sql string) (string, error) {
	t.Helper()
	r := runIn(t, "", cleanEnv(s.env()...), "psql", "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-d", db, "-c", sql)
	return strings.TrimSpace(r.stdout), r.errWithStderr()
}

// redis runs one command and returns redis-cli's reply.
func (s services) redis(t *testing.T, args ...string) (string, error) {
	t.Helper()
	r := runIn(t, "", cleanEnv(), "redis-cli", append([]string{"-h", s.redisHost, "-p", s.redisPort}, args...)...)
	return strings.TrimSpace(r.stdout), r.errWithStderr()
}

// leaky are the prefixes of variables of the developer's environment that
// would change what git, the hook managers, the lease store or the
// provisioner do; no test passes them on.
var leaky = []string{"GIT_", "LEASE_", "POOL_", "PG", "REDIS", "PRE_COMMIT", "LEFTHOOK", "HOOKTEST_", "XDG_", "MERGE_BATON_"}

// cleanEnv is this process's environment without the leaky variables and
// HOME, plus extra.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		drop := name == "HOME"
		for _, p := range leaky {
			drop = drop || strings.HasPrefix(name, p)
		}
		if !drop {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// isolatedEnv is an environment with its own HOME, git configuration,
// pre-commit cache, lease store and host registry, all under dir, plus
// extra.
func isolatedEnv(t *testing.T, dir string, extra ...string) []string {
	t.Helper()
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	registry := filepath.Join(dir, "host-registry")
	if err := os.MkdirAll(registry, 0o700); err != nil {
		t.Fatal(err)
	}
	gitconfig := filepath.Join(dir, "gitconfig")
	writeFile(t, gitconfig, "[user]\n\tname = Hook Test\n\temail = hooktest@example.invalid\n"+
		"[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n", 0o644)
	return cleanEnv(append([]string{
		"HOME=" + home,
		"GIT_CONFIG_GLOBAL=" + gitconfig,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"XDG_CACHE_HOME=" + filepath.Join(dir, "cache"),
		"PRE_COMMIT_HOME=" + filepath.Join(dir, "pre-commit"),
		"LEASE_STORE=" + filepath.Join(dir, "store"),
		"LEASE_HOST_REGISTRY=" + registry,
	}, extra...)...)
}

// result is how a program ended.
type result struct {
	cmd            string
	stdout, stderr string
	err            error
	took           time.Duration
}

func (r result) errWithStderr() error {
	if r.err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w\n%s", r.cmd, r.err, r.stderr)
}

// output is stdout and stderr (hook managers differ in which they use).
func (r result) output() string { return r.stdout + r.stderr }

// exitCode is the program's exit status (-1 when it did not exit).
func (r result) exitCode() int {
	var ee *exec.ExitError
	if errors.As(r.err, &ee) {
		return ee.ExitCode()
	}
	if r.err != nil {
		return -1
	}
	return 0
}

// programTimeout bounds every program a test starts.
const programTimeout = 90 * time.Second

// runIn runs a program in dir with env and stdin from /dev/null.
func runIn(t *testing.T, dir string, env []string, name string, args ...string) result {
	t.Helper()
	return runInput(t, dir, env, "", name, args...)
}

// runInput runs a program with the given text on stdin ("" for /dev/null).
func runInput(t *testing.T, dir string, env []string, stdin, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), programTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{cmd: name + " " + strings.Join(args, " "), stdout: out.String(), stderr: errb.String(), err: err, took: time.Since(start)}
	if ctx.Err() != nil {
		r.err = fmt.Errorf("timed out after %s: %w", programTimeout, err)
	}
	return r
}

// must runs a program that has to succeed and returns its stdout.
func must(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	r := runIn(t, dir, env, name, args...)
	if r.err != nil {
		t.Fatalf("%s (in %s): %v\nstdout:\n%s\nstderr:\n%s", r.cmd, dir, r.err, r.stdout, r.stderr)
	}
	return r.stdout
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// copyExample copies examples/hooks/NAME to dst.
func copyExample(t *testing.T, name, dst string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(hooksDir, name))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dst, string(data), mode)
}

// examplePool is the part of examples/hooks/pool.json the tests check
// grants against.
type examplePool struct {
	Name  string `json:"name"`
	Slots []struct {
		ID    int `json:"id"`
		Ports struct {
			API int `json:"api"`
			Web int `json:"web"`
		} `json:"ports"`
		DB      string `json:"db"`
		CacheDB int    `json:"cacheDb"`
	} `json:"slots"`
}

func loadExamplePool(t *testing.T) examplePool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(hooksDir, "pool.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p examplePool
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatalf("examples/hooks/pool.json: %v", err)
	}
	if len(p.Slots) < 2 {
		t.Fatalf("examples/hooks/pool.json has %d slots; two worktrees need two", len(p.Slots))
	}
	return p
}

// syncBuffer is a bytes.Buffer safe to write from a process while a test
// reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls cond every 20ms until it holds or the timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
