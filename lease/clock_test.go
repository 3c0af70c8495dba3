package lease_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/lease"
)

// steppingClock is a fake wall clock with a boot clock beside it, so a
// test can step the wall clock without moving the boot clock, as settimeofday
// does.
type steppingClock struct {
	mu   sync.Mutex
	wall time.Time
	boot lease.BootStamp
	has  bool
}

func (c *steppingClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.wall }
func (c *steppingClock) Boot() (lease.BootStamp, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.boot, c.has
}

// pass lets d elapse on both clocks.
func (c *steppingClock) pass(d time.Duration) {
	c.mu.Lock()
	c.wall = c.wall.Add(d)
	c.boot.Ms += d.Milliseconds()
	c.mu.Unlock()
}

// step moves the wall clock alone.
func (c *steppingClock) step(d time.Duration) {
	c.mu.Lock()
	c.wall = c.wall.Add(d)
	c.mu.Unlock()
}

func TestJudgeRules(t *testing.T) {
	t.Parallel()
	hb := t0
	this := lease.BootStamp{ID: "b1", Ms: 10_000_000}
	rec := func(ttl float64, boot *lease.BootStamp) *lease.Record {
		return &lease.Record{V: 1, Kind: "k", Owner: "o", Token: "t", Heartbeat: hb, TTLMinutes: ttl, AcquiredAt: hb, Boot: boot}
	}
	at := func(ms int64) *lease.BootStamp { return &lease.BootStamp{ID: this.ID, Ms: this.Ms + ms} }
	tests := []struct {
		name string
		r    *lease.Record
		now  time.Time
		boot *lease.BootStamp
		live bool
		rule string
		left time.Duration // ExpiresAt - now
	}{
		{"no step: wall decides", rec(1, &this), hb.Add(30 * time.Second), at(30_000), true, lease.RuleWall, 30 * time.Second},
		{"small disagreement is noise", rec(1, &this), hb.Add(61 * time.Second), at(60_500), false, lease.RuleWall, -time.Second},
		{"wall stepped forward an hour: boot keeps the holder", rec(1, &this), hb.Add(time.Hour + 10*time.Second), at(10_000), true, lease.RuleBoot, 50 * time.Second},
		{"wall stepped back an hour: boot expires it on time", rec(1, &this), hb.Add(-time.Hour + 70*time.Second), at(70_000), false, lease.RuleBoot, -10 * time.Second},
		{"stamp of another boot: wall decides", rec(1, &lease.BootStamp{ID: "b0", Ms: 5}), hb.Add(time.Hour), at(0), false, lease.RuleWall, -59 * time.Minute},
		{"stamp ahead of the boot clock is not trusted", rec(1, at(1_000_000)), hb.Add(time.Hour), at(0), false, lease.RuleWall, -59 * time.Minute},
		{"no stamp on the record (Node): wall decides", rec(1, nil), hb.Add(time.Hour), at(0), false, lease.RuleWall, -59 * time.Minute},
		{"no boot clock: wall decides", rec(1, &this), hb.Add(time.Hour), nil, false, lease.RuleWall, -59 * time.Minute},
		{"heartbeat in the year 2300", &lease.Record{V: 1, Kind: "k", Heartbeat: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), TTLMinutes: 5}, hb, nil, false, lease.RuleFuture, 0},
		{"future within allowance holds at most allowance+ttl", rec(5, nil), hb.Add(-5 * time.Minute), nil, true, lease.RuleWall, 10 * time.Minute},
		{"corrupt", &lease.Record{Kind: "k", Corrupt: true}, hb, at(0), false, lease.RuleCorrupt, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lv := tt.r.Judge(tt.now, tt.boot)
			if lv.Live != tt.live || lv.Rule != tt.rule {
				t.Fatalf("Judge = live %v rule %q, want live %v rule %q", lv.Live, lv.Rule, tt.live, tt.rule)
			}
			if tt.rule == lease.RuleFuture || tt.rule == lease.RuleCorrupt {
				return
			}
			if got := lv.ExpiresAt.Sub(tt.now); got != tt.left {
				t.Errorf("ExpiresAt - now = %v, want %v", got, tt.left)
			}
		})
	}
}

