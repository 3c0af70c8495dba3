// Package lease implements durable, heartbeat-expiring, owner-fenced leases
// over a backend that keeps their small JSON records: a directory shared by
// the processes of one host (package dirstore) or an etcd cluster (package
// etcdstore).
//
// A lease on a kind (a slug such as "merge-baton" or "slot-1") is held by one
// owner at a time. It expires by itself when its holder stops heartbeating, a
// random fencing token stops a holder that lost it from touching its
// successor's lease, and an expired or unreadable record is taken over loudly
// and journaled. Every mutation of a kind is one atomic read-modify-write of
// its backend, so N racing processes see exactly one winner.
//
// The on-disk format and the locking protocol are specified in
// docs/PROTOCOL.md; [Store] is the semantic layer, [Backend] the seam for
// places to keep records, and seams.go lists what a backend may add.
package lease
