package lease_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/lease"
)

var bg = context.Background()

func TestAcquire(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	acq, err := s.Acquire(bg, lease.Request{Kind: "slot-1", Owner: "agent-7", TTLMinutes: 15, Payload: json.RawMessage(` { "pr" : 123 } `)})
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	r := acq.Record
	if acq.TookOverExpired || acq.Previous != nil {
		t.Errorf("fresh acquire reported a takeover: %+v", acq)
	}
	if r.V != 1 || r.Kind != "slot-1" || r.Owner != "agent-7" || r.TTLMinutes != 15 || string(r.Payload) != `{"pr":123}` {
		t.Errorf("record = %+v", r)
	}
	if !r.Heartbeat.Equal(t0) || !r.AcquiredAt.Equal(t0) {
		t.Errorf("heartbeat, acquiredAt = %v, %v; want the clock's %v", r.Heartbeat, r.AcquiredAt, t0)
	}
	if !hexToken.MatchString(r.Token) {
		t.Errorf("token %q is not 32 lowercase hex digits", r.Token)
	}
	onDisk := lease.DecodeRecord("slot-1", readBytes(t, filepath.Join(s.Dir(), "slot-1.json")))
	if onDisk.Corrupt || onDisk.Token != r.Token || onDisk.Owner != r.Owner || !onDisk.Heartbeat.Equal(r.Heartbeat) {
		t.Errorf("record on disk %+v does not match the acquisition %+v", onDisk, r)
	}
	st, err := s.Status(context.Background(), "slot-1")
	if err != nil || st.State != lease.Held || st.Remaining != 15*time.Minute {
		t.Errorf("Status = %+v, %v; want held with 15m remaining", st, err)
	}
}

func TestAcquireTokensDiffer(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	seen := map[string]bool{}
	for range 20 {
		r := mustAcquire(t, s, "slot-1", "agent-7", 1)
		if !hexToken.MatchString(r.Token) || seen[r.Token] {
			t.Fatalf("token %q is malformed or repeated", r.Token)
		}
		seen[r.Token] = true
		if _, err := s.Release(bg, lease.Ref{Kind: "slot-1", Owner: "agent-7", Token: r.Token}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAcquireRefusesLiveLease(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		owner string
	}{
		{"another owner", "agent-8"},
		{"the same owner: a second acquire is never a refresh", "agent-7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, clk := newTestStore(t)
			first := mustAcquire(t, s, "slot-1", "agent-7", 2)
			path := filepath.Join(s.Dir(), "slot-1.json")
			before := readBytes(t, path)
			clk.Advance(time.Minute)
			acq, err := s.Acquire(bg, lease.Request{Kind: "slot-1", Owner: tt.owner, TTLMinutes: 5})
			if acq != nil || !errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrTimeout) {
				t.Fatalf("Acquire = %+v, %v; want a HeldError", acq, err)
			}
			var held *lease.HeldError
			if !errors.As(err, &held) {
				t.Fatalf("error %T is not a *HeldError", err)
			}
			if held.Record.Owner != "agent-7" || held.Record.Token != first.Token || held.Timeout || held.Waited != 0 {
				t.Errorf("HeldError = %+v", held)
			}
			if want := t0.Add(2 * time.Minute); !held.ExpiresAt.Equal(want) {
				t.Errorf("ExpiresAt = %v, want %v", held.ExpiresAt, want)
			}
			if lease.LiveRecord(err) != held.Record {
				t.Errorf("LiveRecord does not return the HeldError's record")
			}
			if !strings.Contains(err.Error(), `"agent-7"`) || !strings.Contains(err.Error(), "slot-1") {
				t.Errorf("message %q should name the holder and the kind", err)
			}
			if after := readBytes(t, path); string(after) != string(before) {
				t.Errorf("a refused acquire changed the record")
			}
		})
	}
}

func TestExpiryBoundary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		ttl     float64
		advance time.Duration
		state   lease.State
	}{
		{"just acquired", 1, 0, lease.Held},
		{"1ms before ttl", 1, time.Minute - time.Millisecond, lease.Held},
		{"exactly at ttl", 1, time.Minute, lease.Held},
		{"1ms past ttl", 1, time.Minute + time.Millisecond, lease.Unknown},
		{"fractional ttl at ttl", 0.1, 6 * time.Second, lease.Held},
		{"fractional ttl 1ms past", 0.1, 6*time.Second + time.Millisecond, lease.Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, clk := newTestStore(t)
			first := mustAcquire(t, s, "slot-1", "agent-7", tt.ttl)
			clk.Advance(tt.advance)
			st, err := s.Status(context.Background(), "slot-1")
			if err != nil {
				t.Fatal(err)
			}
			if st.State != tt.state {
				t.Fatalf("Status after %v = %s, want %s", tt.advance, st.State, tt.state)
			}
			if want := time.Duration(tt.ttl*float64(time.Minute)) - tt.advance; st.Remaining != want {
				t.Errorf("Remaining = %v, want %v", st.Remaining, want)
			}
			acq, err := s.Acquire(bg, lease.Request{Kind: "slot-1", Owner: "agent-8", TTLMinutes: 1})
			switch tt.state {
			case lease.Held:
				if !errors.Is(err, lease.ErrHeld) {
					t.Errorf("Acquire of a held lease = %v, want ErrHeld", err)
				}
				if _, err := s.Reap(bg, "slot-1"); !errors.Is(err, lease.ErrNotDead) {
					t.Errorf("Reap of a held lease = %v, want ErrNotDead", err)
				}
			case lease.Unknown:
				if err != nil || !acq.TookOverExpired || acq.Previous.Token != first.Token {
					t.Errorf("Acquire of an expired lease = %+v, %v; want a takeover", acq, err)
				}
			}
		})
	}
}

