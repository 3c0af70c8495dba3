package etcdstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
)

// TestWatch: a release wakes a watcher of the kind, at once; renewals and
// other kinds do not.
func TestWatch(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	holder, waiter := open(t, c, etcdstore.Options{}), open(t, c, etcdstore.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec, err := acquire(ctx, holder, "db", "holder", 15)
	if err != nil {
		t.Fatal(err)
	}
	wake, err := waiter.Watch(ctx, "db")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := renew(ctx, holder, "db", rec.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := acquire(ctx, holder, "db2", "holder", 15); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
		t.Fatal("woken by a renewal or another kind")
	case <-time.After(200 * time.Millisecond):
	}
	start := time.Now()
	if err := release(ctx, holder, "db", rec.Token); err != nil {
		t.Fatal(err)
	}
	waitWake(t, wake, 5*time.Second, "a release")
	t.Logf("woken %s after the release began", time.Since(start).Round(time.Microsecond))
	if _, err := acquire(ctx, waiter, "db", "waiter", 15); err != nil {
		t.Errorf("acquire after the wake-up: %v", err)
	}
}
