package pooltest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// observe is what a refused call must leave as it was: the live queue
// (with each entry's heartbeat), every slot's lease record, and the log.
func observe(t *testing.T, p *pooled) string {
	t.Helper()
	st := status(t, p.Pool)
	type slot struct {
		ID                  string
		State               lease.State
		Owner, Token        string
		Heartbeat, Acquired time.Time
		Fence               int64
	}
	view := struct {
		Queue []pool.QueuedEntry
		Slots []slot
		Log   []json.RawMessage
	}{Queue: st.Queue}
	for _, s := range st.Slots {
		v := slot{ID: s.Slot.ID, State: s.State}
		if r := s.Record; r != nil {
			v.Owner, v.Token, v.Heartbeat, v.Acquired, v.Fence = r.Owner, r.Token, r.Heartbeat, r.AcquiredAt, r.Fence
		}
		view.Slots = append(view.Slots, v)
	}
	lines, err := p.Log(bg)
	if err != nil {
		t.Fatalf("log: %v", err)
	}
	view.Log = lines
	out, err := json.Marshal(view)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// testOwners: every step that names a request checks that it is the
// caller's. Another owner, with the request id that status shows, can
// neither grant, heartbeat, withdraw nor wait for it, queued or granted,
// and nothing changes for the refusal; the owner asking for a request
// that has been granted is told it was granted, with its slot.
func testOwners(t *testing.T, h Harness) {
	s, _, p := h.newPool(t, 1)
	a, err := p.Enqueue(bg, "pt-alice", "", pool.ModeAsync)
	if err != nil {
		t.Fatal(err)
	}
	id := a.RequestID
	refusals := []struct {
		name string
		call func() error
	}{
		{"heartbeat-entry", func() error { _, err := p.HeartbeatEntry(bg, id, "pt-mallory"); return err }},
		{"try-grant", func() error { _, err := p.TryGrant(bg, id, "pt-mallory"); return err }},
		{"withdraw", func() error { return p.Withdraw(bg, id, "pt-mallory") }},
		{"waiter", func() error { _, err := p.Wait(bg, id, "pt-mallory", 200*time.Millisecond); return err }},
	}
	// keep is what alice does between the refusals to keep what she has:
	// her queue entry, then her slot, whose lease would lapse (a TTL of
	// a second or two on a server's clock) while the refusals run on a
	// loaded host.
	var keep func() error
	refused := func(stage, secret string) {
		t.Helper()
		for _, r := range refusals {
			// alice keeps her entry (or slot) live; then time passes, so
			// that a heartbeat by the refused call would show in the stamp.
			if err := keep(); err != nil && !errors.Is(err, pool.ErrGranted) {
				t.Fatalf("%s: alice's heartbeat: %v", stage, err)
			}
			before := observe(t, p)
			h.Pass(t, s, 20*time.Millisecond)
			err := r.call()
			if !errors.Is(err, lease.ErrNotOwner) {
				t.Errorf("%s: %s by another owner = %v, want ErrNotOwner", stage, r.name, err)
				continue
			}
			msg := err.Error()
			if !strings.Contains(msg, id) || !strings.Contains(msg, "belongs to another owner") || !strings.Contains(msg, `"pt-alice"`) {
				t.Errorf("%s: %s refused with %q: want the request, and that it belongs to another owner (pt-alice)", stage, r.name, msg)
			}
			if secret != "" && strings.Contains(msg, secret) {
				t.Errorf("%s: %s refused with %q: it shows the grant's token", stage, r.name, msg)
			}
			if after := observe(t, p); after != before {
				t.Errorf("%s: a refused %s changed the pool:\nbefore %s\nafter  %s", stage, r.name, before, after)
			}
		}
	}

	keep = func() error { _, err := p.HeartbeatEntry(bg, id, "pt-alice"); return err }
	refused("queued", "")
	// Its place in the queue is no secret: claim tells it to anyone.
	if c, err := p.Claim(bg, id, "pt-mallory"); err != nil || c.Queued == nil || c.Queued.Position.Position != 1 {
		t.Errorf("claim of a queued request by another owner = %+v, %v; want its position, 1", c, err)
	}

	g, err := p.TryGrant(bg, id, "pt-alice")
	if err != nil {
		t.Fatalf("alice's try-grant: %v", err)
	}
	if g.Owner != "pt-alice" {
		t.Fatalf("granted to %s", g.Owner)
	}
	granted := func(what string, err error) {
		t.Helper()
		var ge *pool.GrantedError
		if !errors.As(err, &ge) || !errors.Is(err, pool.ErrGranted) || !errors.Is(err, pool.ErrQueueEntryLost) {
			t.Errorf("%s of a granted request = %v, want a GrantedError", what, err)
			return
		}
		if ge.RequestID != id || ge.State != pool.GrantReady || string(ge.Slot) != `"s1"` {
			t.Errorf("%s of a granted request = %+v, want request %s, ready, slot s1", what, ge, id)
		}
		if msg := err.Error(); strings.Contains(msg, "dropped") || !strings.Contains(msg, "granted slot s1") {
			t.Errorf("%s of a granted request says %q", what, msg)
		}
	}
	_, err = p.HeartbeatEntry(bg, id, "pt-alice")
	granted("heartbeat-entry", err)
	_, err = p.TryGrant(bg, id, "pt-alice")
	granted("try-grant", err)

	refusals = append(refusals, struct {
		name string
		call func() error
	}{"claim", func() error { _, err := p.Claim(bg, id, "pt-mallory"); return err }})
	keep = func() error { _, _, err := p.Heartbeat(bg, "s1", "pt-alice", g.Token); return err }
	refused("granted", g.Token)

	if c, err := p.Claim(bg, id, "pt-alice"); err != nil || c.Grant == nil {
		t.Errorf("alice's claim after the refusals = %+v, %v; want her grant", c, err)
	}
	release(t, p.Pool, g)
}
