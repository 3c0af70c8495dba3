// Package dirstore keeps leases in a directory shared by the processes of
// one host: a [lease.Backend] whose records are small JSON files, whose
// critical sections are guard directories held with a flock, whose fences
// are kept beside the records, and whose waiters wake on inotify and line
// up behind a flock (docs/PROTOCOL.md §1 to §5 and §7). Its pools' files
// (§6) are package dirstore/dirpool's, so that a program that keeps
// leases only does not link package pool.
//
// [Open] returns a [lease.Store] over a directory; [NewBackend] the
// backend alone, for a caller that wraps it. The directory is created by
// the first change, mode 0700 (a group store is one made by hand, 2770),
// and one that another user could have planted is refused
// ([ErrUnsafeStore]).
package dirstore
