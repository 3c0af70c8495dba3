//go:build unix

package gitstore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/testkit/storetest"
	"github.com/durable-lease/durable-lease/lease"
)

// processStore is a store as one CLI call has it: a backend of its own
// (nothing in memory from an earlier call) on the host's state directory.
func (h *harness) processStore(t *testing.T, url, stateDir string) *lease.Store {
	t.Helper()
	b, err := NewBackend(url, Options{StateDir: stateDir}, lease.WithClock(h.clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return h.store(t, b)
}

// TestSightingsOutliveTheProcess: a contender's watch spans its calls,
// each a process of its own, through the state directory. Without it
// each call would see the tip for the first time and never take over.
func TestSightingsOutliveTheProcess(t *testing.T) {
	t.Parallel()
	url := "git+file://" + bareRepo(t)
	h := &harness{clock: storetest.NewFakeClock(storetest.T0)}
	holderHost, contenderHost := t.TempDir(), t.TempDir()
	a, err := h.processStore(t, url, holderHost).Acquire(bg, lease.Request{Kind: "k", Owner: "conf-a", TTLMinutes: ttlMinutes})
	if err != nil {
		t.Fatal(err)
	}
	ttl := time.Minute
	if st, err := h.processStore(t, url, contenderHost).Status(bg, "k"); err != nil || st.State != lease.Held {
		t.Fatalf("first sight: %+v %v, want held", st, err)
	}
	h.clock.Advance(ttl + Margin(ttl) + time.Second)
	// A later call on the contender's host counts from the first sight.
	if st, err := h.processStore(t, url, contenderHost).Status(bg, "k"); err != nil || st.State != lease.Unknown {
		t.Fatalf("a later call after TTL+margin: %+v %v, want unknown", st, err)
	}
	// Memory alone (no state directory) starts the watch again.
	if st, err := h.processStore(t, url, "").Status(bg, "k"); err != nil || st.State != lease.Held {
		t.Fatalf("a call without a state directory: %+v %v, want held", st, err)
	}
	got, err := h.processStore(t, url, contenderHost).Acquire(bg, lease.Request{Kind: "k", Owner: "conf-b", TTLMinutes: ttlMinutes})
	if err != nil || !got.TookOverExpired || got.Previous == nil || got.Previous.Token != a.Record.Token {
		t.Fatalf("takeover by a later call: %+v %v", got, err)
	}
}

// TestOwnWriteOutlivesTheProcess: the send time of the host's own write
// outlives the process that made it, and refuses a later call's renewal
// once the TTL from the send is up (no revival); but it is the holder's
// deadline only. Any other process on the host sees the contender's view
// (TTL plus margin from the confirmed write) and cannot take over before
// the margin is up: when the holder's deadline served everyone on its
// host, a neighbour took over the moment the holder's TTL ran out.
func TestOwnWriteOutlivesTheProcess(t *testing.T) {
	t.Parallel()
	url := "git+file://" + bareRepo(t)
	h := &harness{clock: storetest.NewFakeClock(storetest.T0)}
	host := t.TempDir()
	sent := h.clock.Now()
	a, err := h.processStore(t, url, host).Acquire(bg, lease.Request{Kind: "k", Owner: "conf-a", TTLMinutes: ttlMinutes})
	if err != nil {
		t.Fatal(err)
	}
	ttl := time.Minute
	if want := sent.Add(ttl); !a.Record.Seen.ExpiresAt.Equal(want) {
		t.Fatalf("the holder's deadline %s, want the send time plus the TTL, %s", a.Record.Seen.ExpiresAt, want)
	}
	h.clock.Advance(ttl / 2)
	st, err := h.processStore(t, url, host).Status(bg, "k")
	if err != nil || st.State != lease.Held {
		t.Fatalf("half a TTL on: %+v %v, want held", st, err)
	}
	if want := sent.Add(ttl + Margin(ttl)); !st.Record.Seen.ExpiresAt.Equal(want) {
		t.Fatalf("another process's view expires at %s, want the TTL and margin from the write, %s", st.Record.Seen.ExpiresAt, want)
	}
	h.clock.Advance(ttl/2 + time.Second) // past the holder's TTL, inside the margin
	if _, err := h.processStore(t, url, host).Heartbeat(bg, a.Record.Ref()); !errors.Is(err, lease.ErrExpired) {
		t.Fatalf("a later call's heartbeat past the TTL from the send: %v, want ErrExpired (never revived)", err)
	}
	_, err = h.processStore(t, url, host).Acquire(bg, lease.Request{Kind: "k", Owner: "conf-b", TTLMinutes: ttlMinutes})
	if !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("a neighbour's acquire inside the margin: %v, want held", err)
	}
	h.clock.Advance(Margin(ttl))
	if st, _ := h.processStore(t, url, host).Status(bg, "k"); st.State != lease.Unknown {
		t.Fatalf("past the TTL and margin: %s, want unknown", st.State)
	}
}

// TestUntrustedStateStartsAgain: a state directory someone else can
// write to, a planted symbolic link, a corrupt file or a sighting from
// the future (the wall clock set back) are never believed: the watch
// starts again, which only delays a takeover.
func TestUntrustedStateStartsAgain(t *testing.T) {
	t.Parallel()
	url := "git+file://" + bareRepo(t)
	h := &harness{clock: storetest.NewFakeClock(storetest.T0)}
	if _, err := h.processStore(t, url, t.TempDir()).Acquire(bg, lease.Request{Kind: "k", Owner: "conf-a", TTLMinutes: ttlMinutes}); err != nil {
		t.Fatal(err)
	}
	ttl := time.Minute
	store := mustParse(t, url).String()
	cases := map[string]func(t *testing.T, dir string){
		"untouched (the control: the watch holds)": nil,
		"world-writable directory": func(t *testing.T, dir string) {
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
		},
		"symbolic link": func(t *testing.T, dir string) {
			elsewhere := filepath.Join(t.TempDir(), "planted.json")
			if err := os.Rename(stateFile(dir, store), elsewhere); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, stateFile(dir, store)); err != nil {
				t.Fatal(err)
			}
		},
		"corrupt file": func(t *testing.T, dir string) {
			if err := os.WriteFile(stateFile(dir, store), []byte(`{"store":`), 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"sighting from the future": func(t *testing.T, dir string) {
			data, err := os.ReadFile(stateFile(dir, store))
			if err != nil {
				t.Fatal(err)
			}
			kinds := decodeState(data, store)
			s := kinds["k"]
			s.Seen.Ns += int64(24 * time.Hour)
			kinds["k"] = s
			data, _ = encodeState(store, kinds)
			if err := os.WriteFile(stateFile(dir, store), data, 0o600); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			if st, err := h.processStore(t, url, dir).Status(bg, "k"); err != nil || st.State != lease.Held {
				t.Fatalf("first sight: %+v %v", st, err)
			}
			if spoil != nil {
				spoil(t, dir)
			}
			// The stores of the subtests share one clock: advancing it
			// would race with them, so each judges at its own instant.
			b, err := NewBackend(url, Options{StateDir: dir}, lease.WithClock(storetest.NewFakeClock(h.clock.Now().Add(ttl+Margin(ttl)+time.Second))))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			r, err := b.Read(bg, "k")
			switch {
			case err != nil || r == nil:
				t.Fatalf("read: %+v %v", r, err)
			case spoil == nil && r.Seen.Live:
				t.Fatal("after TTL+margin on an untouched state: live, want expired")
			case spoil != nil && !r.Seen.Live:
				t.Fatal("after TTL+margin with the state spoilt: expired, want live (the watch starts again)")
			}
		})
	}
}

func mustParse(t *testing.T, url string) Location {
	t.Helper()
	l, err := ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
