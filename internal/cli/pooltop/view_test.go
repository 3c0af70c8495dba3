package pooltop

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

var now = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

const token1 = "0123456789abcdef0123456789abcdef"

func plainStyles() styles {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.Ascii)
	return newStyles(r)
}

func colourStyles() styles {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.ANSI)
	return newStyles(r)
}

func held(owner, token string, fence int64, acquired, expires time.Duration) (*lease.Record, string) {
	rec := &lease.Record{V: 1, Kind: "k", Owner: owner, Token: token, Fence: fence,
		AcquiredAt: now.Add(-acquired), Heartbeat: now.Add(-acquired), TTLMinutes: 10}
	return rec, lease.FormatTime(now.Add(expires))
}

// busy is a pool of five slots (two held, one free, one unknown, one
// quarantined), two waiters and a few events.
func busy() *screen {
	slot := func(id string, attrs map[string]any) *pool.Slot {
		return &pool.Slot{ID: id, RawID: id, Kind: "slot-" + id, Attributes: attrs}
	}
	r1, x1 := held("ci-main", token1, 41, 3*time.Minute+7*time.Second, 6*time.Minute+53*time.Second)
	r2, x2 := held("agent-7", "fedcba9876543210fedcba9876543210", 12, 75*time.Minute, 45*time.Second)
	r4, x4 := held("agent-3", "00000000000000000000000000000004", 9, 40*time.Minute, -10*time.Minute)
	st := &pool.Status{Store: "/home/ci/src/acme/logs/leases", Dir: "/home/ci/src/acme/logs/leases/acme", MovingAvgMs: 480000,
		Slots: []pool.SlotStatus{
			{Slot: slot("1", map[string]any{"ports": map[string]any{"api": 3000, "web": 3001}, "db": "acme_test_1"}), State: lease.Held, Holder: "ci-main", ExpiresAt: x1, Record: r1},
			{Slot: slot("2", map[string]any{"db": "acme_test_2"}), State: lease.Held, Holder: "agent-7", ExpiresAt: x2, Record: r2},
			{Slot: slot("3", map[string]any{"db": "acme_test_3"}), State: lease.Free},
			{Slot: slot("4", map[string]any{"db": "acme_test_4"}), State: lease.Unknown, Holder: "agent-3", ExpiresAt: x4, Record: r4},
			{Slot: slot("5", map[string]any{"db": "acme_test_5"}), State: lease.Held, Holder: "pool",
				Record:     &lease.Record{Owner: "pool", Token: "11111111111111111111111111111111", AcquiredAt: now.Add(-time.Hour)},
				Quarantine: &pool.Quarantine{Reason: "health failed", By: "pool", Failures: 3, At: lease.FormatTime(now.Add(-time.Hour))}},
		},
		Queue: []pool.QueuedEntry{
			{Entry: pool.Entry{ID: "r-1", Owner: "agent-9", Session: "review-bot", Mode: "blocking", EnqueuedAt: lease.FormatTime(now.Add(-72 * time.Second))},
				Position: pool.Position{RequestID: "r-1", Position: 1, EtaMs: 480000}},
			{Entry: pool.Entry{ID: "r-2", Owner: "ci-nightly", Session: "ci-nightly", Mode: "async", EnqueuedAt: lease.FormatTime(now.Add(-5 * time.Second))},
				Position: pool.Position{RequestID: "r-2", Position: 2, EtaMs: 960000}},
		},
	}
	at := func(d time.Duration) string { return lease.FormatTime(now.Add(-d)) }
	var events []event
	for _, l := range []string{
		fmt.Sprintf(`{"at":%q,"event":"granted","mode":"blocking","owner":"agent-7","request_id":"x","slot_id":2}`, at(75*time.Minute)),
		fmt.Sprintf(`{"at":%q,"event":"grant_health_failed","error":"slot 5: health failed: exit status 1","request_id":"y","slot_id":5}`, at(61*time.Minute)),
		fmt.Sprintf(`{"at":%q,"event":"released","forced":false,"owner":"agent-5","slot_id":1}`, at(4*time.Minute)),
		fmt.Sprintf(`{"at":%q,"event":"slot_takeover_on_grant","previous":{"owner":"agent-2"},"slot_id":1}`, at(3*time.Minute+8*time.Second)),
		fmt.Sprintf(`{"at":%q,"event":"granted","mode":"blocking","owner":"ci-main","request_id":"z","slot_id":1}`, at(3*time.Minute+7*time.Second)),
		fmt.Sprintf(`{"at":%q,"event":"request_queued","owner":"agent-9","position":1,"request_id":"r-1","session":"review-bot"}`, at(72*time.Second)),
	} {
		events = append(events, parseEvent(json.RawMessage(l)))
	}
	return &screen{name: "acme", interval: 2 * time.Second, snap: &snapshot{status: st, events: events, logLen: 57, at: now.Add(-time.Second)}}
}