func TestHeartbeatExtends(t *testing.T) {
	t.Parallel()
	s, clk := newTestStore(t)
	r := mustAcquire(t, s, "slot-1", "agent-7", 1)
	for i := range 5 {
		clk.Advance(50 * time.Second)
		got, err := s.Heartbeat(bg, lease.Ref{Kind: "slot-1", Owner: "agent-7", Token: r.Token})
		if err != nil {
			t.Fatalf("heartbeat %d: %v", i, err)
		}
		if !got.Heartbeat.Equal(clk.Now()) || !got.AcquiredAt.Equal(t0) || got.Token != r.Token || got.TTLMinutes != 1 {
			t.Fatalf("heartbeat %d returned %+v", i, got)
		}
	}
	// 250 s after acquire, far past the 60 s TTL, and still held.
	st, _ := s.Status(context.Background(), "slot-1")
	if st.State != lease.Held {
		t.Errorf("after heartbeats the lease is %s, want held", st.State)
	}
	onDisk := lease.DecodeRecord("slot-1", readBytes(t, filepath.Join(s.Dir(), "slot-1.json")))
	if !onDisk.Heartbeat.Equal(clk.Now()) || !onDisk.AcquiredAt.Equal(t0) {
		t.Errorf("record on disk: heartbeat %v acquiredAt %v", onDisk.Heartbeat, onDisk.AcquiredAt)
	}
}

func TestHeartbeatRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		setup   func(t *testing.T, s *lease.Store, clk *fakeClock) (owner, token string)
		wantErr error
	}{
		{
			name:    "no record",
			setup:   func(t *testing.T, s *lease.Store, _ *fakeClock) (string, string) { return "agent-7", "x" },
			wantErr: lease.ErrNotHeld,
		},
		{
			name: "wrong token",
			setup: func(t *testing.T, s *lease.Store, _ *fakeClock) (string, string) {
				mustAcquire(t, s, "slot-1", "agent-7", 1)
				return "agent-7", strings.Repeat("0", 32)
			},
			wantErr: lease.ErrNotOwner,
		},
		{
			name: "wrong owner",
			setup: func(t *testing.T, s *lease.Store, _ *fakeClock) (string, string) {
				r := mustAcquire(t, s, "slot-1", "agent-7", 1)
				return "agent-8", r.Token
			},
			wantErr: lease.ErrNotOwner,
		},
		{
			name: "expired, even for owner and token: no revival",
			setup: func(t *testing.T, s *lease.Store, clk *fakeClock) (string, string) {
				r := mustAcquire(t, s, "slot-1", "agent-7", 1)
				clk.Advance(time.Minute + time.Millisecond)
				return "agent-7", r.Token
			},
			wantErr: lease.ErrExpired,
		},
		{
			name: "corrupt record",
			setup: func(t *testing.T, s *lease.Store, _ *fakeClock) (string, string) {
				writeFile(t, s.Dir(), "slot-1.json", `{"v":1,"owner":"agent-7","token":"t"`)
				return "agent-7", "t"
			},
			wantErr: lease.ErrExpired,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, clk := newTestStore(t)
			owner, token := tt.setup(t, s, clk)
			path := filepath.Join(s.Dir(), "slot-1.json")
			var before []byte
			if exists(t, path) {
				before = readBytes(t, path)
			}
			clk.Advance(time.Millisecond)
			got, err := s.Heartbeat(bg, lease.Ref{Kind: "slot-1", Owner: owner, Token: token})
			if got != nil || !errors.Is(err, tt.wantErr) {
				t.Fatalf("Heartbeat = %+v, %v; want %v", got, err, tt.wantErr)
			}
			if before != nil {
				if after := readBytes(t, path); string(after) != string(before) {
					t.Errorf("a refused heartbeat changed the record:\n%s\n->\n%s", before, after)
				}
			}
		})
	}
}

