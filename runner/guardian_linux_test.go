package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// TestGuardianDeathEndsTheWork: when the guardian dies (SIGKILL), the
// work's process group is killed before the run returns, the run ends as
// internal (exit 3), and the lease is still given back.
func TestGuardianDeathEndsTheWork(t *testing.T) {
	t.Parallel()
	for _, containment := range containments(t) {
		t.Run(containment, func(t *testing.T) {
			t.Parallel()
			s := testStore(t)
			var out lockedBuffer
			o := baton(t, s, &out, nil)
			o.Containment = containment
			done := make(chan *Result, 1)
			go func() {
				done <- Command(context.Background(), o, []string{"sh", "-c", "trap '' TERM; sleep 60 & echo $$ $! > pids; wait"})
			}()
			var work, child int
			pids := filepath.Join(o.Dir, "pids")
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				if b, err := os.ReadFile(pids); err == nil && bytes.HasSuffix(b, []byte("\n")) {
					if _, err := fmt.Sscan(string(b), &work, &child); err != nil {
						t.Fatal(err)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the work never started")
				}
			}
			p, ok := readStat(work)
			if !ok {
				t.Fatal("the work is gone already")
			}
			// The guardian tells pool-run the work's pid just after the fork,
			// which the work's first line may beat; pool-run cannot reach a work
			// it was never told of.
			time.Sleep(200 * time.Millisecond)
			if err := syscall.Kill(p.ppid, syscall.SIGKILL); err != nil { // the guardian
				t.Fatal(err)
			}
			var r *Result
			select {
			case r = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the run did not end when its guardian died")
			}
			if r.Exit != ExitInternal || r.Code != CodeInternal || !strings.Contains(r.Err.Error(), "was killed") {
				t.Errorf("result %+v, want internal (exit 3), the work's group killed", r)
			}
			for _, pid := range []int{work, child} {
				if st := processState(pid); st != 0 && st != 'Z' {
					t.Errorf("process %d of the work is still running (state %c) after the run", pid, st)
				}
			}
			freeAfter(t, s, "b")
		})
	}
}

// TestRefusedRunLeavesNoGuardian: the guardian starts while the lease is
// acquired; when the acquisition is refused, it is let go and exits, and
// this process reaps it: no guardian waits on for a start that will not
// come (as one did while this end's reader, blocked in recvmsg, kept the
// socket open after its close). Not parallel: it looks at every child of
// this process.
func TestRefusedRunLeavesNoGuardian(t *testing.T) {
	s := testStore(t)
	if _, err := s.Acquire(context.Background(), lease.Request{Kind: "b", Owner: "other", TTLMinutes: 1}); err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	o := baton(t, s, &out, nil)
	// A wait that ends refused: by then the guardian waits for its start,
	// and this process reads its socket.
	o.Wait = 200 * time.Millisecond
	if r := Command(context.Background(), o, []string{"true"}); r.Code != CodeNotAcquired {
		t.Fatalf("result %+v, want not_acquired", r)
	}
	guardians := func() (pids []int) {
		for _, pid := range childrenOf(os.Getpid()) {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && bytes.HasPrefix(b, []byte("pool-run (guardian)")) {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	for deadline := time.Now().Add(10 * time.Second); len(guardians()) > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("guardians %v of a refused run are still there", guardians())
		}
	}
}