// withUTC shows times in UTC for the test (setting time.Local raced with
// the embedded etcd of another test, which reads it).
func withUTC(t *testing.T) {
	old := zone
	zone = time.UTC
	t.Cleanup(func() { zone = old })
}

// checkFits fails unless the view has at most height lines, none wider
// than width.
func checkFits(t *testing.T, view string, width, height int) {
	t.Helper()
	lines := strings.Split(view, "\n")
	if len(lines) > height {
		t.Errorf("%d lines in a window of %d:\n%s", len(lines), height, view)
	}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w > width {
			t.Errorf("line %d is %d cells wide in a window of %d: %q", i+1, w, width, l)
		}
	}
}

func TestViewAt80x24(t *testing.T) {
	withUTC(t)
	got := busy().render(plainStyles(), 80, 24, now)
	want := strings.Join([]string{
		"pool acme · 2/5 held · 1 free · 1 unknown · 1 quarantined · 2 waiting",
		"store /home/ci/src/acme/logs/leases · avg hold 8m00s                    15:09:26",
		"SLOT STATE       HOLDER     HELD EXPIRES FENCE TOKEN    ATTRIBUTES",
		"1    held        ci-main   3m07s   6m53s    41 3eb1bd43 db=acme_test_1 ports=ap…",
		"2    held        agent-7   1h15m     45s    12 4ba68aa8 db=acme_test_2",
		"3    free                                               db=acme_test_3",
		"4    unknown     agent-3  40m00s expired     9 a20248c7 db=acme_test_4",
		"5    quarantined reason: health failed (3 failures in a row) · by pool",
		"",
		"QUEUE WAITER               WAITED    ETA MODE     REQUEST",
		"   #1 agent-9 (review-bot)  1m12s    ~8m blocking r-1",
		"   #2 ci-nightly               5s   ~16m async    r-2",
		"",
		"EVENTS (latest 6 of 57)",
		"15:08:14 request_queued         agent-9 (review-bot) at #1",
		"15:06:19 granted                slot 1 to ci-main",
		"15:06:18 slot_takeover_on_grant slot 1 from agent-2",
		"15:05:26 released               slot 1 by agent-5",
		"14:08:26 grant_health_failed    slot 5: health failed: exit status 1",
		"13:54:26 granted                slot 2 to agent-7",
		"",
		"",
		"",
		"q leaves · read 15:09:25 · redrawn on every change, re-read every 2s",
	}, "\n")
	if got != want {
		t.Errorf("the view at 80×24:\n%s\n\nwant:\n%s", got, want)
	}
	checkFits(t, got, 80, 24)
	if strings.Contains(got, token1) || strings.Contains(got, "fedcba9876543210fedcba") {
		t.Error("the view shows a token")
	}
}

// Every size from the minimum up fits, in colour too; below it, one line
// says how large the window must be.
func TestViewFitsEverySize(t *testing.T) {
	sc := busy()
	for _, st := range []styles{plainStyles(), colourStyles()} {
		for w := 20; w <= 140; w += 7 {
			for h := 3; h <= 40; h += 3 {
				v := sc.render(st, w, h, now)
				checkFits(t, v, w, h)
				small := w < MinWidth || h < MinHeight
				if one := !strings.Contains(v, "\n"); small != one {
					t.Errorf("%d×%d: one line %v, want %v:\n%s", w, h, one, small, v)
				}
				if small && !strings.Contains(ansi.Strip(v), fmt.Sprintf("%d×%d", MinWidth, MinHeight)) {
					t.Errorf("%d×%d: %q does not say the minimum size", w, h, v)
				}
			}
		}
	}
}

func TestViewNarrow(t *testing.T) {
	got := busy().render(plainStyles(), 59, 24, now)
	want := "pool top needs a 60×10 window (this one is 59×24); q leaves"
	if got != want {
		t.Errorf("at 59×24: %q, want %q", got, want)
	}
	if got := busy().render(plainStyles(), 80, 9, now); got != "pool top needs a 60×10 window (this one is 80×9); q leaves" {
		t.Errorf("at 80×9: %q", got)
	}
	if got := busy().render(plainStyles(), 30, 24, now); got != "needs 60×10 (is 30×24)" {
		t.Errorf("at 30×24: %q", got)
	}
}

