package dirstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/sys/storefile"
	"github.com/durable-lease/durable-lease/lease"
)

// TestFenceGrows: every acquisition and takeover of a kind gets a larger
// fence than any before it, a heartbeat keeps it, a release does not reset
// it, and the record file stays the Node tool's (no fence in it).
func TestFenceGrows(t *testing.T) {
	ctx := context.Background()
	s, clk := newTestStore(t)
	var last int64
	next := func(what string, f int64) {
		t.Helper()
		if f <= last {
			t.Fatalf("%s: fence %d, want more than %d", what, f, last)
		}
		last = f
	}
	a := mustAcquire(t, s, "k", "alice", 1)
	next("first acquire", a.Fence)
	hb, err := s.Heartbeat(ctx, lease.Ref{Kind: "k", Owner: "alice", Token: a.Token})
	if err != nil || hb.Fence != a.Fence {
		t.Fatalf("heartbeat: %v, fence %d, want %d", err, hb.Fence, a.Fence)
	}
	if st, _ := s.Status(context.Background(), "k"); st.Record.Fence != a.Fence {
		t.Fatalf("status fence %d, want %d", st.Record.Fence, a.Fence)
	}
	if _, err := s.Release(ctx, lease.Ref{Kind: "k", Owner: "alice", Token: a.Token}); err != nil {
		t.Fatal(err)
	}
	b := mustAcquire(t, s, "k", "bob", 1)
	next("acquire after a release", b.Fence)
	clk.Advance(2 * time.Minute)
	c, err := s.Acquire(ctx, lease.Request{Kind: "k", Owner: "carol", TTLMinutes: 1})
	if err != nil || !c.TookOverExpired {
		t.Fatalf("takeover: %v", err)
	}
	next("takeover", c.Record.Fence)
	data, err := os.ReadFile(filepath.Join(s.Dir(), "k.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "fence") {
		t.Errorf("the record file carries the fence: %s", data)
	}
	// Another kind counts on its own.
	if o := mustAcquire(t, s, "other", "alice", 1); o.Fence != 1 {
		t.Errorf("first fence of another kind = %d, want 1", o.Fence)
	}
}

// TestFenceAcrossAnotherWriter: a record written by a tool that keeps no
// fence (the Node tool) shows none, even though the counter holds the
// previous holder's number, and taking it over continues above that number.
func TestFenceAcrossAnotherWriter(t *testing.T) {
	ctx := context.Background()
	s, clk := newTestStore(t)
	a := mustAcquire(t, s, "k", "alice", 1)
	clk.Advance(2 * time.Minute)
	node := fmt.Sprintf(`{"v":1,"kind":"k","owner":"node","token":"5b0c6a0e-1111-4222-8333-944445555666","heartbeat":%q,"ttlMinutes":1,"payload":null,"acquiredAt":%q}`,
		lease.FormatTime(clk.Now()), lease.FormatTime(clk.Now()))
	if err := os.WriteFile(filepath.Join(s.Dir(), "k.json"), []byte(node), 0o644); err != nil {
		t.Fatal(err)
	}
	st, _ := s.Status(context.Background(), "k")
	if st.State != lease.Held || st.Record.Fence != 0 {
		t.Fatalf("the Node tool's record: state %s fence %d, want held and no fence", st.State, st.Record.Fence)
	}
	clk.Advance(2 * time.Minute)
	b, err := s.Acquire(ctx, lease.Request{Kind: "k", Owner: "bob", TTLMinutes: 1})
	if err != nil || b.Record.Fence <= a.Fence {
		t.Fatalf("takeover of the Node record: %v, fence %d after %d", err, b.Record.Fence, a.Fence)
	}
}

// TestFenceFileFallback: with more kinds than the store directory's
// attributes can hold (ext4 keeps them in one block), the counters go to
// .fence-<kind> files, and stay monotonic either way.
func TestFenceFileFallback(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := context.Background()
	const kinds = 150
	for round := 1; round <= 2; round++ {
		for i := range kinds {
			kind := fmt.Sprintf("kind-with-a-longish-name-%03d", i)
			a := mustAcquire(t, s, kind, "alice", 1)
			if a.Fence != int64(round) {
				t.Fatalf("%s round %d: fence %d", kind, round, a.Fence)
			}
			if _, err := s.Release(ctx, lease.Ref{Kind: kind, Owner: "alice", Token: a.Token}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestFenceExhausted: a counter set to the largest int64 by hand cannot
// grow; the acquire fails clearly and writes nothing.
func TestFenceExhausted(t *testing.T) {
	s, _ := newTestStore(t)
	if err := os.MkdirAll(s.Dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	mark := fmt.Sprintf(`{"f":%d,"t":"x"}`, int64(math.MaxInt64))
	if err := os.WriteFile(filepath.Join(s.Dir(), ".fence-k"), []byte(mark), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(context.Background(), lease.Request{Kind: "k", Owner: "alice", TTLMinutes: 1}); !errors.Is(err, ErrFenceExhausted) {
		t.Fatalf("acquire = %v, want ErrFenceExhausted", err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), "k.json")); !os.IsNotExist(err) {
		t.Errorf("a record was written: %v", err)
	}
}

// TestFenceCounterHostile: a counter that is there but cannot be read
// refuses the acquisition (starting again from 1 would hand out fences
// lower than ones already given), and so does one over its bound, which
// is not read; a symlink, FIFO or other file this tool never writes is not
// a counter, is never followed, and is replaced.
func TestFenceCounterHostile(t *testing.T) {
	ctx := context.Background()
	t.Run("garbage file", func(t *testing.T) {
		s, _ := newTestStore(t)
		if err := os.MkdirAll(s.Dir(), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.Dir(), ".fence-k"), []byte("not a counter"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := s.Acquire(ctx, lease.Request{Kind: "k", Owner: "alice", TTLMinutes: 1})
		if err == nil || !strings.Contains(err.Error(), "fence counter") {
			t.Fatalf("acquire over a garbage counter = %v, want a refusal naming the counter", err)
		}
		if _, err := os.Stat(filepath.Join(s.Dir(), "k.json")); !os.IsNotExist(err) {
			t.Errorf("a record was written: %v", err)
		}
	})
	t.Run("symlink", func(t *testing.T) {
		s, _ := newTestStore(t)
		if err := os.MkdirAll(s.Dir(), 0o755); err != nil {
			t.Fatal(err)
		}
		secret := filepath.Join(t.TempDir(), "secret")
		if err := os.WriteFile(secret, []byte(`{"f":99,"t":"x"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(secret, filepath.Join(s.Dir(), ".fence-k")); err != nil {
			t.Fatal(err)
		}
		a := mustAcquire(t, s, "k", "alice", 1)
		if a.Fence != 1 {
			t.Errorf("fence %d: the symlink's target was read as a counter", a.Fence)
		}
		if data, _ := os.ReadFile(secret); string(data) != `{"f":99,"t":"x"}` {
			t.Errorf("the symlink's target was written: %q", data)
		}
	})
	t.Run("oversized file", func(t *testing.T) {
		// Over its bound it is not read: it may hold the counter, so it
		// refuses like garbage (before, it was replaced and the fence
		// counted again from 1).
		s, _ := newTestStore(t)
		if err := os.MkdirAll(s.Dir(), 0o755); err != nil {
			t.Fatal(err)
		}
		big := `{"f":99,"t":"` + strings.Repeat("0", 2*maxFenceBytes) + `"}`
		path := filepath.Join(s.Dir(), ".fence-k")
		if err := os.WriteFile(path, []byte(big), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := s.Acquire(ctx, lease.Request{Kind: "k", Owner: "alice", TTLMinutes: 1})
		if !errors.Is(err, storefile.ErrTooLarge) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "256 bytes") {
			t.Fatalf("acquire over a counter file over its bound = %v, want a refusal naming the file and the bound", err)
		}
		if data, _ := os.ReadFile(path); string(data) != big {
			t.Error("the counter file was replaced")
		}
	})
	t.Run("oversized attribute", func(t *testing.T) {
		s, _ := newTestStore(t)
		if err := os.MkdirAll(s.Dir(), 0o755); err != nil {
			t.Fatal(err)
		}
		big := []byte(`{"f":7,"t":"` + strings.Repeat("x", 2*maxFenceBytes) + `"}`)
		if err := setFenceAttr(s.Dir(), fenceAttrPrefix+"k", big); err != nil {
			t.Skipf("no user attributes here: %v", err)
		}
		if _, err := s.Acquire(ctx, lease.Request{Kind: "k", Owner: "alice", TTLMinutes: 1}); err == nil {
			t.Fatal("acquire over an unreadable counter attribute succeeded; the fence could go back")
		}
	})
}