func TestTakeover(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, s *lease.Store, clk *fakeClock) string // returns previous owner ("" for corrupt)
	}{
		{
			name: "expired",
			setup: func(t *testing.T, s *lease.Store, clk *fakeClock) string {
				mustAcquire(t, s, "slot-1", "agent-7", 1)
				clk.Advance(time.Minute + time.Millisecond)
				return "agent-7"
			},
		},
		{
			name: "corrupt",
			setup: func(t *testing.T, s *lease.Store, _ *fakeClock) string {
				writeFile(t, s.Dir(), "slot-1.json", "not json")
				return ""
			},
		},
		{
			name: "empty file",
			setup: func(t *testing.T, s *lease.Store, _ *fakeClock) string {
				writeFile(t, s.Dir(), "slot-1.json", "")
				return ""
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, clk := newTestStore(t)
			prevOwner := tt.setup(t, s, clk)
			acq, err := s.Acquire(bg, lease.Request{Kind: "slot-1", Owner: "agent-8", TTLMinutes: 1})
			if err != nil {
				t.Fatalf("Acquire over a dead record: %v", err)
			}
			if !acq.TookOverExpired || acq.Previous == nil || acq.Previous.Owner != prevOwner || acq.Previous.Corrupt != (prevOwner == "") {
				t.Errorf("acquisition = %+v, previous %+v", acq, acq.Previous)
			}
			if acq.Record.Owner != "agent-8" || !acq.Record.Heartbeat.Equal(clk.Now().Truncate(time.Millisecond)) {
				t.Errorf("new record = %+v", acq.Record)
			}
			ev := eventsNamed(journalEvents(t, s.Dir()), lease.EventTakeover)
			if len(ev) != 1 {
				t.Fatalf("journal has %d takeover events, want 1", len(ev))
			}
			e := ev[0]
			prev, _ := e["previous"].(map[string]any)
			if e["kind"] != "slot-1" || e["by"] != "agent-8" || prev == nil || e["at"] != lease.FormatTime(clk.Now()) {
				t.Errorf("takeover event = %v", e)
			}
			if prevOwner != "" && prev["owner"] != prevOwner {
				t.Errorf("previous owner in the journal = %v, want %s", prev["owner"], prevOwner)
			}
			if prevOwner == "" && prev["corrupt"] != true {
				t.Errorf("a corrupt previous record must be journaled with corrupt:true, got %v", prev)
			}
		})
	}
}

func TestJournalLineFormat(t *testing.T) {
	t.Parallel()
	s, clk := newTestStore(t)
	mustAcquire(t, s, "slot-1", "agent-7", 1)
	clk.Advance(2 * time.Minute)
	mustAcquire(t, s, "slot-1", "agent-8", 1)
	data := string(readBytes(t, filepath.Join(s.Dir(), dirstore.JournalName)))
	if !strings.HasPrefix(data, `{"at":"`+lease.FormatTime(clk.Now())+`","event":"takeover","kind":"slot-1","by":"agent-8","previous":{"v":1,`) {
		t.Errorf("journal line = %s", data)
	}
	if strings.Count(data, "\n") != 1 || !strings.HasSuffix(data, "}\n") {
		t.Errorf("journal must be one JSON line ending in a newline: %q", data)
	}
}

func TestRelease(t *testing.T) {
	t.Parallel()
	t.Run("wrong token keeps the record", func(t *testing.T) {
		s, _ := newTestStore(t)
		r := mustAcquire(t, s, "slot-1", "agent-7", 1)
		for _, c := range []struct{ owner, token string }{{"agent-7", "nope"}, {"agent-8", r.Token}} {
			rel, err := s.Release(bg, lease.Ref{Kind: "slot-1", Owner: c.owner, Token: c.token})
			if rel != nil || !errors.Is(err, lease.ErrNotOwner) {
				t.Errorf("Release(%s, %s) = %+v, %v; want ErrNotOwner", c.owner, c.token, rel, err)
			}
		}
		if st, _ := s.Status(context.Background(), "slot-1"); st.State != lease.Held || st.Record.Token != r.Token {
			t.Errorf("record after refused releases: %+v", st)
		}
	})
	t.Run("owner and token release", func(t *testing.T) {
		s, _ := newTestStore(t)
		r := mustAcquire(t, s, "slot-1", "agent-7", 1)
		rel, err := s.Release(bg, lease.Ref{Kind: "slot-1", Owner: "agent-7", Token: r.Token})
		if err != nil || !rel.Released || rel.WasExpired {
			t.Fatalf("Release = %+v, %v", rel, err)
		}
		if exists(t, filepath.Join(s.Dir(), "slot-1.json")) {
			t.Errorf("record still on disk after release")
		}
		if ev := journalEvents(t, s.Dir()); len(ev) != 0 {
			t.Errorf("a plain release journaled %v", ev)
		}
	})
	t.Run("expired lease released by its holder", func(t *testing.T) {
		s, clk := newTestStore(t)
		r := mustAcquire(t, s, "slot-1", "agent-7", 1)
		clk.Advance(time.Hour)
		rel, err := s.Release(bg, lease.Ref{Kind: "slot-1", Owner: "agent-7", Token: r.Token})
		if err != nil || !rel.Released || !rel.WasExpired {
			t.Fatalf("Release = %+v, %v; want released, wasExpired", rel, err)
		}
	})
	t.Run("absent", func(t *testing.T) {
		s, _ := newTestStore(t)
		mustAcquire(t, s, "other", "agent-7", 1) // the store exists
		rel, err := s.Release(bg, lease.Ref{Kind: "slot-1", Owner: "agent-7", Token: "tok"})
		if err != nil || rel.Released {
			t.Fatalf("Release of an absent lease = %+v, %v; want Released false", rel, err)
		}
	})
	t.Run("corrupt record is not the caller's", func(t *testing.T) {
		s, _ := newTestStore(t)
		p := writeFile(t, s.Dir(), "slot-1.json", "{}")
		if _, err := s.Release(bg, lease.Ref{Kind: "slot-1", Owner: "agent-7", Token: "tok"}); !errors.Is(err, lease.ErrNotOwner) {
			t.Errorf("Release of a corrupt record = %v, want ErrNotOwner", err)
		}
		if !exists(t, p) {
			t.Errorf("corrupt record removed by a refused release")
		}
	})
}

