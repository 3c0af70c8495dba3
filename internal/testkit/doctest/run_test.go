package doctest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/procgroup"
)

// docTimeout bounds one document's blocks: the slowest waits a few
// seconds (a bounded wait, a release in a second, a pool's provisioning).
const docTimeout = 2 * time.Minute

// session is what every document's bash session shares: the checkout it
// copies, the directory the commands are installed in, and the Go
// settings that let the documents' own install line reuse that build.
type session struct {
	root string   // the checkout: the directory holding go.mod
	bin  string   // GOBIN, first on PATH
	goen []string // GOCACHE, GOMODCACHE, GOPATH of the caller
}

// moduleRoot is the directory of go.mod above the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// goTool is the go command: the one named by GOROOT, as go test sets it,
// else the one on PATH.
func goTool() string {
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// newSession finds the caller's Go caches and, unless bin is "", installs
// the commands from the checkout into bin as the README does.
func newSession(t *testing.T, bin string) *session {
	t.Helper()
	s := &session{root: moduleRoot(t), bin: bin}
	out, err := exec.Command(goTool(), "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	vals := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i, name := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		if i < len(vals) && vals[i] != "" {
			s.goen = append(s.goen, name+"="+vals[i])
		}
	}
	if bin == "" {
		s.bin = t.TempDir()
		return s
	}
	cmd := exec.Command(goTool(), "install", "./cmd/...")
	cmd.Dir = s.root
	cmd.Env = append(os.Environ(), s.goSettings()...)
	cmd.Env = append(cmd.Env, "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go install ./cmd/...: %v\n%s", err, out)
	}
	return s
}

// goSettings make an install in a copy of the checkout find the build of
// the checkout itself up to date: paths trimmed and no VCS stamp, so
// where the sources are does not change what is built; nothing fetched.
func (s *session) goSettings() []string {
	return append([]string{"GOBIN=" + s.bin, "GOFLAGS=-trimpath -buildvcs=false", "GOPROXY=off"}, s.goen...)
}

// dropped are the variables of the caller's environment a reader's fresh
// shell would not have, or that would point the blocks at the caller's
// stores, servers or repository.
var dropped = []string{"LEASE_", "POOL_", "DURABLE_LEASE_", "PG", "REDIS_", "GIT_", "XDG_", "GOBIN=", "GOFLAGS=", "CGO_ENABLED="}

// environ is a document's environment: the caller's without dropped, a
// HOME, a TMPDIR (none when tmp is "": the README promises its blocks
// need none) and a host registry of its own, the commands first on PATH,
// and servers that cannot be reached, so that the examples' provisioners
// never touch a PostgreSQL or Redis of the caller's.
func (s *session) environ(home, tmp, registry string) []string {
	var env []string
	for _, kv := range os.Environ() {
		keep := true
		for _, p := range dropped {
			if strings.HasPrefix(kv, p) {
				keep = false
			}
		}
		if keep && !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "TMPDIR=") {
			env = append(env, kv)
		}
	}
	if tmp != "" {
		env = append(env, "TMPDIR="+tmp)
	}
	env = append(env, "HOME="+home, "PATH="+s.bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		// The pools the blocks use are claimed in a registry of the
		// document's, not in the host's (/tmp).
		"LEASE_HOST_REGISTRY="+registry,
		"PGHOST=/nonexistent", "PGCONNECT_TIMEOUT=1", "REDIS_HOST=127.0.0.1", "REDIS_PORT=1",
		"POOL_WAITER_TIMEOUT_MS=120000")
	return append(env, s.goSettings()...)
}

