//go:build linux

package dirstore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// helperEnv selects the role of a re-executed test binary.
const helperEnv = "DURABLE_LEASE_TEST_HELPER"

// TestHelperProcess is not a test: it is the body of the child processes
// the tests below start by re-executing the test binary.
func TestHelperProcess(t *testing.T) {
	role := os.Getenv(helperEnv)
	if role == "" {
		t.Skip("helper process only")
	}
	var err error
	switch role {
	case "race":
		err = helperRace()
	case "hold-guard":
		err = helperHoldGuard()
	case "wait-bell":
		err = helperWaitOnBell()
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// helperRace waits for stdin to close (the start gun), then tries to
// acquire every round's kind once and prints the rounds it won.
func helperRace() error {
	dir, owner := os.Getenv("LEASE_TEST_DIR"), os.Getenv("LEASE_TEST_OWNER")
	rounds, err := strconv.Atoi(os.Getenv("LEASE_TEST_ROUNDS"))
	if err != nil {
		return err
	}
	s, err := Open(dir)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	for n := range rounds {
		kind := fmt.Sprintf("round-%d", n)
		_, err := s.Acquire(context.Background(), lease.Request{Kind: kind, Owner: owner, TTLMinutes: 60})
		switch {
		case err == nil:
			fmt.Fprintf(out, "won %d\n", n)
		case errors.Is(err, lease.ErrHeld):
		default:
			out.Flush()
			return fmt.Errorf("%s: %w", kind, err)
		}
	}
	return out.Flush()
}

// helperHoldGuard enters a kind's guard, says so and blocks until killed
// (or until its stdin closes).
func helperHoldGuard() error {
	s, err := Open(os.Getenv("LEASE_TEST_DIR"))
	if err != nil {
		return err
	}
	b := s.Backend().(*Backend)
	if err := os.MkdirAll(b.dir, 0o777); err != nil {
		panic(err)
	}
	if _, err := b.enterGuard(context.Background(), os.Getenv("LEASE_TEST_KIND")); err != nil {
		return err
	}
	fmt.Println("ready")
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}

func helperCommand(t *testing.T, role string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+role), env...)
	return cmd
}

// TestMultiProcessRace races many processes for each of many fresh kinds on
// one store: every round must have exactly one winner, named on disk.
func TestMultiProcessRace(t *testing.T) {
	const procs = 16
	rounds := 300
	if testing.Short() {
		rounds = 40
	}
	dir := filepath.Join(t.TempDir(), "store")

	type child struct {
		cmd    *exec.Cmd
		owner  string
		stdin  io.WriteCloser
		stdout *bufio.Reader
		rest   chan string // everything the child prints after "ready"
		stderr bytes.Buffer
	}
	children := make([]*child, procs)
	for i := range children {
		c := &child{owner: fmt.Sprintf("racer-%02d", i), rest: make(chan string, 1)}
		c.cmd = helperCommand(t, "race", "LEASE_TEST_DIR="+dir, "LEASE_TEST_OWNER="+c.owner, "LEASE_TEST_ROUNDS="+strconv.Itoa(rounds))
		c.cmd.Stderr = &c.stderr
		var err error
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		out, err := c.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		c.stdout = bufio.NewReader(out)
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.cmd.Process.Kill() })
		children[i] = c
	}
	// Every child has opened the store and is blocked on stdin: fire the
	// start gun for all at once, so they race round by round.
	for _, c := range children {
		if line, err := c.stdout.ReadString('\n'); line != "ready\n" {
			t.Fatalf("%s said %q, %v; stderr: %s", c.owner, line, err, c.stderr.String())
		}
		go func() {
			b, _ := io.ReadAll(c.stdout)
			c.rest <- string(b)
		}()
	}
	for _, c := range children {
		c.stdin.Close()
	}
	winners := make(map[int][]string)
	for _, c := range children {
		out := <-c.rest
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("%s: %v\nstderr: %s", c.owner, err, c.stderr.String())
		}
		for line := range strings.Lines(out) {
			var n int
			if _, err := fmt.Sscanf(line, "won %d", &n); err != nil {
				t.Fatalf("%s printed %q", c.owner, line)
			}
			winners[n] = append(winners[n], c.owner)
		}
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for n := range rounds {
		kind := fmt.Sprintf("round-%d", n)
		if len(winners[n]) != 1 {
			t.Errorf("%s: winners %v, want exactly one", kind, winners[n])
			continue
		}
		st, err := s.Status(context.Background(), kind)
		if err != nil || st.State != lease.Held || st.Record.Owner != winners[n][0] {
			t.Errorf("%s: record %+v (%v), want held by %s", kind, st.Record, err, winners[n][0])
		}
	}
	wins := map[string]int{}
	for _, w := range winners {
		for _, o := range w {
			wins[o]++
		}
	}
	t.Logf("%d processes, %d rounds; wins per process: %v", procs, rounds, wins)
	if ev := journalEvents(t, dir); len(ev) != 0 {
		t.Errorf("a race with no dead holders journaled %v", ev)
	}
	assertNoStrays(t, dir)
}

// TestKilledGuardHolder SIGKILLs a process inside a kind's critical section;
// the next acquire must recover the guard from the dead pid at once, not
// after the 60 s age bound.
func TestKilledGuardHolder(t *testing.T) {
	requireIdentity(t)
	tests := []struct {
		name        string
		waitFirst   bool // reap the child before acquiring; otherwise it is a zombie
		wantReasons []string
	}{
		{"holder reaped by its parent", true, []string{"no longer holds its guard's lock"}},
		{"holder killed, not yet reaped (zombie)", false, []string{"no longer holds its guard's lock"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			cmd := helperCommand(t, "hold-guard", "LEASE_TEST_DIR="+dir, "LEASE_TEST_KIND=slot-1")
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waited := false
			defer func() {
				if !waited {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
				}
			}()
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil || line != "ready\n" {
				t.Fatalf("child said %q, %v; stderr: %s", line, err, stderr.String())
			}
			pid := cmd.Process.Pid
			if h := readHolder(filepath.Join(dir, ".guard-slot-1")); h == nil || h.PID != pid {
				t.Fatalf("guard holder = %+v, want pid %d", h, pid)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if tt.waitFirst {
				_ = cmd.Wait()
				waited = true
			}

			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			acq, err := s.Acquire(context.Background(), lease.Request{Kind: "slot-1", Owner: "agent-7", TTLMinutes: 1})
			elapsed := time.Since(start)
			if err != nil || acq.Record.Owner != "agent-7" {
				t.Fatalf("Acquire after the holder was killed: %+v, %v", acq, err)
			}
			if elapsed > 2*time.Second {
				t.Errorf("recovering the dead holder's guard took %v", elapsed)
			}
			ev := eventsNamed(journalEvents(t, dir), lease.EventGuardReaped)
			if len(ev) != 1 || ev[0]["pid"] != float64(pid) || ev[0]["kind"] != "slot-1" {
				t.Fatalf("guard_reaped events = %v, want one naming pid %d", ev, pid)
			}
			reason, _ := ev[0]["reason"].(string)
			matched := false
			for _, r := range tt.wantReasons {
				matched = matched || strings.Contains(reason, r)
			}
			t.Logf("pid %d recovered in %v: %s", pid, elapsed, reason)
			if !matched {
				t.Errorf("reason %q, want one of %v", reason, tt.wantReasons)
			}
			assertNoStrays(t, dir)
		})
	}
}