// TestBoundedFuture: whatever the heartbeat, a record without a usable boot
// stamp is live for at most MaxFuture + TTL from any instant it is judged.
func TestBoundedFuture(t *testing.T) {
	t.Parallel()
	for _, ttl := range []float64{0.001, 0.01, 1, 60, 527040} {
		r := &lease.Record{V: 1, Kind: "k", TTLMinutes: ttl}
		bound := lease.MaxFuture(r.TTL()) + r.TTL()
		for _, ahead := range []time.Duration{0, time.Second, time.Minute, time.Hour, 24 * time.Hour, 1 << 62} {
			r.Heartbeat = t0.Add(ahead)
			lv := r.Judge(t0, nil)
			if lv.Live && lv.ExpiresAt.Sub(t0) > bound {
				t.Errorf("ttl %v, heartbeat %v ahead: live until %v from now, bound %v", ttl, ahead, lv.ExpiresAt.Sub(t0), bound)
			}
		}
	}
}

func TestBootFieldRoundTrip(t *testing.T) {
	t.Parallel()
	r := &lease.Record{V: 1, Kind: "k", Owner: "o", Token: "t", TTLMinutes: 1, Payload: json.RawMessage(`{"a":1}`)}
	r.StampForTest(t0, &lease.BootStamp{ID: "b1/4026531834", Ms: 42})
	r.AcquiredAt = r.Heartbeat
	data, err := r.EncodeFile()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"boot": {`) || !strings.HasSuffix(strings.TrimSpace(string(data)), "}") {
		t.Fatalf("encoded: %s", data)
	}
	got := lease.DecodeRecord("k", data)
	if got.Corrupt || got.Boot == nil || *got.Boot != *r.Boot || got.Extra != nil {
		t.Fatalf("decoded %+v boot %+v extra %v", got, got.Boot, got.Extra)
	}

	// A writer that keeps unknown fields but rewrites the heartbeat (the
	// Node tool's heartbeat does) leaves a stamp for another heartbeat: it is
	// dropped, never trusted.
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	m["heartbeat"] = lease.FormatTime(t0.Add(time.Minute))
	moved, _ := json.Marshal(m)
	if got := lease.DecodeRecord("k", moved); got.Corrupt || got.Boot != nil || got.Extra["boot"] != nil {
		t.Fatalf("stale stamp kept: boot %+v extra %v", got.Boot, got.Extra)
	}

	// A "boot" field that is not ours is someone else's data: kept as is.
	m["boot"] = "not ours"
	other, _ := json.Marshal(m)
	if got := lease.DecodeRecord("k", other); got.Corrupt || got.Boot != nil || string(got.Extra["boot"]) != `"not ours"` {
		t.Fatalf("foreign boot field: boot %+v extra %v", got.Boot, got.Extra)
	}
}

// TestClockStepsThroughTheStore drives a store whose wall clock is stepped
// under a live holder: a forward step lets no one take over, a backward
// step does not keep a dead lease, and heartbeats refresh both stamps.
func TestClockStepsThroughTheStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := &steppingClock{wall: t0, boot: lease.BootStamp{ID: "boot-a", Ms: 1_000_000}, has: true}
	s, err := dirstore.Open(filepath.Join(t.TempDir(), "store"), lease.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Acquire(ctx, lease.Request{Kind: "k", Owner: "alice", TTLMinutes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if a.Record.Boot == nil || a.Record.Boot.Ms != 1_000_000 {
		t.Fatalf("acquire wrote boot stamp %+v", a.Record.Boot)
	}
	clk.pass(10 * time.Second)
	clk.step(2 * time.Hour) // the date is set forward while alice holds
	if _, err := s.Acquire(ctx, lease.Request{Kind: "k", Owner: "bob", TTLMinutes: 1}); !isHeld(err) {
		t.Fatalf("bob after a forward step: %v, want held", err)
	}
	st, _ := s.Status(context.Background(), "k")
	if st.State != lease.Held || st.Rule != lease.RuleBoot || st.Remaining != 50*time.Second {
		t.Fatalf("status after forward step: %s rule %s remaining %v", st.State, st.Rule, st.Remaining)
	}
	rec, err := s.Heartbeat(ctx, lease.Ref{Kind: "k", Owner: "alice", Token: a.Record.Token})
	if err != nil {
		t.Fatalf("alice's heartbeat after the step: %v", err)
	}
	if !rec.Heartbeat.Equal(clk.Now().Truncate(time.Millisecond)) || rec.Boot.Ms != 1_010_000 {
		t.Fatalf("heartbeat stamps %v %+v", rec.Heartbeat, rec.Boot)
	}
	// Now the date is set back by three hours and alice dies: her heartbeat
	// looks hours in the future by the wall clock, and the boot clock
	// still expires it one TTL later.
	clk.step(-3 * time.Hour)
	clk.pass(59 * time.Second)
	if _, err := s.Acquire(ctx, lease.Request{Kind: "k", Owner: "bob", TTLMinutes: 1}); !isHeld(err) {
		t.Fatalf("bob inside alice's TTL: %v, want held", err)
	}
	clk.pass(2 * time.Second)
	took, err := s.Acquire(ctx, lease.Request{Kind: "k", Owner: "bob", TTLMinutes: 1})
	if err != nil || !took.TookOverExpired {
		t.Fatalf("bob after alice's TTL by the boot clock: %v %+v", err, took)
	}
	// Without a boot clock (the Node tool's view, or another boot), the
	// same record is judged by the wall clock alone.
	data, err := os.ReadFile(filepath.Join(s.Dir(), "k.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"boot"`) {
		t.Fatalf("record on disk has no boot stamp: %s", data)
	}
}

