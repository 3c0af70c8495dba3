package dirstore

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// TestOpenWithOptions: a negative guard wait or stale age is refused
// before anything is made; zero is the default.
func TestOpenWithOptions(t *testing.T) {
	for name, o := range map[string]Options{
		"negative guard wait":  {GuardWait: -time.Second},
		"negative guard stale": {GuardStale: -time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			if _, err := OpenWith(dir, o); !errors.Is(err, lease.ErrInvalid) {
				t.Errorf("OpenWith(%+v) = %v, want ErrInvalid", o, err)
			}
			if exists(t, dir) {
				t.Error("OpenWith created the store")
			}
		})
	}
	b, err := NewBackend(filepath.Join(t.TempDir(), "store"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b.guard.wait != DefaultGuardWait || b.guard.stale != DefaultGuardStale {
		t.Errorf("zero Options gave guard %+v, want the defaults %v and %v", b.guard, DefaultGuardWait, DefaultGuardStale)
	}
	b, err = NewBackend(filepath.Join(t.TempDir(), "store"), Options{GuardWait: time.Second, GuardStale: time.Minute})
	if err != nil || b.guard.wait != time.Second || b.guard.stale != time.Minute {
		t.Errorf("NewBackend with a guard of 1s and 1m = %+v, %v", b, err)
	}
}