func TestForceRelease(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	r := mustAcquire(t, s, "slot-1", "agent-7", 1)
	rel, err := s.ForceRelease(bg, "slot-1", "operator")
	if err != nil || !rel.Released || rel.WasExpired || rel.Previous == nil || rel.Previous.Token != r.Token {
		t.Fatalf("ForceRelease = %+v, %v", rel, err)
	}
	if exists(t, filepath.Join(s.Dir(), "slot-1.json")) {
		t.Errorf("record survived a forced release")
	}
	ev := eventsNamed(journalEvents(t, s.Dir()), lease.EventForceRelease)
	if len(ev) != 1 || ev[0]["kind"] != "slot-1" || ev[0]["by"] != "operator" || ev[0]["previous"].(map[string]any)["token"] != r.Token {
		t.Errorf("force_release events = %v", ev)
	}
	rel, err = s.ForceRelease(bg, "slot-1", "")
	if err != nil || rel.Released {
		t.Errorf("ForceRelease of nothing = %+v, %v", rel, err)
	}
	if n := len(journalEvents(t, s.Dir())); n != 1 {
		t.Errorf("ForceRelease of nothing journaled: %d events", n)
	}
}

func TestReap(t *testing.T) {
	t.Parallel()
	s, clk := newTestStore(t)
	r := mustAcquire(t, s, "slot-1", "agent-7", 1)
	prev, err := s.Reap(bg, "slot-1")
	if prev != nil || !errors.Is(err, lease.ErrNotDead) {
		t.Fatalf("Reap of a live lease = %+v, %v; want ErrNotDead", prev, err)
	}
	if lr := lease.LiveRecord(err); lr == nil || lr.Token != r.Token {
		t.Errorf("LiveRecord(ErrNotDead) = %+v", lr)
	}
	if !exists(t, filepath.Join(s.Dir(), "slot-1.json")) {
		t.Fatalf("refused reap removed the record")
	}
	clk.Advance(time.Minute + time.Millisecond)
	prev, err = s.Reap(bg, "slot-1")
	if err != nil || prev == nil || prev.Token != r.Token {
		t.Fatalf("Reap of a dead lease = %+v, %v", prev, err)
	}
	if exists(t, filepath.Join(s.Dir(), "slot-1.json")) {
		t.Errorf("reaped record still on disk")
	}
	ev := eventsNamed(journalEvents(t, s.Dir()), lease.EventReap)
	if len(ev) != 1 || ev[0]["kind"] != "slot-1" || ev[0]["previous"].(map[string]any)["owner"] != "agent-7" {
		t.Errorf("reap events = %v", ev)
	}
	prev, err = s.Reap(bg, "slot-1")
	if prev != nil || err != nil {
		t.Errorf("Reap of nothing = %+v, %v; want nil, nil", prev, err)
	}
	writeFile(t, s.Dir(), "slot-2.json", "[]")
	if prev, err := s.Reap(bg, "slot-2"); err != nil || prev == nil || !prev.Corrupt {
		t.Errorf("Reap of a corrupt record = %+v, %v", prev, err)
	}
}

