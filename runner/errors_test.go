package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/gates"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// queueLog is a QueueReporter that remembers what it was told.
type queueLog struct {
	mu     sync.Mutex
	events []string
}

func (q *queueLog) Show(p pool.Position) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.events = append(q.events, "show "+string(rune('0'+p.Position)))
}

func (q *queueLog) Done() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.events = append(q.events, "done")
}

func (q *queueLog) list() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.events)
}

// heldPool opens a pool of one slot on s and holds that slot.
func heldPool(t *testing.T, s *lease.Store, spec string) *pool.Pool {
	t.Helper()
	file := filepath.Join(t.TempDir(), "pool.json")
	if err := os.WriteFile(file, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := pool.LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.Open(s, cfg, pool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Acquire(context.Background(), pool.AcquireRequest{Owner: "holder", NoWait: true}); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNotAcquiredIsTyped: a run that gets no slot (at once, or within its
// wait bound) runs nothing and says why in the pool's own error, behind
// an *AcquireError; the queue reporter is told the place and the end of
// the wait.
func TestNotAcquiredIsTyped(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		noWait bool
		wait   time.Duration
		want   error
		events []string
	}{
		{"no wait", true, 0, pool.ErrSaturated, []string{"done"}},
		{"wait bound", false, 200 * time.Millisecond, pool.ErrTimeout, []string{"show 1", "done"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testStore(t)
			var out lockedBuffer
			o := baton(t, s, &out, nil)
			q := &queueLog{}
			o.Kind, o.Pool, o.NoWait, o.Wait, o.Queue = "", heldPool(t, s, `{"name":"p","slots":[{"id":1}]}`), tt.noWait, tt.wait, q
			ran := filepath.Join(o.Dir, "ran")
			r := Command(context.Background(), o, []string{"sh", "-c", "echo ran > " + ran})
			var ae *AcquireError
			if r.Exit != ExitRefused || r.Code != CodeNotAcquired || !errors.As(r.Err, &ae) ||
				!errors.Is(r.Err, ErrNotAcquired) || !errors.Is(r.Err, tt.want) || r.Held.Kind != "" {
				t.Errorf("result %+v, want exit 1, not_acquired, an *AcquireError matching %v", r, tt.want)
			}
			if ae != nil && ae.Error() != ae.Err.Error() {
				t.Errorf("AcquireError reads %q, want the pool's own %q", ae.Error(), ae.Err.Error())
			}
			if _, err := os.Stat(ran); err == nil {
				t.Errorf("the command ran without a slot")
			}
			if got := q.list(); !slices.Equal(got, tt.events) {
				t.Errorf("queue reporter told %v, want %v", got, tt.events)
			}
		})
	}
}

// TestBatonHeldIsTyped: a baton somebody else holds is a *lease.HeldError
// behind the AcquireError.
func TestBatonHeldIsTyped(t *testing.T) {
	t.Parallel()
	s := testStore(t)
	if _, err := s.Acquire(context.Background(), lease.Request{Kind: "b", Owner: "other", TTLMinutes: 1}); err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	o := baton(t, s, &out, nil)
	o.NoWait = true
	r := Command(context.Background(), o, []string{"true"})
	var held *lease.HeldError
	if r.Code != CodeNotAcquired || !errors.As(r.Err, &held) || held.Record.Owner != "other" {
		t.Errorf("result %+v, want not_acquired with a *lease.HeldError naming other", r)
	}
}

// TestErrorsMatchTheirCode: each way a run ends that is not the work's
// own status has an Err that matches the sentinel its Code documents.
func TestErrorsMatchTheirCode(t *testing.T) {
	t.Parallel()
	s := testStore(t)
	var out lockedBuffer
	gate := func(yaml string) *gates.Gate {
		g, err := gates.Parse([]byte(yaml), filepath.Join(t.TempDir(), "g.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	o := baton(t, s, &out, nil)
	tests := []struct {
		name string
		run  func() *Result
		code string
		exit int
		want error
	}{
		{"usage", func() *Result {
			bad := o
			bad.Owner, bad.Store = "o", nil
			return Command(context.Background(), bad, []string{"true"})
		}, CodeUsage, ExitUsage, ErrInvalid},
		{"not found", func() *Result { return Command(context.Background(), o, []string{"no-such-program-here"}) }, CodeNotFound, ExitNotFound, ErrStart},
		{"not executable", func() *Result { return Command(context.Background(), o, []string{"/etc/hostname"}) }, CodeNotExecutable, ExitNotExecutable, ErrStart},
		{"phase timeout", func() *Result {
			return Gate(context.Background(), o, gate("kind: b\nphases:\n  - name: slow\n    run: sleep 30\n    timeout: 100ms\n"))
		}, CodeTimeout, ExitTimeout, ErrPhaseTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.run()
			if r.Code != tt.code || r.Exit != tt.exit || !errors.Is(r.Err, tt.want) {
				t.Errorf("result %+v, want %s (exit %d) matching %v", r, tt.code, tt.exit, tt.want)
			}
		})
	}
}