// At the minimum size every section still has its header, and a pool
// with more slots than rows says how many are not shown.
func TestViewAtMinimumSize(t *testing.T) {
	withUTC(t)
	sc := busy()
	for i := 6; i <= 30; i++ {
		id := fmt.Sprint(i)
		sc.snap.status.Slots = append(sc.snap.status.Slots, pool.SlotStatus{Slot: &pool.Slot{ID: id, RawID: id}, State: lease.Free})
	}
	got := sc.render(plainStyles(), MinWidth, MinHeight, now)
	checkFits(t, got, MinWidth, MinHeight)
	for _, want := range []string{"SLOT STATE", "1    held        ci-main", "… and 29 more slots", "QUEUE", "#1 agent-9", "EVENTS (latest 1 of 57)", "request_queued", "q leaves"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	// At 60 columns the attributes give way to the holder.
	if strings.Contains(got, "ATTRIBUTES") {
		t.Errorf("attributes at 60 columns:\n%s", got)
	}
}

func TestViewColours(t *testing.T) {
	sc := busy()
	plain := sc.render(plainStyles(), 100, 30, now)
	if strings.Contains(plain, "\x1b") {
		t.Errorf("escape sequences without colours: %q", plain)
	}
	col := sc.render(colourStyles(), 100, 30, now)
	if !strings.Contains(col, "\x1b[") {
		t.Error("no colours on a colour terminal")
	}
	if ansi.Strip(col) != plain {
		t.Errorf("the colour view is not the plain one coloured:\n%s\n\n%s", ansi.Strip(col), plain)
	}
	// At 100 columns the fingerprint has its 12 hex digits.
	if fp := strings.TrimPrefix(lease.TokenFingerprint(token1), "sha256:"); !strings.Contains(plain, fp) {
		t.Errorf("no fingerprint %s in:\n%s", fp, plain)
	}
}

// Text from the pool cannot drive the terminal.
func TestViewCleansText(t *testing.T) {
	sc := busy()
	sc.snap.status.Slots[0].Holder = "evil\x1b[2J\x1b]0;title\x07\u202e"
	sc.snap.status.Slots[1].Slot.Attributes = map[string]any{"note": "a\nb\rc\x9b1m"}
	sc.snap.events = append(sc.snap.events, parseEvent(json.RawMessage(`{"at":"x","event":"grant_reset_failed","error":"out\u001b[31mred\n"}`)))
	v := sc.render(plainStyles(), 120, 30, now)
	for _, bad := range []string{"\x1b", "\x07", "\r", "\x9b", "\u202e"} {
		if strings.Contains(v, bad) {
			t.Errorf("the view has %q: %q", bad, v)
		}
	}
	if !strings.Contains(v, "note=a b c\uFFFD1m") || !strings.Contains(v, "out [31mred") {
		t.Errorf("cleaned text missing:\n%s", v)
	}
}

func TestViewBeforeTheFirstReading(t *testing.T) {
	sc := &screen{name: "acme", interval: time.Second}
	if v := sc.render(plainStyles(), 80, 24, now); !strings.Contains(v, "reading the pool…") {
		t.Errorf("%q", v)
	}
	sc.err = errors.New("etcd: unavailable")
	if v := sc.render(plainStyles(), 80, 24, now); !strings.Contains(v, "cannot read the pool: etcd: unavailable") {
		t.Errorf("%q", v)
	}
	// An empty pool log and queue say so.
	sc = busy()
	sc.snap.status.Queue, sc.snap.events, sc.snap.logLen = nil, nil, 0
	v := sc.render(plainStyles(), 80, 24, now)
	for _, want := range []string{"QUEUE empty", "EVENTS none yet"} {
		if !strings.Contains(v, want) {
			t.Errorf("no %q in:\n%s", want, v)
		}
	}
}

func TestModel(t *testing.T) {
	m := newModel(plainStyles(), "acme", 2*time.Second, func() time.Time { return now })
	if m.View() != "" {
		t.Error("a view before the window's size")
	}
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	m.Update(readMsg{snap: busy().snap, at: now})
	if v := m.View(); !strings.Contains(v, "ci-main") {
		t.Errorf("no holder in:\n%s", v)
	}
	// A failed reading keeps the last one on screen and says why.
	m.Update(readMsg{err: errors.New("store gone"), at: now})
	if v := m.View(); !strings.Contains(v, "ci-main") || !strings.Contains(v, "read failed 15:09:26: store gone") {
		t.Errorf("after a failed reading:\n%s", v)
	}
	m.Update(readMsg{snap: busy().snap, at: now})
	if v := m.View(); strings.Contains(v, "read failed") {
		t.Errorf("the error outlived a good reading:\n%s", v)
	}
	if _, cmd := m.Update(tickMsg{}); cmd == nil {
		t.Error("the tick stopped")
	}
	if _, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("x")}); cmd != nil {
		t.Error("x did something")
	}
	for _, k := range []tea.KeyMsg{{Type: tea.KeyRunes, Runes: []rune("q")}, {Type: tea.KeyEsc}, {Type: tea.KeyCtrlC}} {
		m := newModel(plainStyles(), "acme", time.Second, func() time.Time { return now })
		_, cmd := m.Update(k)
		if cmd == nil {
			t.Fatalf("%s does not leave", k)
		}
		if _, ok := cmd().(tea.QuitMsg); !ok {
			t.Errorf("%s does not quit", k)
		}
		if m.View() != "" {
			t.Errorf("%s leaves a view behind", k)
		}
	}
}

