package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// A previous holder's work that cannot be ended keeps the lease where it
// is: the takeover is refused with ErrWorkRunning and nothing changes; a
// work made anew every time it is ended (nobody without the lease
// should) gives up after a few ends.
func TestWorkThatCannotBeEndedRefusesTheChange(t *testing.T) {
	t.Parallel()
	w := &lease.Work{Cgroup: "/pool-run-k-1", ID: 7, Boot: "b"}
	for _, tt := range []struct {
		name string
		end  func(*lease.Work) error
		want string
	}{
		{"cannot end", func(*lease.Work) error { return errors.New("its cgroup belongs to uid 1000") }, "uid 1000"},
		{"made anew", func(*lease.Work) error { return nil }, "populated again"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, clk := newTestStore(t)
			acq, err := s.Acquire(context.Background(), lease.Request{Kind: "k", Owner: "holder", TTLMinutes: 1, Work: w})
			if err != nil {
				t.Fatal(err)
			}
			ends := 0
			s.SetWorkEnderForTest(func(got *lease.Work) bool { return *got == *w },
				func(*lease.Work) error { ends++; return tt.end(w) })
			clk.Advance(2 * time.Minute)
			_, err = s.Acquire(context.Background(), lease.Request{Kind: "k", Owner: "next", TTLMinutes: 1})
			if !errors.Is(err, lease.ErrWorkRunning) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("takeover = %v; want ErrWorkRunning saying %q", err, tt.want)
			}
			st, _ := s.Status(context.Background(), "k")
			if st.Record == nil || st.Record.Token != acq.Record.Token {
				t.Errorf("the refused takeover changed the record: %+v", st.Record)
			}
			if ends == 0 {
				t.Error("the work was never asked to end")
			}
			if _, err := s.ForceRelease(context.Background(), "k", "op"); !errors.Is(err, lease.ErrWorkRunning) {
				t.Errorf("a forced release = %v; want ErrWorkRunning too", err)
			}
		})
	}
}
