package lease

import (
	"context"
	"fmt"
	"time"
)

// RenewalAllowance is how late a renewal may be on a loaded host, from
// its start to its confirmation: a directory store's takes well under a
// millisecond idle, tens of milliseconds when the host is saturated, and
// a heartbeat goroutine may wait its turn for a CPU that long again. It
// is a directory store's whole allowance (its renewals wait for nothing
// but the scheduler and the disk); other stores add the gap of the
// faults they ride out ([RenewalGapper]).
const RenewalAllowance = 250 * time.Millisecond

// RenewalFloor is the shortest TTL a holder that renews at once can keep
// on s through the faults the store rides out: a renewal late by the
// store's [RenewalGapper] gap and [RenewalAllowance] must still land
// before the expiry less the store's [ExpiryMarginer] margin. It is 0,
// with why "", for a store without a renewal gap (a directory store: its
// floor is MinTTLMinutes). Asking may cost the store a request (etcd
// learns its election timeout once per connection); cancelling ctx makes
// the store assume its default.
func (s *Store) RenewalFloor(ctx context.Context) (floor time.Duration, why string) {
	g, ok := s.b.(RenewalGapper)
	if !ok {
		return 0, ""
	}
	gap, gapWhy := g.RenewalGap(ctx)
	margin := func(time.Duration) time.Duration { return 0 }
	if m, ok := s.b.(ExpiryMarginer); ok {
		margin = m.ExpiryMargin
	}
	for ttl := 10 * time.Millisecond; ttl <= time.Hour; ttl += 10 * time.Millisecond {
		if ttl-margin(ttl) >= gap+RenewalAllowance {
			floor = ttl
			break
		}
	}
	giveUp := fmt.Sprintf("the holder gives up %s before the expiry", margin(floor))
	if margin(floor) == 0 {
		giveUp = "it must land before the expiry"
	}
	return floor, fmt.Sprintf("a renewal may be %s late through a fault the store rides out (%s) and %s more on a loaded host, and %s",
		gap, gapWhy, RenewalAllowance, giveUp)
}
