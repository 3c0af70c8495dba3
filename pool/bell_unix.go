//go:build unix

package pool

import (
	"path/filepath"

	"golang.org/x/sys/unix"
)

// A waiter of this implementation on a directory store has a bell: a FIFO
// <pool>/.bell-<request id> that it reads while it waits, made by the
// waiter and removed when it stops waiting (or, if it died, when its entry
// is dropped as stale). Whoever rewrites queue.json rings the bells of the
// entries that the change moved into, or within, the front of the queue
// (the first len(slots)+[FrontMargin] entries): those are the waiters whose
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
	if !validRequestID(id) {
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

// removeBell removes entry id's bell, if it is a FIFO.
func (d *dirState) removeBell(id string) {
	if !validRequestID(id) {
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
func toRing(prev, next []Entry, window int) []string {
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
