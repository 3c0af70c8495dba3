package lease

import (
	"time"
)

// Clock tells the time. Tests inject a fake one so expiry needs no sleeping.
type Clock interface {
	Now() time.Time
}

// Option configures a [Store].
type Option func(*options) error

type options struct {
	clock        Clock
	owners       *OwnerFence
	guard        guardConfig
	pollInterval time.Duration
}

// DefaultPollInterval is how often a waiter re-reads a held lease when no
// filesystem event arrives. Events normally wake it within milliseconds;
// the poll only covers a missed event or a store where events are
// unavailable.
const DefaultPollInterval = 250 * time.Millisecond

func defaultOptions() options {
	return options{
		clock:        realClock{},
		owners:       &OwnerFence{text: DefaultOwnerPattern},
		guard:        guardConfig{wait: DefaultGuardWait, stale: DefaultGuardStale},
		pollInterval: DefaultPollInterval,
	}
}

// WithClock sets the clock used for heartbeats and expiry. It must not be nil.
func WithClock(c Clock) Option {
	return func(o *options) error {
		if c == nil {
			return invalidf("nil clock")
		}
		o.clock = c
		return nil
	}
}

// WithOwnerPattern fences the store to owners matching an anchored regular
// expression; "" keeps [DefaultOwnerPattern].
func WithOwnerPattern(pattern string) Option {
	return func(o *options) error {
		f, err := NewOwnerFence(pattern)
		if err != nil {
			return err
		}
		o.owners = f
		return nil
	}
}

// WithGuardWait bounds how long a mutation waits for a kind's critical section.
func WithGuardWait(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return invalidf("guard wait %s must be positive", d)
		}
		o.guard.wait = d
		return nil
	}
}

// WithGuardStale sets the age past which an unidentifiable guard is judged
// abandoned. Keep it far above any plausible hold.
func WithGuardStale(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return invalidf("guard stale age %s must be positive", d)
		}
		o.guard.stale = d
		return nil
	}
}

// WithPollInterval sets how often a waiter re-reads a lease between events.
func WithPollInterval(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return invalidf("poll interval %s must be positive", d)
		}
		o.pollInterval = d
		return nil
	}
}
