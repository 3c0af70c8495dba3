package lease_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/durable-lease/durable-lease/lease"
)

// A release's refusals say which check failed, as the Node tool's codes
// do: another owner (or no owner to compare, an unreadable record) is
// ErrNotOwner; the owner with another token is ErrTokenMismatch, which
// still matches ErrNotOwner for callers that only ask "is it mine?".
func TestReleaseRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		owner, token func(r *lease.Record) string
		corrupt      bool
		mismatch     bool
	}{
		{name: "owner, wrong token", owner: func(r *lease.Record) string { return r.Owner }, token: func(*lease.Record) string { return "nope" }, mismatch: true},
		{name: "owner, empty token", owner: func(r *lease.Record) string { return r.Owner }, token: func(*lease.Record) string { return "" }, mismatch: true},
		{name: "other owner, right token", owner: func(*lease.Record) string { return "agent-8" }, token: func(r *lease.Record) string { return r.Token }},
		{name: "other owner, wrong token", owner: func(*lease.Record) string { return "agent-8" }, token: func(*lease.Record) string { return "nope" }},
		{name: "unreadable record", owner: func(*lease.Record) string { return "agent-7" }, token: func(*lease.Record) string { return "nope" }, corrupt: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestStore(t)
			r := mustAcquire(t, s, "slot-1", "agent-7", 1)
			if tt.corrupt {
				if err := os.WriteFile(filepath.Join(s.Dir(), "slot-1.json"), []byte("{"), 0o666); err != nil {
					t.Fatal(err)
				}
			}
			rel, err := s.Release(bg, lease.Ref{Kind: "slot-1", Owner: tt.owner(r), Token: tt.token(r)})
			if rel != nil || !errors.Is(err, lease.ErrNotOwner) {
				t.Fatalf("Release = %+v, %v; want a refusal matching ErrNotOwner", rel, err)
			}
			if got := errors.Is(err, lease.ErrTokenMismatch); got != tt.mismatch {
				t.Errorf("errors.Is(%v, ErrTokenMismatch) = %v, want %v", err, got, tt.mismatch)
			}
			if st, _ := s.Status(context.Background(), "slot-1"); st.State == lease.Free {
				t.Error("a refused release removed the record")
			}
		})
	}
}

// A heartbeat with a wrong token is not a token mismatch: it stays
// ErrNotOwner alone, as the Node tool answers not_owner.
func TestHeartbeatWrongTokenIsNotOwner(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	r := mustAcquire(t, s, "slot-1", "agent-7", 1)
	_, err := s.Heartbeat(bg, lease.Ref{Kind: "slot-1", Owner: r.Owner, Token: "nope"})
	if !errors.Is(err, lease.ErrNotOwner) || errors.Is(err, lease.ErrTokenMismatch) {
		t.Errorf("Heartbeat with a wrong token = %v, want ErrNotOwner only", err)
	}
}
