package pool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/provision"
)

// nudgeTimeout bounds the nudge command: a nudge is latency, not truth, and
// must not hold up the grant path.
const nudgeTimeout = 15 * time.Second

func (s *Slot) provisionSlot() provision.Slot {
	return provision.Slot{ID: s.ID, Kind: s.Kind, Attributes: s.Attributes}
}

// slotEnvNoAction is the POOL_SLOT_* environment of a slot, the default
// grant env.
func slotEnvNoAction(s *Slot) []string {
	all := provision.SlotEnv(s.provisionSlot(), "")
	out := all[:0:0]
	for _, kv := range all {
		if !strings.HasPrefix(kv, "POOL_ACTION=") {
			out = append(out, kv)
		}
	}
	return out
}

// run runs a configured command; an empty script succeeds.
func (p *Pool) run(ctx context.Context, action provision.Action, s *Slot, script string) error {
	if script == "" {
		return nil
	}
	return p.scriptRunner(ctx, action, s, script)
}

// runShell is the default ScriptRunner: the script runs in-process in the pool's
// working directory, with the slot id as its last argument and its output
// on the pool's log (the CLI's stderr); a failure keeps the end of that
// output (see failureOutput).
func (p *Pool) runShell(ctx context.Context, action provision.Action, s *Slot, script string) error {
	env := append(append([]string{}, p.env...), provision.SlotEnv(s.provisionSlot(), action)...)
	out := &tail{max: maxOutputBytes}
	w := io.MultiWriter(p.log, out)
	err := provision.Run(ctx, provision.Command{
		Script: script, Dir: p.cfg.Dir, Env: env, SlotID: s.ID, Stdout: w, Stderr: w,
	})
	if err != nil {
		return &outputError{err: err, output: out.String()}
	}
	return nil
}

// heldBeat is the longest gap between heartbeats while a command runs on a
// held slot: a quarter of the TTL, but at most 2 s, so a lease lost to a
// forced release is noticed, and the command stopped, within seconds.
const heldBeat = 2 * time.Second

// whileHolding runs fn while the slot's lease is kept alive by a
// [lease.Hold]. The hold beats once first, in the critical section, so fn
// never starts on a lease that is already lost or about to lapse. If the
// lease is lost meanwhile, fn's context is cancelled and the result is
// ErrLeaseLost whatever fn returned. The lease stays held afterwards.
func (p *Pool) whileHolding(ctx context.Context, s *Slot, rec *lease.Record, fn func(context.Context) error) error {
	lostErr := func(err error) error { return fmt.Errorf("%w: slot %s: %w", ErrLeaseLost, s.ID, err) }
	h, err := p.store.Keep(ctx, s.Kind, rec.Owner, rec.Token, lease.HoldOptions{
		Interval: min(rec.TTL()/4, heldBeat),
	})
	if err != nil {
		if errors.Is(err, lease.ErrLost) {
			return lostErr(err)
		}
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-h.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	err = fn(ctx)
	h.Stop()
	if lost := h.Err(); lost != nil {
		return lostErr(lost)
	}
	return err
}

// Keep starts keeping a grant's slot lease alive (see [lease.Store.Keep]);
// the hold's Release gives the slot back through [Pool.Release], so the
// hold time feeds the pool's ETAs.
func (p *Pool) Keep(ctx context.Context, g *Grant, o lease.HoldOptions) (*lease.Hold, error) {
	slotID := fmt.Sprint(g.Slot)
	if o.Release == nil {
		o.Release = func(ctx context.Context) error {
			r, err := p.Release(ctx, slotID, g.Owner, g.Token, false)
			if err != nil {
				return err
			}
			return lease.ReleaseOutcome(g.Kind, r.Released, r.WasExpired)
		}
	}
	h, err := p.store.Keep(ctx, g.Kind, g.Owner, g.Token, o)
	if err != nil && errors.Is(err, lease.ErrLost) {
		return nil, fmt.Errorf("%w: slot %s: %w", ErrLeaseLost, slotID, err)
	}
	return h, err
}

// runThenHealth runs script for action and then the health command, on a
// held slot (see [Pool.whileHolding]). stage is the action whose command
// failed, or "" when none did (or the lease was lost).
func (p *Pool) runThenHealth(ctx context.Context, s *Slot, rec *lease.Record, action provision.Action, script string) (stage provision.Action, err error) {
	err = p.whileHolding(ctx, s, rec, func(ctx context.Context) error {
		if err := p.run(ctx, action, s, script); err != nil {
			stage = action
			return err
		}
		if err := p.run(ctx, provision.ActionHealth, s, p.cmds.health); err != nil {
			stage = provision.ActionHealth
			return err
		}
		return nil
	})
	return stage, err
}

// Nudge tells an async requester that its grant is ready.
type Nudge struct {
	Event     string `json:"event"`
	Session   string `json:"session"`
	RequestID string `json:"request_id"`
	Grant     *Grant `json:"grant"`
}

// MarshalJSON adds requestId beside request_id.
func (n Nudge) MarshalJSON() ([]byte, error) {
	type plain Nudge
	b, err := json.Marshal(plain(n))
	if err != nil {
		return nil, err
	}
	id, _ := json.Marshal(n.RequestID)
	return append(append([]byte(`{"requestId":`), id...), append([]byte{','}, b[1:]...)...), nil
}

// deliverNudge is the default notifier: a line in nudges.jsonl, and the
// same line on the nudge command's stdin. It never fails the grant.
func (p *Pool) deliverNudge(ctx context.Context, n Nudge) {
	line, err := json.Marshal(n)
	if err != nil {
		fmt.Fprintf(p.log, "pool: nudge: %v\n", err)
		return
	}
	if err := p.backend.AppendNudge(context.WithoutCancel(ctx), line); err != nil {
		fmt.Fprintf(p.log, "pool: nudge: %v\n", err)
	}
	if p.cmds.nudge == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), nudgeTimeout)
	defer cancel()
	err = provision.Run(ctx, provision.Command{
		Script: p.cmds.nudge, Dir: p.cfg.Dir, Env: p.env, Stdin: bytes.NewReader(append(line, '\n')),
		Stdout: p.log, Stderr: p.log,
	})
	if err != nil {
		fmt.Fprintf(p.log, "pool: nudge command: %v\n", err)
	}
}
