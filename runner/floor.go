package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// renewalAllowance is how late a renewal may be on a loaded host
// (lease.RenewalAllowance).
const renewalAllowance = lease.RenewalAllowance

// minGrace is the shortest SIGTERM grace the guardian gives the work
// before its SIGKILL when renewals stop: at the shortest TTL a run keeps,
// all that is left of the TTL once a late renewal has had its chance.
const minGrace = 100 * time.Millisecond

// budget is how a run spends a lease's TTL after a confirmed renewal:
// the next one is due an interval later and may be late by the store's
// gap (a fault the store rides out) and the allowance (a loaded host);
// only then may the guardian send the work SIGTERM, a grace before its
// SIGKILL, which comes a margin before the time the lease is safely held
// until, itself the store's margin before the confirmed expiry:
//
//	renewal ─ interval ─ gap ─ allowance ─ [room] ─ SIGTERM ─ grace ─ SIGKILL ─ margin ─ until ─ storeMargin ─ expiry
//
// The room left over is what the grace may take; a TTL whose room is
// shorter than minGrace cannot be kept: every fault the store survives
// would stop the work as if pool-run had hung.
type budget struct {
	ttl, interval, killGrace time.Duration
	storeMargin              time.Duration // the Hold gives up this long before the confirmed expiry
	gap                      time.Duration // how late a renewal may be through a fault the store rides out
	gapWhy                   string
}

// Bounds of the guardian's own deadline: the margin before the lease's
// confirmed expiry at which it kills the work.
const (
	minMargin = 100 * time.Millisecond
	maxMargin = 2 * time.Second
)

// guard is the guardian's margin and the watchdog's grace: the margin (a
// tenth of the TTL, within bounds, at most a quarter of what a heartbeat
// interval leaves) leaves time for SIGKILL to land before anyone else can
// be granted the lease, on a loaded machine too; the grace is the kill
// grace at most, half of what the interval leaves at most, and never so
// long that the SIGTERM would come before a renewal late by the store's
// gap and the allowance: at short TTLs the grace is the room that is
// left, down to minGrace at the floor (and nothing below it).
func (b budget) guard() (margin, grace time.Duration) {
	slack := max(b.ttl-b.interval, 0)
	margin = min(max(b.ttl/10, minMargin), maxMargin, slack/4)
	grace = min(b.killGrace, slack/2, max(b.room(margin), 0))
	return margin, grace
}

// room is the time between a renewal late by the gap and the allowance
// and the guardian's SIGKILL: what the SIGTERM grace may take.
func (b budget) room(margin time.Duration) time.Duration {
	return b.ttl - b.storeMargin - margin - b.interval - b.gap - renewalAllowance
}

// keepable reports whether a run can keep the lease: a renewal late by
// the store's gap and the allowance still lands before the guardian
// would begin to stop the work, with at least minGrace of room left.
func (b budget) keepable() bool {
	if b.interval >= b.ttl {
		return false
	}
	margin, _ := b.guard()
	return b.room(margin) >= minGrace
}

// storeTimes are a store's parts of a budget: its expiry margin
// (lease.ExpiryMarginer: none for a store whose holder's own clock
// decides) and its renewal gap (lease.RenewalGapper: none for a store
// whose renewals wait for nothing but the host).
type storeTimes struct {
	margin func(ttl time.Duration) time.Duration
	gap    time.Duration
	gapWhy string
}

func storeTimesOf(s *lease.Store) storeTimes {
	st := storeTimes{margin: func(time.Duration) time.Duration { return 0 }, gapWhy: "a renewal waits for nothing but the host"}
	if m, ok := s.Backend().(lease.ExpiryMarginer); ok {
		st.margin = m.ExpiryMargin
	}
	if g, ok := s.Backend().(lease.RenewalGapper); ok {
		st.gap, st.gapWhy = g.RenewalGap(context.Background())
	}
	return st
}

// budget is the budget of a lease of ttl renewed every interval (0:
// ttl/8) with killGrace.
func (st storeTimes) budget(ttl, interval, killGrace time.Duration) budget {
	if interval <= 0 {
		interval = max(ttl/8, lease.MinBeatInterval)
	}
	return budget{ttl: ttl, interval: interval, killGrace: killGrace,
		storeMargin: st.margin(ttl), gap: st.gap, gapWhy: st.gapWhy}
}

// floor is the shortest TTL keepable with interval (0: TTL/8) and
// killGrace, to 10 ms, by trying TTLs in turn (keepable grows with the
// TTL), up to an hour.
func (st storeTimes) floor(interval, killGrace time.Duration) time.Duration {
	for ttl := 10 * time.Millisecond; ttl <= time.Hour; ttl += 10 * time.Millisecond {
		if st.budget(ttl, interval, killGrace).keepable() {
			return ttl
		}
	}
	return time.Hour
}

// MinTTL is the shortest TTL, in minutes, a run with o's heartbeat and
// kill grace can keep on o's store (see docs/POOL-RUN.md, "The shortest
// TTL").
func MinTTL(o Options) float64 {
	if o.KillGrace == 0 {
		o.KillGrace = DefaultKillGrace
	}
	return storeTimesOf(o.Store).floor(o.Heartbeat, o.KillGrace).Minutes()
}

// checkFloor refuses a TTL the run cannot keep, naming the shortest it
// can and why.
func (o *Options) checkFloor(ttl time.Duration) error {
	st := storeTimesOf(o.Store)
	b := st.budget(ttl, o.Heartbeat, o.KillGrace)
	if b.keepable() {
		return nil
	}
	floor := st.floor(o.Heartbeat, o.KillGrace)
	hb := "TTL/8"
	if o.Heartbeat > 0 {
		hb = o.Heartbeat.String()
	}
	late := fmt.Sprintf("a renewal may be %s late on a loaded host", renewalAllowance)
	if b.gap > 0 {
		late = fmt.Sprintf("a renewal may be %s late through a fault the store rides out (%s), and %s more on a loaded host", b.gap, b.gapWhy, renewalAllowance)
	}
	return fmt.Errorf("%w: ttl %s is shorter than pool-run can keep with a heartbeat of %s on this store: %s, and the guardian must still be able to stop the work before the lease could lapse; the shortest it keeps is %s (%.4g minutes)",
		ErrInvalid, ttl, hb, late, floor, floor.Minutes())
}
