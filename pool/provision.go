package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/provision"
)

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