func TestStatus(t *testing.T) {
	t.Parallel()
	s, clk := newTestStore(t)
	mustAcquire(t, s, "held", "agent-7", 1)
	mustAcquire(t, s, "expired", "agent-7", 0.5)
	writeFile(t, s.Dir(), "corrupt.json", `{"v":2}`)
	clk.Advance(45 * time.Second)
	tests := []struct {
		kind      string
		state     lease.State
		remaining time.Duration
		expiresAt time.Time
	}{
		{"free", lease.Free, 0, time.Time{}},
		{"held", lease.Held, 15 * time.Second, t0.Add(time.Minute)},
		{"expired", lease.Unknown, -15 * time.Second, t0.Add(30 * time.Second)},
		{"corrupt", lease.Unknown, 0, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			st, err := s.Status(context.Background(), tt.kind)
			if err != nil {
				t.Fatal(err)
			}
			if st.Kind != tt.kind || st.State != tt.state || st.Remaining != tt.remaining || !st.ExpiresAt.Equal(tt.expiresAt) {
				t.Errorf("Status = %+v, want %s remaining %v expiring %v", st, tt.state, tt.remaining, tt.expiresAt)
			}
			if (st.Record == nil) != (tt.state == lease.Free) {
				t.Errorf("Record = %+v for state %s", st.Record, st.State)
			}
		})
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	s, clk := newTestStore(t)
	mustAcquire(t, s, "b-held", "agent-7", 1)
	mustAcquire(t, s, "a-dead", "agent-7", 0.1)
	clk.Advance(10 * time.Second)
	stray := writeFile(t, s.Dir(), "Bad Name.json", "whatever, not even JSON")
	writeFile(t, s.Dir(), ".hidden.json", "{}")
	writeFile(t, s.Dir(), "notes.txt", "hi")
	if err := os.Mkdir(filepath.Join(s.Dir(), "dir.json"), 0o777); err != nil {
		t.Fatal(err)
	}
	all, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]lease.State{}
	var order []string
	for _, st := range all {
		got[st.Kind] = st.State
		order = append(order, st.Kind)
	}
	want := map[string]lease.State{"Bad Name": lease.Invalid, "a-dead": lease.Unknown, "b-held": lease.Held}
	if len(got) != len(want) {
		t.Errorf("List = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("List[%s] = %q, want %q", k, got[k], v)
		}
	}
	if strings.Join(order, ",") != "Bad Name,a-dead,b-held" {
		t.Errorf("List order = %v, want sorted", order)
	}
	if string(readBytes(t, stray)) != "whatever, not even JSON" {
		t.Errorf("stray file was modified")
	}
}

func TestListMissingStore(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	all, err := s.List(context.Background())
	if err != nil || len(all) != 0 {
		t.Errorf("List of a missing store = %v, %v", all, err)
	}
	if exists(t, s.Dir()) {
		t.Errorf("List created the store directory")
	}
}

