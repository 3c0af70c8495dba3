package lease

import (
	"context"
	"time"
)

// What the external tests (package lease_test, which run the store over
// a real directory through package dirstore) need of the internals.

// StampForTest is the stamp of a heartbeat.
func (r *Record) StampForTest(wall time.Time, boot *BootStamp) { r.stamp(wall, boot) }

// MaxPayloadBytes is the largest payload a record may carry.
const MaxPayloadBytes = maxPayloadBytes

// fakeEnder is a workEnder of the test's: running says whether a work
// runs, end ends it.
type fakeEnder struct {
	running func(w *Work) bool
	end     func(w *Work) error
}

func (f fakeEnder) Running(w *Work, _ *Record) (bool, error) { return f.running(w), nil }
func (f fakeEnder) End(_ context.Context, w *Work, _ *Record) (int, error) {
	return 1, f.end(w)
}

// SetWorkEnderForTest makes the store find and end works with running
// and end instead of through cgroups.
func (s *Store) SetWorkEnderForTest(running func(w *Work) bool, end func(w *Work) error) {
	s.ender = fakeEnder{running, end}
}
