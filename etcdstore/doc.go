// Package etcdstore keeps leases on etcd: a [lease.Backend] and
// [lease.Watcher] whose liveness, expiry and fences are decided by the
// cluster, not by a client clock.
//
// Each kind has three keys under the store's prefix (docs/PROTOCOL.md §8):
// a persistent record (the directory store's record JSON), a persistent
// fence key whose mod revision is the acquisition's fence, and a liveness
// key bound to an etcd lease with the record's TTL. A record whose liveness
// key is gone (its etcd lease expired or was revoked) stays visible, and
// reads as expired until it is reaped or taken over. Every change is one
// transaction comparing the mod revisions read, so racing clients get one
// winner; a renewal is a keep-alive of the etcd lease plus such a
// transaction, and a lapsed etcd lease is never revived.
//
// Stores never nest: each registers its prefix under [RegistryPrefix],
// outside every store's keys, on its first open, and a store whose prefix
// is inside a registered one's or around one is refused
// ([ErrNestedStore]), since one's pruning would delete the other's keys.
package etcdstore