func isHeld(err error) bool {
	_, ok := err.(*lease.HeldError)
	return ok
}

// TestDeepRecordJudgedAsNode: a record whose payload nests deeper than
// encoding/json parses (the Node tool's JSON.parse takes it) is judged by
// its holder fields: held, not corrupt, so never taken over while live; its
// holder can heartbeat it and the payload is kept byte for byte; outputs
// leave the deep value out and say so.
func TestDeepRecordJudgedAsNode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := dirstore.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(s.Dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 20_000
	payload := strings.Repeat("[", n) + strings.Repeat("]", n)
	extra := strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n)
	rec := `{"v":1,"kind":"deep","owner":"node-agent","token":"tok","heartbeat":"` + lease.FormatTime(time.Now()) +
		`","ttlMinutes":5,"payload":` + payload + `,"acquiredAt":"2026-01-01T00:00:00.000Z","x":` + extra + "}\n"
	path := filepath.Join(s.Dir(), "deep.json")
	if err := os.WriteFile(path, []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := s.Status(context.Background(), "deep")
	if err != nil || st.State != lease.Held || st.Record.Corrupt || st.Record.Owner != "node-agent" {
		t.Fatalf("status of a deep record: %v %+v", err, st)
	}
	if _, err := s.Acquire(ctx, lease.Request{Kind: "deep", Owner: "other", TTLMinutes: 1}); !isHeld(err) {
		t.Fatalf("acquire over a live deep record: %v, want held", err)
	}
	out, err := json.Marshal(st.Record)
	if err != nil {
		t.Fatalf("output of a deep record: %v", err)
	}
	var shown map[string]any
	if err := json.Unmarshal(out, &shown); err != nil || shown["payload"] != nil || shown["x"] != nil ||
		len(shown["omitted"].([]any)) != 2 {
		t.Fatalf("output: %s", out)
	}
	if _, err := s.Heartbeat(ctx, lease.Ref{Kind: "deep", Owner: "node-agent", Token: "tok"}); err != nil {
		t.Fatalf("heartbeat of a deep record by its holder: %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"payload": `+payload+",") || !strings.Contains(string(data), `"x": `+extra+"\n") {
		t.Fatalf("payload or extra not kept verbatim across a heartbeat")
	}
	if got := lease.DecodeRecord("deep", data); got.Corrupt || got.Owner != "node-agent" {
		t.Fatalf("rewritten record reads back %+v", got)
	}

	// Not JSON stays corrupt, deep or not: trailing text, an unclosed
	// array, a top-level array.
	for _, bad := range []string{
		rec[:len(rec)-1] + " x",
		`{"v":1,"payload":` + strings.Repeat("[", n) + `}`,
		strings.Repeat("[", n) + strings.Repeat("]", n),
	} {
		if got := lease.DecodeRecord("deep", []byte(bad)); !got.Corrupt {
			t.Errorf("invalid deep JSON read as a record: %.60q", bad)
		}
	}
}
