package gitstore

import (
	"math"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// RulePatience is the [lease.Liveness.Rule] of a record judged by the
// patience rule.
const RulePatience = "patience"

// Margin is what a contender waits beyond the TTL before it counts a
// record it has watched unchanged as expired: a tenth of the TTL, at
// least a second.
func Margin(ttl time.Duration) time.Duration { return max(ttl/10, time.Second) }

// judge decides whether the record at commit sha is live, as any
// process but its holder must see it, and until when its holder may
// count on it (holder: zero when this host has no write of sha and the
// server's clock does not say).
//
// A record its writer stamped on the server's clock (serverStamped), read
// with the server's Date (smart HTTP), is judged on that clock: it is
// expired once the Date of the read is past the record's expiry plus
// [Margin]; its holder counts it lapsed a second before the server's
// clock can reach the expiry, on its own clock from the moment it sent
// the read (Dates are whole seconds and lag). Every other record is
// judged by the patience rule, and its holder's time by the send time of
// the host's own write (see the package documentation). The holder's
// deadline only ever refuses a renewal: every reader, the holder's own
// host included, is shown the contender's view, so that another process
// on the holder's host cannot take over before the margin is up.
func (b *Backend) judge(kind, sha string, r *lease.Record, srv serverTime, serverStamped bool) (live lease.Liveness, holder time.Time) {
	if r.Corrupt {
		return lease.Liveness{Rule: lease.RuleCorrupt}, time.Time{}
	}
	seenAgo, sentAgo, own := b.obs.observe(kind, sha)
	now := b.clock.Now()
	ttl := r.TTL()
	expiry := r.Heartbeat.Add(ttl)
	// A heartbeat later than the server's time is no honest writer's
	// (it read the server's Date before it wrote): patience decides.
	byServer := serverStamped && srv.known() && !r.Heartbeat.After(srv.date.Add(Margin(ttl)))
	if own {
		holder = now.Add(ttl - sentAgo)
	}
	if byServer {
		if e := srv.at.Add(expiry.Sub(srv.date) - time.Second); holder.IsZero() || e.Before(holder) {
			holder = e
		}
		deadline := expiry.Add(Margin(ttl))
		return lease.Liveness{Live: !srv.date.After(deadline), ExpiresAt: now.Add(deadline.Sub(srv.date)), Rule: RuleServerDate}, holder
	}
	exp := now.Add(addSat(ttl, Margin(ttl)) - seenAgo)
	return lease.Liveness{Live: !now.After(exp), ExpiresAt: exp, Rule: RulePatience}, holder
}

// addSat is a+b for durations that are not negative, at most the largest
// duration (a TTL of centuries plus its margin must not wrap to the past).
func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
