// Package dirstore keeps leases in a directory shared by the processes of
// one host: a [lease.Backend] whose records are small JSON files, whose
// critical sections are guard directories held with a flock, whose fences
// are kept beside the records, and whose waiters wake on inotify and line
// up behind a flock (docs/PROTOCOL.md §1 to §5 and §7), and a
// [pool.Backend] whose queue, statistics, grants, nudges and log are the
// files of <store>/<pool name>/ (§6).
//
// [Open] returns a [lease.Store] over a directory; [NewBackend] the
// backend alone, for a caller that wraps it; [ClaimHostStore] keeps two
// stores on one host from serving the same pool (§6.11). The directory is created by
// the first change, mode 0700 (or 2770 in a group store), and one that
// another user could have planted is refused ([ErrUnsafeStore]).
package dirstore
