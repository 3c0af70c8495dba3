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
	pollInterval time.Duration
}

// DefaultPollInterval is how often a waiter re-reads a held lease when no
// filesystem event arrives. Events normally wake it within milliseconds;
// the poll only covers a missed event or a store where events are
// unavailable.
const DefaultPollInterval = 250 * time.Millisecond

func defaultOptions() options {
	return options{
		clock:        WallClock{},
		owners:       &OwnerFence{text: DefaultOwnerPattern},
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

// ClockOf is the clock opts give a [Store] (the [WallClock] unless
// [WithClock] sets another), for a backend that must judge liveness on
// the same clock as the store above it.
func ClockOf(opts ...Option) (Clock, error) {
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	return o.clock, nil
}
