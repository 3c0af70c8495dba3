package clitest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// cliCommand runs this test binary as the CLI name (testscript.Main
// dispatches on the program name), in dir with store as LEASE_STORE.
func cliCommand(t *testing.T, dir, store, name string, args ...string) *exec.Cmd {
	t.Helper()
	bin := filepath.Join(dir, "bin", name)
	if _, err := os.Stat(bin); err != nil {
		if err := os.MkdirAll(filepath.Dir(bin), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(os.Args[0], bin); err != nil {
			t.Fatal(err)
		}
	}
	c := exec.Command(bin, args...)
	c.Dir = dir
	c.Env = append(os.Environ(), "LEASE_STORE="+store, "LEASE_OWNER_PATTERN=", "LEASE_POOL_FILE=", "LEASE_OWNER=")
	return c
}

// TestSIGHUPInterruptsWaiters: closing the terminal of a blocking waiter
// (SIGHUP) ends it like SIGINT and SIGTERM: exit 1, code interrupted, and
// its queue entry is gone, so no one waits behind a dead entry.
func TestSIGHUPInterruptsWaiters(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			store := filepath.Join(dir, "store")
			if err := os.WriteFile(filepath.Join(dir, "pool.json"), []byte(`{"slots":[{"id":1}]}`), 0o666); err != nil {
				t.Fatal(err)
			}
			if out, err := cliCommand(t, dir, store, "pool", "--pool", "pool.json", "acquire", "--owner", "holder").CombinedOutput(); err != nil {
				t.Fatalf("holder: %v\n%s", err, out)
			}
			if out, err := cliCommand(t, dir, store, "lease", "acquire", "--kind", "baton", "--owner", "holder", "--ttl", "5").CombinedOutput(); err != nil {
				t.Fatalf("baton holder: %v\n%s", err, out)
			}
			for _, waiter := range [][]string{
				{"pool", "--pool", "pool.json", "acquire", "--owner", "waiter"},
				{"lease", "acquire", "--kind", "baton", "--owner", "waiter", "--ttl", "1", "--wait-ms", "60000"},
			} {
				c := cliCommand(t, dir, store, waiter[0], waiter[1:]...)
				var stdout bytes.Buffer
				c.Stdout = &stdout
				stderr, err := c.StderrPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Start(); err != nil {
					t.Fatal(err)
				}
				sc := bufio.NewScanner(stderr)
				for sc.Scan() && !strings.Contains(sc.Text(), "queue position") && !strings.Contains(sc.Text(), "waiting") {
				}
				_ = c.Process.Signal(sig)
				for sc.Scan() {
				}
				err = c.Wait()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 1 {
					t.Fatalf("%s waiter after %v: %v, want exit 1", waiter[0], sig, err)
				}
				var out struct{ Code, Error string }
				if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || out.Code != "interrupted" || !strings.Contains(out.Error, "signal") {
					t.Errorf("%s waiter printed %q, want code interrupted saying it was a signal", waiter[0], stdout.String())
				}
			}
			status, err := cliCommand(t, dir, store, "pool", "--pool", "pool.json", "status").Output()
			if err != nil {
				t.Fatal(err)
			}
			var st struct{ Queue []any }
			if err := json.Unmarshal(status, &st); err != nil || len(st.Queue) != 0 {
				t.Errorf("queue after the interrupted waiter: %s", status)
			}
		})
	}
}
