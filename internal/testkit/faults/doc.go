// Package faults holds the fault matrix of docs/RELIABILITY.md: faults an
// etcd cluster survives (its leader or a follower killed, hung, restarted;
// a compaction and a defragmentation) and faults it does not (quorum
// lost, the clients partitioned from every member), each injected into a
// real three-member cluster while a lease holder, pool-run (a baton and a
// pool slot) and waiters (lease acquire --wait-ms, pool acquire) hold and
// wait, at the shortest TTL pool-run keeps and at the default one. The
// first kind must cost nobody anything but a late renewal; the second
// must end every holder's work before its lease could lapse on the
// cluster. The package has tests only; FAULTS=long runs five trials of
// each fault and reports the median time to the first renewal after it.
package faults
