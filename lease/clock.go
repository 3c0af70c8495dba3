package lease

import (
	"bytes"
	"encoding/json"
	"math"
	"time"
)

// BootStamp is a reading of a clock that wall-clock steps do not move: the
// boot it was taken on (the kernel's boot id, and the time namespace when
// the kernel has them) and the milliseconds since that boot, suspend
// included (CLOCK_BOOTTIME on Linux).
type BootStamp struct {
	ID string
	Ms int64
}

// BootClock is a [Clock] that can also read the boot clock. The real clock
// implements it where the system has one; a fake clock normally does not,
// and the store then judges by the wall clock alone, as the Node tool does.
type BootClock interface {
	Clock
	Boot() (BootStamp, bool)
}

// bootField is the additive record field that pairs a heartbeat with a
// boot-clock reading taken at the same moment. "at" repeats the heartbeat it
// belongs to, so that a writer that updates "heartbeat" and keeps unknown
// fields unchanged (the Node tool does) leaves a stamp that no longer
// matches, and is then ignored.
type bootField struct {
	ID string `json:"id"`
	Ms int64  `json:"ms"`
	At string `json:"at"`
}

// Judgement rules, as [Liveness.Rule] reports them.
const (
	// RuleWall: age is the wall clock now minus the heartbeat.
	RuleWall = "wall"
	// RuleBoot: age is the boot clock now minus the record's boot stamp,
	// used when the two clocks disagree about the age by more than
	// [StepTolerance] (the wall clock was stepped since the heartbeat).
	RuleBoot = "boot"
	// RuleFuture: the heartbeat is further ahead of the wall clock than
	// [MaxFuture] allows; the record is expired.
	RuleFuture = "future"
	// RuleCorrupt: the record cannot be read; it is expired.
	RuleCorrupt = "corrupt"
)

// StepTolerance is how far the wall-clock age and the boot-clock age of a
// record may differ before the store concludes that the wall clock was
// stepped and judges by the boot clock. Below it the two clocks agree up
// to their reading and rounding, and the wall rule (the Node tool's) decides.
const StepTolerance = time.Second

// MaxFutureFloor is the least allowance for a heartbeat ahead of the wall
// clock; see [MaxFuture].
const MaxFutureFloor = time.Minute

// MaxFuture is how far ahead of the wall clock a heartbeat may be and still
// count: the record's TTL, and at least [MaxFutureFloor], so that a small
// backward step of the clock does not expire live holders. A heartbeat
// further ahead is not one this host's clock could have written; the record
// is expired (and can be taken over, loudly). A heartbeat within the
// allowance keeps the lease at most MaxFuture + TTL past the moment it is
// judged, never longer.
func MaxFuture(ttl time.Duration) time.Duration { return max(ttl, MaxFutureFloor) }

// Liveness is the store's judgement of one record at one instant.
type Liveness struct {
	// Live is true while the lease holds.
	Live bool
	// ExpiresAt is the wall-clock instant the lease lapses (or lapsed); the
	// zero time for a corrupt record, and now for a heartbeat too far in
	// the future. Under the boot rule it is the wall clock now plus the
	// time left by the boot clock.
	ExpiresAt time.Time
	// Rule says which rule decided.
	Rule string
}

// Judge decides whether r is live at the wall-clock instant now, with boot
// the boot-clock reading taken at the same moment (nil when there is none).
// The rules, in order (docs/PROTOCOL.md §2.2):
//
//  1. A corrupt record is expired.
//  2. If the record carries a boot stamp from this boot whose "at" equals
//     its heartbeat, and the stamp is not ahead of boot, and the wall-clock
//     age differs from the boot-clock age by more than [StepTolerance], the
//     boot-clock age decides: live while it is at most the TTL.
//  3. Otherwise a heartbeat more than [MaxFuture] ahead of now is expired.
//  4. Otherwise the wall-clock age decides: live while now − heartbeat (in
//     whole milliseconds) is at most the TTL.
func (r *Record) Judge(now time.Time, boot *BootStamp) Liveness {
	if r.Corrupt {
		return Liveness{Rule: RuleCorrupt}
	}
	ttlMs := r.TTLMinutes * 60_000
	wallAge := now.UnixMilli() - r.Heartbeat.UnixMilli()
	if b := r.Boot; b != nil && boot != nil && b.ID == boot.ID && b.Ms <= boot.Ms {
		bootAge := boot.Ms - b.Ms
		if d := wallAge - bootAge; d > StepTolerance.Milliseconds() || d < -StepTolerance.Milliseconds() {
			left := ttlMs - float64(bootAge)
			return Liveness{Live: left >= 0, ExpiresAt: now.Add(msDuration(left)), Rule: RuleBoot}
		}
	}
	if float64(-wallAge) > float64(MaxFuture(r.TTL()).Milliseconds()) {
		return Liveness{ExpiresAt: now, Rule: RuleFuture}
	}
	return Liveness{Live: float64(wallAge) <= ttlMs, ExpiresAt: r.Heartbeat.Add(r.TTL()), Rule: RuleWall}
}

// msDuration converts float milliseconds to a Duration, saturating.
func msDuration(ms float64) time.Duration {
	d := ms * float64(time.Millisecond)
	switch {
	case d >= math.MaxInt64:
		return math.MaxInt64
	case d <= math.MinInt64:
		return math.MinInt64
	}
	return time.Duration(d)
}

// decodeBoot reads the "boot" field strictly; anything else is not ours and
// stays an extra field.
func decodeBoot(raw json.RawMessage, heartbeat string) (*BootStamp, bool) {
	var f bootField
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil || f.ID == "" || f.Ms < 0 || f.At == "" {
		return nil, false
	}
	if f.At != heartbeat {
		// Rewritten by a writer that kept the field: the stamp belongs to
		// an older heartbeat. Not trusted, not kept.
		return nil, true
	}
	return &BootStamp{ID: f.ID, Ms: f.Ms}, true
}

// stamp sets the record's heartbeat to wall (truncated to the millisecond,
// as stored) and its boot stamp to boot, or clears it when there is none.
func (r *Record) stamp(wall time.Time, boot *BootStamp) {
	r.Heartbeat = wall.UTC().Truncate(time.Millisecond)
	if boot != nil {
		b := *boot
		r.Boot = &b
	} else {
		r.Boot = nil
	}
	delete(r.Extra, "boot")
}

// instant reads the store's clock: the wall time, and the boot clock when
// the clock has one.
func (s *Store) instant() (time.Time, *BootStamp) {
	now := s.opts.clock.Now()
	if bc, ok := s.opts.clock.(BootClock); ok {
		if b, ok := bc.Boot(); ok {
			return now, &b
		}
	}
	return now, nil
}

// WallClock is the wall clock.
type WallClock struct{}

// Now is time.Now.
func (WallClock) Now() time.Time { return time.Now() }
