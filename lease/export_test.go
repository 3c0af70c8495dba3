package lease

import "time"

// What the external tests (package lease_test, which run the store over
// a real directory through package dirstore) need of the internals.

// StampForTest is the stamp of a heartbeat.
func (r *Record) StampForTest(wall time.Time, boot *BootStamp) { r.stamp(wall, boot) }

// MaxPayloadBytes is the largest payload a record may carry.
const MaxPayloadBytes = maxPayloadBytes