func TestReconcile(t *testing.T) {
	t.Parallel()
	clk := newFakeClock(t0)
	dir := filepath.Join(t.TempDir(), "store")
	open := func(pattern string) *lease.Store {
		s, err := dirstore.Open(dir, lease.WithClock(clk), lease.WithOwnerPattern(pattern))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	anyone := open("")
	fenced := open(`^acme-[a-z0-9-]+$`)
	mustAcquire(t, anyone, "acme-dead", "acme-1", 1)
	mustAcquire(t, anyone, "acme-live", "acme-2", 60)
	mustAcquire(t, anyone, "other-dead", "other-1", 1)
	mustAcquire(t, anyone, "other-live", "other-2", 60)
	writeFile(t, dir, "garbled.json", "{{{")
	writeFile(t, dir, "Bad Name.json", `{"v":1}`)
	clk.Advance(2 * time.Minute)

	foreignFiles := []string{"other-dead.json", "other-live.json", "Bad Name.json"}
	before := map[string][]byte{}
	for _, f := range foreignFiles {
		before[f] = readBytes(t, filepath.Join(dir, f))
	}

	rep, err := fenced.Reconcile(bg)
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	var held, reaped, foreign []string
	for _, st := range rep.Held {
		held = append(held, st.Kind)
	}
	for _, r := range rep.Reaped {
		reaped = append(reaped, r.Kind)
	}
	for _, st := range rep.Foreign {
		foreign = append(foreign, st.Kind+":"+string(st.State))
	}
	check := func(what string, got []string, want string) {
		t.Helper()
		if strings.Join(got, ",") != want {
			t.Errorf("%s = %v, want %s", what, got, want)
		}
	}
	check("Held", held, "acme-live")
	check("Reaped", reaped, "acme-dead,garbled")
	check("Foreign", foreign, "Bad Name:invalid,other-dead:unknown,other-live:held")

	for _, f := range foreignFiles {
		if after := readBytes(t, filepath.Join(dir, f)); string(after) != string(before[f]) {
			t.Errorf("%s changed by reconcile", f)
		}
	}
	for _, f := range []string{"acme-dead.json", "garbled.json"} {
		if exists(t, filepath.Join(dir, f)) {
			t.Errorf("%s was not reaped", f)
		}
	}
	if !exists(t, filepath.Join(dir, "acme-live.json")) {
		t.Errorf("live lease removed")
	}
	var journaled []string
	for _, e := range eventsNamed(journalEvents(t, dir), lease.EventReap) {
		journaled = append(journaled, e["kind"].(string))
	}
	check("journaled reaps", journaled, "acme-dead,garbled")
}

// storeUntouched asserts that the store directory was never created.
func storeUntouched(t *testing.T, s *lease.Store) {
	t.Helper()
	if exists(t, s.Dir()) {
		entries, _ := os.ReadDir(s.Dir())
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("store directory %s was created (entries %v)", s.Dir(), names)
	}
}

func TestInvalidArgumentsTouchNothing(t *testing.T) {
	t.Parallel()
	ok := lease.Request{Kind: "slot-1", Owner: "agent-7", TTLMinutes: 1}
	with := func(f func(*lease.Request)) lease.Request { r := ok; f(&r); return r }
	big := json.RawMessage(`"` + strings.Repeat("x", lease.MaxPayloadBytes) + `"`)
	acquire := func(r lease.Request) func(*lease.Store) error {
		return func(s *lease.Store) error { _, err := s.Acquire(bg, r); return err }
	}
	tests := []struct {
		name string
		call func(*lease.Store) error
	}{
		{"empty kind", acquire(with(func(r *lease.Request) { r.Kind = "" }))},
		{"uppercase kind", acquire(with(func(r *lease.Request) { r.Kind = "Slot" }))},
		{"kind with slash", acquire(with(func(r *lease.Request) { r.Kind = "a/b" }))},
		{"kind dot-dot", acquire(with(func(r *lease.Request) { r.Kind = "../x" }))},
		{"hidden kind", acquire(with(func(r *lease.Request) { r.Kind = ".guard-x" }))},
		{"kind too long", acquire(with(func(r *lease.Request) { r.Kind = strings.Repeat("a", 129) }))},
		{"empty owner", acquire(with(func(r *lease.Request) { r.Owner = "" }))},
		{"owner with space", acquire(with(func(r *lease.Request) { r.Owner = "agent 7" }))},
		{"owner leading dash", acquire(with(func(r *lease.Request) { r.Owner = "-agent" }))},
		{"owner too long", acquire(with(func(r *lease.Request) { r.Owner = strings.Repeat("a", 129) }))},
		{"ttl 0", acquire(with(func(r *lease.Request) { r.TTLMinutes = 0 }))},
		{"ttl -1", acquire(with(func(r *lease.Request) { r.TTLMinutes = -1 }))},
		{"ttl NaN", acquire(with(func(r *lease.Request) { r.TTLMinutes = math.NaN() }))},
		{"ttl +Inf", acquire(with(func(r *lease.Request) { r.TTLMinutes = math.Inf(1) }))},
		{"ttl -Inf", acquire(with(func(r *lease.Request) { r.TTLMinutes = math.Inf(-1) }))},
		{"ttl over max", acquire(with(func(r *lease.Request) { r.TTLMinutes = lease.MaxTTLMinutes + 0.001 }))},
		{"ttl under min", acquire(with(func(r *lease.Request) { r.TTLMinutes = lease.MinTTLMinutes / 2 }))},
		{"denormal ttl", acquire(with(func(r *lease.Request) { r.TTLMinutes = 5e-324 }))},
		{"payload not JSON", acquire(with(func(r *lease.Request) { r.Payload = json.RawMessage(`{"a":`) }))},
		{"payload whitespace", acquire(with(func(r *lease.Request) { r.Payload = json.RawMessage(`  `) }))},
		{"payload too big", acquire(with(func(r *lease.Request) { r.Payload = big }))},
		{"wait with bad ttl", func(s *lease.Store) error {
			_, err := s.AcquireWait(bg, with(func(r *lease.Request) { r.TTLMinutes = 0 }))
			return err
		}},
		{"heartbeat bad kind", func(s *lease.Store) error {
			_, err := s.Heartbeat(bg, lease.Ref{Kind: "A", Owner: "agent-7", Token: "t"})
			return err
		}},
		{"heartbeat bad owner", func(s *lease.Store) error {
			_, err := s.Heartbeat(bg, lease.Ref{Kind: "slot-1", Owner: "", Token: "t"})
			return err
		}},
		{"release bad kind", func(s *lease.Store) error {
			_, err := s.Release(bg, lease.Ref{Kind: "", Owner: "agent-7", Token: "t"})
			return err
		}},
		{"release bad owner", func(s *lease.Store) error {
			_, err := s.Release(bg, lease.Ref{Kind: "slot-1", Owner: "a b", Token: "t"})
			return err
		}},
		{"force release bad kind", func(s *lease.Store) error { _, err := s.ForceRelease(bg, "x y", ""); return err }},
		{"force release bad by", func(s *lease.Store) error { _, err := s.ForceRelease(bg, "slot-1", "no way"); return err }},
		{"reap bad kind", func(s *lease.Store) error { _, err := s.Reap(bg, "../etc"); return err }},
		{"status bad kind", func(s *lease.Store) error { _, err := s.Status(context.Background(), "Nope"); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestStore(t)
			err := tt.call(s)
			if !errors.Is(err, lease.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			storeUntouched(t, s)
		})
	}
}

func TestAcceptedEdgesOfValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  lease.Request
	}{
		{"max ttl", lease.Request{Kind: "k", Owner: "o", TTLMinutes: lease.MaxTTLMinutes}},
		{"smallest ttl", lease.Request{Kind: "k", Owner: "o", TTLMinutes: lease.MinTTLMinutes}},
		{"128-char kind and owner", lease.Request{Kind: strings.Repeat("a", 128), Owner: strings.Repeat("B", 128), TTLMinutes: 1}},
		{"kind with dots and dashes", lease.Request{Kind: "0.a_b-c", Owner: "user@host:1", TTLMinutes: 1}},
		{"payload at the limit", lease.Request{Kind: "k", Owner: "o", TTLMinutes: 1, Payload: json.RawMessage(`"` + strings.Repeat("x", lease.MaxPayloadBytes-2) + `"`)}},
		{"null payload", lease.Request{Kind: "k", Owner: "o", TTLMinutes: 1, Payload: json.RawMessage(`null`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestStore(t)
			acq, err := s.Acquire(bg, tt.req)
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			onDisk := lease.DecodeRecord(tt.req.Kind, readBytes(t, filepath.Join(s.Dir(), tt.req.Kind+".json")))
			if onDisk.Corrupt || onDisk.TTLMinutes != tt.req.TTLMinutes || onDisk.Token != acq.Record.Token {
				t.Errorf("record on disk = %+v", onDisk)
			}
		})
	}
}

func TestReadsTouchNothing(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	if st, err := s.Status(context.Background(), "slot-1"); err != nil || st.State != lease.Free {
		t.Errorf("Status = %+v, %v", st, err)
	}
	if _, err := s.List(context.Background()); err != nil {
		t.Error(err)
	}
	storeUntouched(t, s)
}

func TestOpenOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opt  lease.Option
	}{
		{"nil clock", lease.WithClock(nil)},
		{"zero poll interval", lease.WithPollInterval(0)},
		{"unanchored owner pattern", lease.WithOwnerPattern("acme-.*")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			if _, err := dirstore.Open(dir, tt.opt); !errors.Is(err, lease.ErrInvalid) {
				t.Errorf("Open = %v, want ErrInvalid", err)
			}
			if exists(t, dir) {
				t.Errorf("Open created the store")
			}
		})
	}
	dir := filepath.Join(t.TempDir(), "store")
	if _, err := dirstore.Open(dir); err != nil || exists(t, dir) {
		t.Errorf("dirstore.Open(%s) = %v; it must not create the directory", dir, err)
	}
}

