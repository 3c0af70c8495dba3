package gitstore

import (
	"context"
	"fmt"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// RoundTrip is how long one git call to a remote that answers is assumed
// to take at most: a fetch of one ref, or a push of one small commit, to
// a forge across the internet (a few hundred milliseconds there, tens on
// a LAN, under 200 ms to a git daemon on loopback). The TTL floor counts
// a renewal's two (its fetch and its push) at this bound; a remote
// slower than that needs a longer TTL than the floor.
const RoundTrip = time.Second

// Outage is the longest a remote may be down, restarting or asking to
// wait (HTTP 429 or 5xx) while a lease on it is kept at the TTL floor:
// the span of a read's retries at their longest (250 ms, 500 ms and 1 s,
// each with up to half again). An HTTP server's refusals are tried again
// within it by the store itself; any other failure (a connection
// refused while a daemon restarts) is tried again by the holder after
// its pause, and the remote is assumed to answer again within as long.
var Outage = retrySpan()

// retrySpan is the sum of backoff's longest pauses over a read's
// retries.
func retrySpan() time.Duration {
	var d time.Duration
	for n := 1; n <= maxRetries; n++ {
		p := min(250*time.Millisecond<<(n-1), 2*time.Second)
		d += p + p/2
	}
	return d
}

// serverDateEarly is how much earlier than the server's clock a holder
// over smart HTTP counts its lease lapsed (PROTOCOL §10.6): Dates are
// whole seconds.
const serverDateEarly = time.Second

// RenewalGap implements [lease.RenewalGapper]: how late a renewal may be
// through a fault the store rides out with the lease intact on the
// remote, counted from the confirmation of the renewal before it. An
// [Outage] (a server restarting, a burst of 503s) and then the renewal's
// fetch and push at [RoundTrip] each; and the part of the TTL the
// previous renewal's own round trips took, since the holder counts its
// TTL from the start of that renewal: from its push (the patience rule),
// or over smart HTTP from the read before it, and a second early (the
// server-date rule, PROTOCOL §10.6). It asks the remote nothing.
func (b *Backend) RenewalGap(context.Context) (time.Duration, string) {
	gap := Outage + 2*RoundTrip
	why := fmt.Sprintf("a remote restarting or asking to wait for up to %s, the span of a read's retries, then the renewal's fetch and push at up to %s each", Outage, RoundTrip)
	if b.loc.HTTP {
		gap += 2*RoundTrip + serverDateEarly
		why += fmt.Sprintf(", and the previous renewal's fetch and push and %s more, since a holder over HTTP counts its TTL from the read before its push and the server's Date a second early", serverDateEarly)
	} else {
		gap += RoundTrip
		why += ", and the previous renewal's push, from whose start the holder counts its TTL"
	}
	return gap, why
}

var _ lease.RenewalGapper = (*Backend)(nil)
