//go:build unix

package dirpool

import (
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// A waiter of this implementation on a directory store has a bell: a FIFO
// <pool>/.bell-<request id> that it reads while it waits, made by the
// waiter and removed when it stops waiting (or, if it died, when its entry
// is dropped as stale). Whoever rewrites queue.json rings the bells of the
// entries that the change moved into, or within, the front of the queue
// (the first len(slots)+[pool.FrontMargin] entries): those are the waiters whose
// turn may have come, or whose position a person may be watching. No one
// else is woken, and an entry's heartbeat, which moves nobody, rings
// nothing. The bells are local to this implementation (docs/PROTOCOL.md
// §6.12): the Node tool neither rings nor reads them, and this
// implementation's waiters still re-check the queue at their poll.
const bellPrefix = ".bell-"

func (d *dirState) bellPath(id string) string { return filepath.Join(d.dir, bellPrefix+id) }

// ring wakes the waiter of entry id, if it has a bell and is reading it:
// a write of one byte, never blocking. A name that is not a FIFO (planted,
// or left by anything else) is opened without being written to; a FIFO
// nobody reads (its waiter died) fails to open (ENXIO) and is left for the
// stale sweep.
func (d *dirState) ring(id string) {
	if pool.CheckRequestID(id) != nil {
		return
	}
	fd, err := unix.Open(d.bellPath(id), unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || uint32(st.Mode)&unix.S_IFMT != unix.S_IFIFO {
		return
	}
	_, _ = unix.Write(fd, []byte{1}) // EAGAIN: rung already and not yet read
}

// TouchEntry implements [entryToucher]: it sets the access time of entry
// id's bell to now, the waiter's sign of life that the next rewrite of the
// queue carries into the entry (refreshBeats). Only a FIFO is touched.
// The access time, not the modification time: a ring (a write by whoever
// rewrote the queue) changes the latter, and must not count as a sign of
// life of a waiter that may be stopped; only the waiter reads its bell.
func (d *dirState) TouchEntry(id string, now time.Time) bool {
	if pool.CheckRequestID(id) != nil {
		return false
	}
	path := d.bellPath(id)
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil || uint32(st.Mode)&unix.S_IFMT != unix.S_IFIFO {
		return false
	}
	t := unix.NsecToTimespec(now.UnixNano())
	return unix.UtimesNanoAt(unix.AT_FDCWD, path, []unix.Timespec{t, t}, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// bellTouched is when entry id's waiter last touched (or read) its bell.
func (d *dirState) bellTouched(id string) (time.Time, bool) {
	if pool.CheckRequestID(id) != nil {
		return time.Time{}, false
	}
	var st unix.Stat_t
	if unix.Lstat(d.bellPath(id), &st) != nil || uint32(st.Mode)&unix.S_IFMT != unix.S_IFIFO {
		return time.Time{}, false
	}
	return time.Unix(st.Atim.Unix()), true
}

// refreshBeats carries the waiters' touches into entries: an entry whose
// stamp is older than olderThan and whose bell was touched since gets the
// time of that touch. A touch later than now (a skewed or planted time) is
// not carried. UpdateQueue carries into the entries that would be judged
// stale before it judges them, and into every entry older than a
// heartbeat period (an eighth of waiterStaleMs) only when it writes the
// queue anyway, so that a change that writes nothing costs no lstat.
func (d *dirState) refreshBeats(entries []pool.Entry, olderThan time.Duration) {
	now := d.h.Store.Now()
	for i := range entries {
		hb, err := lease.ParseTime(entries[i].Heartbeat)
		if err != nil || now.Sub(hb) <= olderThan {
			continue
		}
		if at, ok := d.bellTouched(entries[i].ID); ok && at.After(hb) && !at.After(now) {
			entries[i].Heartbeat = lease.FormatTime(at)
		}
	}
}

// removeBell removes entry id's bell, if it is a FIFO.
func (d *dirState) removeBell(id string) {
	if pool.CheckRequestID(id) != nil {
		return
	}
	path := d.bellPath(id)
	var st unix.Stat_t
	if unix.Lstat(path, &st) == nil && uint32(st.Mode)&unix.S_IFMT == unix.S_IFIFO {
		_ = unix.Unlink(path)
	}
}

// toRing lists the entries of next that a change from prev moved within
// the first window places (or brought there): their waiters are rung.
func toRing(prev, next []pool.Entry, window int) []string {
	at := make(map[string]int, len(prev))
	for i, e := range prev {
		at[e.ID] = i
	}
	var ids []string
	for i, e := range next[:min(len(next), window)] {
		if j, ok := at[e.ID]; !ok || j != i {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

var _ pool.EntryToucher = (*dirState)(nil)
