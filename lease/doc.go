// Package lease implements durable, heartbeat-expiring, owner-fenced leases
// kept as small JSON records in a directory shared by the processes of one host.
//
// A lease on a kind (a slug such as "merge-baton" or "slot-1") is held by one
// owner at a time. It expires by itself when its holder stops heartbeating, a
// random fencing token stops a holder that lost it from touching its
// successor's lease, and an expired or unreadable record is taken over loudly
// and journaled. Every mutation of a kind runs in a per-kind critical section,
// so N racing processes see exactly one winner.
//
// The on-disk format and the locking protocol are specified in
// docs/PROTOCOL.md; [Store] is the semantic layer and [Backend] the seam for
// other places to keep records.
package lease