func TestCompileOwnerPattern(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern string
		ok      bool
		matches []string
		rejects []string
	}{
		{pattern: "", ok: true, matches: []string{"ci-main", "user@host", "a"}, rejects: []string{"", "-x", "a b"}},
		{pattern: `^a$`, ok: true, matches: []string{"a"}, rejects: []string{"ab", "ba"}},
		{pattern: `^acme-[a-z0-9][a-z0-9-]{0,62}$`, ok: true, matches: []string{"acme-1"}, rejects: []string{"xacme-1", "acme-"}},
		{pattern: `^(ci|dev)-[0-9]+$`, ok: true, matches: []string{"ci-1", "dev-22"}, rejects: []string{"ci-", "ci-1x"}},
		{pattern: `a$`, ok: false},
		{pattern: `^a`, ok: false},
		{pattern: `a`, ok: false},
		{pattern: `^a\$`, ok: false},
		{pattern: `^[a-$`, ok: false},
		{pattern: `(?i)^a$`, ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			re, err := lease.CompileOwnerPattern(tt.pattern)
			if !tt.ok {
				if !errors.Is(err, lease.ErrInvalid) {
					t.Fatalf("CompileOwnerPattern(%q) = %v, %v; want ErrInvalid", tt.pattern, re, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("CompileOwnerPattern(%q): %v", tt.pattern, err)
			}
			for _, m := range tt.matches {
				if !re.MatchString(m) {
					t.Errorf("%q does not match %q", tt.pattern, m)
				}
			}
			for _, m := range tt.rejects {
				if re.MatchString(m) {
					t.Errorf("%q matches %q", tt.pattern, m)
				}
			}
		})
	}
}

func TestOwnerFence(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t, lease.WithOwnerPattern(`^acme-[a-z0-9]+$`))
	if _, err := s.Acquire(bg, lease.Request{Kind: "k", Owner: "evil-1", TTLMinutes: 1}); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("owner outside the fence: %v, want ErrInvalid", err)
	}
	storeUntouched(t, s)
	mustAcquire(t, s, "k", "acme-1", 1)
}

func TestAcquireWaitTimesOut(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t, lease.WithPollInterval(20*time.Millisecond))
	mustAcquire(t, s, "slot-1", "agent-7", 60)
	ctx, cancel := context.WithTimeout(bg, 150*time.Millisecond)
	defer cancel()
	acq, err := s.AcquireWait(ctx, lease.Request{Kind: "slot-1", Owner: "agent-8", TTLMinutes: 1})
	if acq != nil || !errors.Is(err, lease.ErrHeld) || !errors.Is(err, lease.ErrTimeout) {
		t.Fatalf("AcquireWait = %+v, %v; want an error matching ErrHeld and ErrTimeout", acq, err)
	}
	var held *lease.HeldError
	if !errors.As(err, &held) || !held.Timeout || held.Waited < 150*time.Millisecond || held.Record.Owner != "agent-7" {
		t.Errorf("HeldError = %+v", held)
	}
	if !strings.Contains(err.Error(), "timed out") {
		t.Errorf("message %q should say it timed out", err)
	}
}

