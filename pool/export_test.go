package pool

import (
	"context"
	"time"
)

// What the external tests (package pool_test, which run pools over a real
// directory store through package dirstore) need of the internals.

func (p *Pool) EnqueueForTest(ctx context.Context, owner, session, mode string) (Entry, Position, error) {
	return p.enqueue(ctx, owner, session, mode)
}

func (p *Pool) MayGrantForTest(ctx context.Context, id string) (bool, int) {
	return p.mayGrant(ctx, id)
}

func (p *Pool) PositionForTest(ctx context.Context, id string, idx int) Position {
	return p.position(ctx, id, idx)
}

func (p *Pool) HeartbeatEntryForTest(ctx context.Context, id, owner string) (Position, time.Time, error) {
	return p.heartbeatEntry(ctx, id, owner)
}

func (p *Pool) LiveForTest(entries []Entry) (live, stale []Entry) { return p.live(entries) }

func (p *Pool) LogEventForTest(ctx context.Context, event string, fields map[string]any) {
	p.logEvent(ctx, event, fields)
}

// CommandsForTest are the provision and reset commands the pool runs.
func (p *Pool) CommandsForTest() (provision, reset string) { return p.cmds.provision, p.cmds.reset }

func (p *Pool) PollForTest() time.Duration { return p.poll }

func (c *Config) GrantPartsForTest(s *Slot) (map[string]string, map[string]any, error) {
	return c.grantParts(s)
}

// ETAForTest is the ETA of position pos under a model of mean hold avg
// and slots expected to free at free.
func ETAForTest(avg time.Duration, free []time.Duration, pos int) int64 {
	return newEtaModel(avg, free).eta(pos)
}

const (
	MaxEtaMs  = maxEtaMs
	LiftStale = liftStale
)

var Contains = contains
var RoundHalfUp = roundHalfUp
