package runner

import (
	"fmt"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// renewalAllowance is how long a heartbeat may take on a loaded host,
// from its start to its confirmation, for the TTL floor: a directory
// store's takes well under a millisecond idle, tens of milliseconds when
// the host is saturated, and a heartbeat goroutine may wait its turn for
// a CPU that long again.
const renewalAllowance = 250 * time.Millisecond

// keepable reports whether a run can keep a lease of ttl heartbeated
// every interval (0: ttl/8) on a store whose holder gives up storeMargin
// before the confirmed expiry: the next heartbeat, and the time it takes,
// must fit before the guardian's own deadline (it sends the work SIGTERM
// a grace before the time the lease is safely held until, and SIGKILL a
// margin before it; see guardTimes), or every run would be stopped as if
// its pool-run had hung.
func keepable(ttl, interval, killGrace time.Duration, storeMargin func(time.Duration) time.Duration) bool {
	if interval <= 0 {
		interval = max(ttl/8, lease.MinBeatInterval)
	}
	if interval >= ttl {
		return false
	}
	until := ttl - storeMargin(ttl)
	margin, watchGrace := guardTimes(ttl, interval, killGrace)
	return interval+renewalAllowance <= until-margin-watchGrace
}

// ttlFloor is the shortest TTL a run keeps with these settings, to 10 ms,
// by trying TTLs in turn (keepable grows with the TTL), up to an hour.
func ttlFloor(interval, killGrace time.Duration, storeMargin func(time.Duration) time.Duration) time.Duration {
	for ttl := 10 * time.Millisecond; ttl <= time.Hour; ttl += 10 * time.Millisecond {
		if keepable(ttl, interval, killGrace, storeMargin) {
			return ttl
		}
	}
	return time.Hour
}

// storeMarginOf is the store's expiry margin (lease.ExpiryMarginer), none
// for a store whose holder's own clock decides.
func storeMarginOf(s *lease.Store) func(time.Duration) time.Duration {
	if m, ok := s.Backend().(lease.ExpiryMarginer); ok {
		return m.ExpiryMargin
	}
	return func(time.Duration) time.Duration { return 0 }
}

// MinTTL is the shortest TTL, in minutes, a run with o's heartbeat and
// kill grace can keep on o's store (see docs/POOL-RUN.md, "The shortest
// TTL").
func MinTTL(o Options) float64 {
	if o.KillGrace == 0 {
		o.KillGrace = DefaultKillGrace
	}
	return ttlFloor(o.Heartbeat, o.KillGrace, storeMarginOf(o.Store)).Minutes()
}

// checkFloor refuses a TTL the run cannot keep, naming the shortest it can.
func (o *Options) checkFloor(ttl time.Duration) error {
	margin := storeMarginOf(o.Store)
	if keepable(ttl, o.Heartbeat, o.KillGrace, margin) {
		return nil
	}
	floor := ttlFloor(o.Heartbeat, o.KillGrace, margin)
	hb := "TTL/8"
	if o.Heartbeat > 0 {
		hb = o.Heartbeat.String()
	}
	return fmt.Errorf("%w: ttl %s is shorter than pool-run can keep with a heartbeat of %s on this store: the guardian would stop the work before the next heartbeat could land; the shortest it keeps is %s (%.4g minutes)",
		ErrInvalid, ttl, hb, floor, floor.Minutes())
}