func TestAcquireWaitCancelled(t *testing.T) {
	t.Parallel()
	s, clk := newTestStore(t, lease.WithPollInterval(20*time.Millisecond))
	mustAcquire(t, s, "slot-1", "agent-7", 60)
	ctx, cancel := context.WithCancel(bg)
	spy := &spyBackend{Backend: s.Backend().(*dirstore.Backend), attempts: make(chan struct{}, 100)}
	ws, err := lease.New(spy, lease.WithClock(clk), lease.WithPollInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := ws.AcquireWait(ctx, lease.Request{Kind: "slot-1", Owner: "agent-8", TTLMinutes: 1})
		done <- err
	}()
	<-spy.attempts
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || errors.Is(err, lease.ErrTimeout) {
		t.Errorf("AcquireWait after cancel = %v, want context.Canceled", err)
	}
}

// spyBackend reports every Update and Read so a test knows a waiter has
// been refused at least once before it releases the lease (a refusal of a
// live record is decided on a lock-free Read, without an Update).
type spyBackend struct {
	*dirstore.Backend
	attempts chan struct{}
}

func (b *spyBackend) Update(ctx context.Context, kind string, fn func(*lease.Record) (lease.Change, error)) (*lease.Record, error) {
	r, err := b.Backend.Update(ctx, kind, fn)
	b.note()
	return r, err
}

func (b *spyBackend) Read(ctx context.Context, kind string) (*lease.Record, error) {
	r, err := b.Backend.Read(ctx, kind)
	b.note()
	return r, err
}

func (b *spyBackend) note() {
	select {
	case b.attempts <- struct{}{}:
	default:
	}
}

func TestAcquireWaitWakesOnRelease(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	holder, err := dirstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := holder.Acquire(bg, lease.Request{Kind: "slot-1", Owner: "agent-7", TTLMinutes: 60})
	if err != nil {
		t.Fatal(err)
	}
	spy := &spyBackend{Backend: holder.Backend().(*dirstore.Backend), attempts: make(chan struct{}, 100)}
	if _, ok := lease.Backend(spy).(lease.Watcher); !ok {
		t.Fatal("spy lost the Watcher implementation")
	}
	waiter, err := lease.New(spy, lease.WithPollInterval(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	type result struct {
		acq *lease.Acquisition
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		acq, err := waiter.AcquireWait(ctx, lease.Request{Kind: "slot-1", Owner: "agent-8", TTLMinutes: 1})
		done <- result{acq, err, time.Now()}
	}()
	<-spy.attempts // the waiter has been refused once and is now waiting
	released := time.Now()
	if _, err := holder.Release(bg, lease.Ref{Kind: "slot-1", Owner: "agent-7", Token: r.Record.Token}); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || res.acq.Record.Owner != "agent-8" || res.acq.TookOverExpired {
		t.Fatalf("AcquireWait = %+v, %v", res.acq, res.err)
	}
	if d := res.at.Sub(released); d > 2*time.Second {
		t.Errorf("waiter woke %v after the release; with a 10 s poll it must be woken by the watch", d)
	}
}

func TestAcquireWaitWakesAtExpiry(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := dirstore.Open(dir, lease.WithPollInterval(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// A 300 ms lease that nobody releases: the waiter must retry at its expiry,
	// not at the next 10 s poll.
	mustAcquire(t, s, "slot-1", "agent-7", 0.005)
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	start := time.Now()
	acq, err := s.AcquireWait(ctx, lease.Request{Kind: "slot-1", Owner: "agent-8", TTLMinutes: 1})
	if err != nil || !acq.TookOverExpired || acq.Previous.Owner != "agent-7" {
		t.Fatalf("AcquireWait = %+v, %v; want a takeover at expiry", acq, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("AcquireWait took %v for a 300 ms lease", d)
	}
}

// TestGoroutineRace races goroutines of one process (sharing one Store) for
// fresh kinds: each kind has exactly one winner.
func TestGoroutineRace(t *testing.T) {
	t.Parallel()
	const workers, rounds = 16, 40
	dir := filepath.Join(t.TempDir(), "store")
	s, err := dirstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	type win struct {
		round int
		owner string
	}
	wins := make(chan win, workers*rounds)
	errs := make(chan error, workers)
	start := make(chan struct{})
	for w := range workers {
		go func() {
			owner := "worker-" + strings.Repeat("x", w+1)
			<-start
			for n := range rounds {
				kind := "round-" + strings.Repeat("r", n+1)
				_, err := s.Acquire(bg, lease.Request{Kind: kind, Owner: owner, TTLMinutes: 60})
				switch {
				case err == nil:
					wins <- win{n, owner}
				case !errors.Is(err, lease.ErrHeld):
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	close(start)
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(wins)
	byRound := map[int][]string{}
	for w := range wins {
		byRound[w.round] = append(byRound[w.round], w.owner)
	}
	for n := range rounds {
		kind := "round-" + strings.Repeat("r", n+1)
		st, _ := s.Status(context.Background(), kind)
		if len(byRound[n]) != 1 || st.State != lease.Held || st.Record.Owner != byRound[n][0] {
			t.Errorf("%s: winners %v, record %+v", kind, byRound[n], st.Record)
		}
	}
}
