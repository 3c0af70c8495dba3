package lease_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/lease"
)

// BenchmarkAcquireRelease measures one uncontended acquire plus release on
// one kind: two guarded read-modify-writes of a real store.
func BenchmarkAcquireRelease(b *testing.B) {
	s, err := dirstore.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	req := lease.Request{Kind: "bench", Owner: "bench-owner", TTLMinutes: 1}
	b.ReportAllocs()
	for b.Loop() {
		acq, err := s.Acquire(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Release(ctx, lease.Ref{Kind: req.Kind, Owner: req.Owner, Token: acq.Record.Token}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAcquireReleaseParallel runs acquire plus release from many
// goroutines, each on its own kind, sharing one store directory.
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	s, err := dirstore.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := lease.Request{Kind: fmt.Sprintf("bench-%d", next.Add(1)), Owner: "bench-owner", TTLMinutes: 1}
		for pb.Next() {
			acq, err := s.Acquire(ctx, req)
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := s.Release(ctx, lease.Ref{Kind: req.Kind, Owner: req.Owner, Token: acq.Record.Token}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
