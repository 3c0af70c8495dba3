package dirstore

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/procfs"
	"github.com/durable-lease/durable-lease/lease"
)

// helperWaitOnBell waits for LEASE_TEST_KIND with a poll of an hour, so
// that only a wake-up can end its wait, and prints the token it got.
func helperWaitOnBell() error {
	s, err := Open(os.Getenv("LEASE_TEST_DIR"), lease.WithPollInterval(time.Hour))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	acq, err := s.AcquireWait(ctx, lease.Request{Kind: os.Getenv("LEASE_TEST_KIND"), Owner: "waiter", TTLMinutes: 10})
	if err != nil {
		return err
	}
	_, err = os.Stdout.WriteString("acquired " + acq.Record.Token + "\n")
	return err
}

// openFiles lists what process pid has open, by the targets of its
// /proc/<pid>/fd links.
func openFiles(t *testing.T, pid int) []string {
	t.Helper()
	files, err := procfs.OpenFiles(pid)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// startBellWaiter starts a waiter process on kind and waits until it is
// the head of the line, watching: it has kind's bell open.
func startBellWaiter(t *testing.T, dir, kind string) (pid int, files []string, line <-chan string) {
	t.Helper()
	cmd := helperCommand(t, "wait-bell", "LEASE_TEST_DIR="+dir, "LEASE_TEST_KIND="+kind)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ch := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		ch <- s
	}()
	bell := filepath.Join(dir, bellFileName(kind))
	deadline := time.Now().Add(30 * time.Second)
	for {
		files = openFiles(t, cmd.Process.Pid)
		for _, f := range files {
			if f == bell {
				return cmd.Process.Pid, files, ch
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiter never opened its bell %s; it has open: %q", bell, files)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func hasInotify(files []string) bool {
	for _, f := range files {
		if f == "anon_inode:inotify" {
			return true
		}
	}
	return false
}

// TestReleaseRingsTheHeadsBell: the head of a lease's line whose holder is
// of this implementation waits on the kind's bell, with no inotify
// instance (whose teardown would delay its exit), and a release rings it.
// Its poll is an hour, so nothing else could end its wait.
func TestReleaseRingsTheHeadsBell(t *testing.T) {
	s, _ := realStore(t)
	ctx := context.Background()
	rec := mustAcquire(t, s, "k", "holder", 10)
	_, files, line := startBellWaiter(t, s.Dir(), "k")
	if hasInotify(files) {
		t.Errorf("the head watches with inotify a lease held by this implementation: %q", files)
	}
	if _, err := s.Release(ctx, lease.Ref{Kind: "k", Owner: rec.Owner, Token: rec.Token}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-line:
		if !strings.HasPrefix(got, "acquired ") {
			t.Fatalf("waiter printed %q", got)
		}
	case <-time.After(time.Minute):
		t.Fatal("the release did not wake the head (its poll is an hour)")
	}
}

// TestForeignRecordIsWatchedWithInotify: a record without this
// implementation's boot stamp (the Node tool's) may be removed by a tool
// that rings no bell, so the head also watches the directory, and a plain
// removal wakes it.
func TestForeignRecordIsWatchedWithInotify(t *testing.T) {
	s, _ := realStore(t)
	path := filepath.Join(s.Dir(), "k.json")
	now := time.Now()
	if err := os.MkdirAll(s.Dir(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(recordJSON("k", "node", "tok", now, 10)), 0o600); err != nil {
		t.Fatal(err)
	}
	pid, files, line := startBellWaiter(t, s.Dir(), "k")
	// The watch is made after the bell is open: wait for it.
	for deadline := time.Now().Add(30 * time.Second); !hasInotify(files); files = openFiles(t, pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the head does not watch a foreign record with inotify: %q", files)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-line:
		if !strings.HasPrefix(got, "acquired ") {
			t.Fatalf("waiter printed %q", got)
		}
	case <-time.After(time.Minute):
		t.Fatal("the removal did not wake the head (its poll is an hour)")
	}
}

// TestHostileBellIsNeverWritten: a regular file or a symlink where the
// bell belongs is neither written to by a release nor followed; the head
// then waits with inotify.
func TestHostileBellIsNeverWritten(t *testing.T) {
	for _, what := range []string{"file", "symlink"} {
		t.Run(what, func(t *testing.T) {
			s, _ := realStore(t)
			ctx := context.Background()
			rec := mustAcquire(t, s, "k", "holder", 10)
			bell := filepath.Join(s.Dir(), bellFileName("k"))
			target := filepath.Join(t.TempDir(), "outside")
			if err := os.WriteFile(target, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			switch what {
			case "file":
				if err := os.WriteFile(bell, nil, 0o600); err != nil {
					t.Fatal(err)
				}
				target = bell
			case "symlink":
				if err := os.Symlink(target, bell); err != nil {
					t.Fatal(err)
				}
			}
			done := make(chan error, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				_, err := s.AcquireWait(wctx, lease.Request{Kind: "k", Owner: "w", TTLMinutes: 10})
				done <- err
			}()
			time.Sleep(50 * time.Millisecond)
			if _, err := s.Release(ctx, lease.Ref{Kind: "k", Owner: rec.Owner, Token: rec.Token}); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("waiter: %v", err)
			}
			if fi, err := os.Stat(target); err != nil || fi.Size() != 0 {
				t.Fatalf("the %s behind the bell was written: %v, %v", what, fi, err)
			}
			if fi, err := os.Lstat(bell); err != nil || fi.Mode()&os.ModeNamedPipe != 0 {
				t.Fatalf("the %s was replaced: %v, %v", what, fi, err)
			}
			if _, err := os.Lstat(bell); errors.Is(err, os.ErrNotExist) {
				t.Fatal("the bell's name was removed")
			}
		})
	}
}