func TestParseEvent(t *testing.T) {
	for _, c := range []struct {
		line, name, text string
		tone             tone
	}{
		{`{"at":"2026-03-14T15:09:26.000Z","event":"granted","mode":"async","owner":"a","request_id":"r","slot_id":1}`, "granted", "slot 1 to a (async)", good},
		{`{"at":"2026-03-14T15:09:26.000Z","event":"granted","owner":"a","provisionMs":12,"slot_id":1,"waitedMs":62000}`, "granted", "slot 1 to a waited 1m02s", good},
		{`{"at":"2026-03-14T15:09:26.000Z","event":"slot_quarantined","by":"pool","error":"slot 2: health failed","output":"no db\n","slot_id":2}`, "slot_quarantined", "by pool slot 2: health failed · output: no db", bad},
		{`{"at":"2026-03-14T15:09:26.000Z","event":"released","forced":true,"owner":"op","slot_id":"db-2"}`, "released", "slot db-2 by op (forced)", plain},
		{`{"at":"2026-03-14T15:09:26.000Z","event":"slot_reaped","previous":{"owner":"x","token":"secret"},"slot_id":1}`, "slot_reaped", "slot 1 from x", warn},
		{`{"at":"2026-03-14T15:09:26.000Z","event":"queue_entry_dropped_stale","entry":{"owner":"w","id":"i"}}`, "queue_entry_dropped_stale", "w", warn},
		{`{"at":"2026-03-14T15:09:26.000Z","event":"slot_quarantined","owner":"ops","by":"ops","reason":"disk full","slot_id":"db4"}`, "slot_quarantined", "slot db4 by ops reason: disk full", bad},
		{`{"at":"2026-03-14T15:09:26.000Z","event":"grant_reset_failed","error":"boom","slot_id":2}`, "grant_reset_failed", "slot 2 boom", bad},
		{`{"at":"2026-03-14T15:09:26.000Z","event":"slot_quarantined","reason":"health failed","slot_id":2}`, "slot_quarantined", "slot 2 reason: health failed", bad},
		{`{"at":"2026-03-14T15:09:26.000Z","event":"slot_unquarantined","owner":"op","slot_id":2}`, "slot_unquarantined", "slot 2 by op", good},
		{`{"at":"2026-03-14T15:09:26.000Z","event":"something_new","count":3,"ok":null}`, "something_new", "count=3 ok=", plain},
	} {
		ev := parseEvent(json.RawMessage(c.line))
		if ev.Name != c.name || ev.Text != c.text || ev.Tone != c.tone || !ev.At.Equal(now) {
			t.Errorf("%s: got %+v, want %s %q tone %d", c.line, ev, c.name, c.text, c.tone)
		}
	}
	if strings.Contains(parseEvent(json.RawMessage(`{"event":"slot_reaped","previous":{"token":"secret"}}`)).Text, "secret") {
		t.Error("a previous record without an owner is shown whole")
	}
}

func TestShort(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 0: "0s", 59 * time.Second: "59s", time.Minute: "1m00s", 59*time.Minute + 59*time.Second: "59m59s",
		time.Hour: "1h00m", 25 * time.Hour: "1d01h", 200 * 24 * time.Hour: "200d",
	} {
		if got := short(d); got != want {
			t.Errorf("short(%s) = %q, want %q", d, got, want)
		}
	}
}