// copyCheckout copies the checkout's files (what git tracks, and what it
// would add; or, without git, every file but .git and the build and store
// directories) into dst.
func copyCheckout(root, dst string) error {
	var files []string
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err == nil {
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" {
				files = append(files, f)
			}
		}
	} else {
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if d.IsDir() {
				switch rel {
				case ".git", "logs", "bin", filepath.Join("examples", "pool", "work"):
					return filepath.SkipDir
				}
				return nil
			}
			files = append(files, rel)
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, f := range files {
		src, target := filepath.Join(root, f), filepath.Join(dst, f)
		info, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			link, err := os.Readlink(src)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(target, data, info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

// blockError is a block that failed: where it is, what it says, and what
// it printed.
type blockError struct {
	doc    string
	block  Block
	reason string
	output string
}

func (e *blockError) Error() string {
	return fmt.Sprintf("%s:%d: the block %s\n--- block ---\n%s--- its output ---\n%s", e.doc, e.block.Line, e.reason, e.block.Text, e.output)
}

// blockMarker separates the blocks' output in the session's log.
const blockMarker = "\x1f doctest block "

// runDoc runs the blocks of the document named name (text doc) in a fresh
// copy of the checkout, in one bash session, in order. etcd, when a block
// needs it, starts a cluster and returns its client address.
func (s *session) runDoc(t *testing.T, name, doc string, etcd func() string) error {
	t.Helper()
	blocks, err := Blocks(doc)
	if err != nil {
		return fmt.Errorf("%s:%w", name, err)
	}
	var script strings.Builder
	script.WriteString("set -eo pipefail\n")
	var run []Block
	for _, b := range blocks {
		if b.Mark.Kind == "file" {
			want, err := os.ReadFile(filepath.Join(s.root, b.Mark.Arg))
			if err != nil {
				return fmt.Errorf("%s:%d: doctest file: %w", name, b.Line, err)
			}
			if b.Text != string(want) {
				return fmt.Errorf("%s:%d: the block is not %s as it is in the checkout; paste the file again", name, b.Line, b.Mark.Arg)
			}
		}
		if !b.Runs() {
			continue
		}
		text := b.Text
		if b.Mark.Kind == "etcd" {
			text = strings.ReplaceAll(text, b.Mark.Arg, etcd())
		}
		fmt.Fprintf(&script, "printf '%%s\\n' %d >&3\nprintf '\\n%s%d\\n' >&2\n%s", len(run), blockMarker, len(run), text)
		run = append(run, b)
	}
	script.WriteString("printf 'end\\n' >&3\n")
	if len(run) == 0 {
		return nil
	}

	tmp := t.TempDir()
	dir, home, tmpdir, registry := filepath.Join(tmp, "clone"), filepath.Join(tmp, "home"), filepath.Join(tmp, "tmp"), filepath.Join(tmp, "host-registry")
	for _, d := range []string{home, tmpdir, registry} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := copyCheckout(s.root, dir); err != nil {
		return fmt.Errorf("copying the checkout: %w", err)
	}
	scriptFile, marksFile, logFile := filepath.Join(tmp, "blocks.bash"), filepath.Join(tmp, "marks"), filepath.Join(tmp, "log")
	if err := os.WriteFile(scriptFile, []byte(script.String()), 0o600); err != nil {
		return err
	}
	// Files, not pipes: a detached process a block leaves (a pool
	// request's waiter) must not keep the test waiting for an end of file.
	marks, err := os.Create(marksFile)
	if err != nil {
		return err
	}
	defer marks.Close()
	log, err := os.Create(logFile)
	if err != nil {
		return err
	}
	defer log.Close()

	ctx, cancel := context.WithTimeout(context.Background(), docTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", scriptFile)
	if name == "README.md" {
		tmpdir = "" // as on a fresh machine: the blocks use mktemp, which needs no TMPDIR
	}
	cmd.Dir, cmd.Env = dir, s.environ(home, tmpdir, registry)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, log, log
	cmd.ExtraFiles = []*os.File{marks}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return procgroup.New(cmd.Process.Pid).Signal(syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()
	if cmd.Process != nil {
		_ = procgroup.New(cmd.Process.Pid).Signal(syscall.SIGKILL) // what the blocks left in their group
	}

	gotMarks, _ := os.ReadFile(marksFile)
	gotLog, _ := os.ReadFile(logFile)
	lines := strings.Fields(string(gotMarks))
	if runErr == nil && len(lines) > 0 && lines[len(lines)-1] == "end" {
		return s.checkNothingHeld(name, dir, home, cmd.Env)
	}
	failed := 0
	if len(lines) > 0 {
		fmt.Sscan(lines[len(lines)-1], &failed)
	}
	output := string(gotLog)
	if i := strings.LastIndex(output, fmt.Sprintf("%s%d\n", blockMarker, failed)); i >= 0 {
		output = output[i+len(fmt.Sprintf("%s%d\n", blockMarker, failed)):]
	}
	reason := fmt.Sprintf("failed (%v)", runErr)
	if ctx.Err() != nil {
		reason = fmt.Sprintf("did not finish within %s", docTimeout)
	}
	return &blockError{doc: name, block: run[failed], reason: reason, output: output}
}

// checkNothingHeld fails a document whose blocks left a lease held in the
// stores they used: the copy's default store and the examples' store
// under HOME.
func (s *session) checkNothingHeld(name, dir, home string, env []string) error {
	for _, store := range []string{filepath.Join(dir, "logs", "leases"), filepath.Join(home, ".local", "state", "durable-lease", "leases")} {
		if _, err := os.Stat(store); err != nil {
			continue
		}
		cmd := exec.Command(filepath.Join(s.bin, "lease"), "--store", store, "list")
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("%s: lease --store %s list: %v\n%s", name, store, err, out)
		}
		var list struct {
			Leases []struct {
				Kind  string `json:"kind"`
				Owner string `json:"holder"`
				State string `json:"state"`
			} `json:"leases"`
		}
		if err := json.Unmarshal(bytes.TrimSpace(out), &list); err != nil {
			return fmt.Errorf("%s: lease list: %v: %s", name, err, out)
		}
		for _, l := range list.Leases {
			if l.State == "held" {
				return fmt.Errorf("%s: the blocks left %s held by %s in %s: every example must give back what it takes", name, l.Kind, l.Owner, store)
			}
		}
	}
	return nil
}
