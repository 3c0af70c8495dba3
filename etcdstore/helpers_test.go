package etcdstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
	"github.com/durable-lease/durable-lease/lease"
)

// testPrefix is a store prefix named after the test.
func testPrefix(t testing.TB) string {
	return "t/" + regexp.MustCompile(`[^A-Za-z0-9._-]+`).ReplaceAllString(t.Name(), "-")
}

// open connects a backend to c under the test's prefix, closed at cleanup.
func open(t testing.TB, c *etcdtest.Cluster, opts etcdstore.Options) *etcdstore.Backend {
	t.Helper()
	b, err := etcdstore.NewBackend(context.Background(), c.URL(testPrefix(t)), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// newRecord is a fresh incarnation of kind, as Store.Acquire builds one.
func newRecord(b *etcdstore.Backend, kind, owner string, ttlMinutes float64) *lease.Record {
	now := b.Now().UTC().Truncate(time.Millisecond)
	return &lease.Record{
		V: lease.RecordVersion, Kind: kind, Owner: owner, Token: lease.NewToken(),
		Heartbeat: now, AcquiredAt: now, TTLMinutes: ttlMinutes,
		Payload: json.RawMessage(`{"by":"` + owner + `"}`),
	}
}

// errHeld is a refusal of an acquire by a live record.
var errHeld = errors.New("held")

// acquire takes kind as Store.Acquire decides: a live record refuses, a
// dead one is taken over with a takeover event.
func acquire(ctx context.Context, b *etcdstore.Backend, kind, owner string, ttlMinutes float64) (*lease.Record, error) {
	return b.Update(ctx, kind, func(cur *lease.Record) (lease.Change, error) {
		if cur != nil && cur.Seen.Live {
			return lease.Change{}, errHeld
		}
		ch := lease.Change{Op: lease.OpAcquire, Record: newRecord(b, kind, owner, ttlMinutes)}
		if cur != nil {
			ch.Event = &lease.Event{Event: lease.EventTakeover, Kind: kind, By: owner, Previous: cur}
		}
		return ch, nil
	})
}

// renew heartbeats the holder of token as Store.Heartbeat decides.
func renew(ctx context.Context, b *etcdstore.Backend, kind, token string) (*lease.Record, error) {
	return b.Update(ctx, kind, func(cur *lease.Record) (lease.Change, error) {
		switch {
		case cur == nil:
			return lease.Change{}, lease.ErrNotHeld
		case cur.Token != token:
			return lease.Change{}, lease.ErrNotOwner
		case !cur.Seen.Live:
			return lease.Change{}, lease.ErrExpired
		}
		next := *cur
		next.Heartbeat = b.Now().UTC().Truncate(time.Millisecond)
		return lease.Change{Op: lease.OpRenew, Record: &next}, nil
	})
}

// release deletes the record of token.
func release(ctx context.Context, b *etcdstore.Backend, kind, token string) error {
	_, err := b.Update(ctx, kind, func(cur *lease.Record) (lease.Change, error) {
		if cur == nil || cur.Token != token {
			return lease.Change{}, lease.ErrNotOwner
		}
		return lease.Change{Op: lease.OpDelete}, nil
	})
	return err
}

// waitWake waits for a value from a Watch channel.
func waitWake(t testing.TB, wake <-chan struct{}, within time.Duration, what string) {
	t.Helper()
	select {
	case <-wake:
	case <-time.After(within):
		t.Fatalf("no wake-up within %s after %s", within, what)
	}
}

func noSecret(t testing.TB, err error, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if err != nil && strings.Contains(err.Error(), s) {
			t.Errorf("error shows a secret: %v", err)
		}
	}
}
