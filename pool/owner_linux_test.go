package pool_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// storeTree is everything a store directory holds: each entry's name,
// type, permissions and contents, and the extended attributes of each
// (where the fence counters are kept).
func storeTree(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		fmt.Fprintf(&b, "%s %v", rel, info.Mode())
		if info.Mode().IsRegular() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %q", data)
		}
		buf := make([]byte, 4096)
		if n, err := unix.Llistxattr(path, buf); err == nil && n > 0 {
			names := strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00")
			sort.Strings(names)
			for _, name := range names {
				val := make([]byte, 4096)
				m, _ := unix.Lgetxattr(path, name, val)
				fmt.Fprintf(&b, " %s=%q", name, val[:max(m, 0)])
			}
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestRefusedOwnerLeavesTheStoreAlone: a step refused because the request
// is another owner's changes nothing in the store, byte for byte: no
// sweep, no heartbeat, no queue lock taken (whose fence would move), no
// log line, no slot lease.
func TestRefusedOwnerLeavesTheStoreAlone(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tp := newTestPool(t, oneSlotPool, pool.Options{})
	q, err := tp.Request(ctx, "ci-alice", "")
	if err != nil {
		t.Fatal(err)
	}
	id := q.RequestID
	steps := []struct {
		name string
		call func() error
	}{
		{"heartbeat-entry", func() error { _, err := tp.HeartbeatEntry(ctx, id, "ci-mallory"); return err }},
		{"try-grant", func() error { _, err := tp.TryGrant(ctx, id, "ci-mallory"); return err }},
		{"withdraw", func() error { return tp.Withdraw(ctx, id, "ci-mallory") }},
		{"waiter", func() error { _, err := tp.Wait(ctx, id, "ci-mallory", time.Second); return err }},
	}
	check := func(stage string) {
		t.Helper()
		for _, s := range steps {
			before := storeTree(t, tp.store)
			tp.clock.Advance(time.Second) // a heartbeat would show
			if err := s.call(); !errors.Is(err, lease.ErrNotOwner) {
				t.Errorf("%s: %s by another owner = %v, want ErrNotOwner", stage, s.name, err)
			}
			if after := storeTree(t, tp.store); after != before {
				t.Errorf("%s: a refused %s changed the store:\nbefore:\n%s\nafter:\n%s", stage, s.name, before, after)
			}
			if _, err := tp.HeartbeatEntry(ctx, id, "ci-alice"); err != nil && !errors.Is(err, pool.ErrGranted) {
				t.Fatalf("%s: alice's heartbeat: %v", stage, err)
			}
		}
	}
	check("queued")
	g, err := tp.TryGrant(ctx, id, "ci-alice")
	if err != nil {
		t.Fatal(err)
	}
	steps = append(steps, struct {
		name string
		call func() error
	}{"claim", func() error { _, err := tp.Claim(ctx, id, "ci-mallory"); return err }})
	check("granted")
	if tp.slotState(t, "1") != lease.Held {
		t.Errorf("slot 1 is %s, want held by alice", tp.slotState(t, "1"))
	}
	if _, err := tp.Release(ctx, "1", g.Owner, g.Token, false); err != nil {
		t.Fatal(err)
	}
}
