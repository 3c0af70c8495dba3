package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/provision"
)

// Grant states, as written in grant files and printed by claim.
const (
	GrantReady          = "ready"
	GrantResetFailed    = "reset_failed"
	GrantHealthFailed   = "health_failed"
	GrantLeaseLostReset = "lease_lost_during_reset"
	GrantLeaseLost      = "lease_lost"
	// GrantQuarantined is the grant file of an async request whose waiter
	// gave up because every slot is quarantined.
	GrantQuarantined = "quarantined"
)

// Grant is a slot handed to a waiter: the slot's lease, its attributes and
// the environment to run with. Field names follow the pool CLI; the
// snake_case twins (request_id, slot_id, attrs) are what the Node tool reads
// from grant files, so both tools can claim each other's grants.
type Grant struct {
	RequestID string `json:"requestId"`
	Mode      string `json:"mode"`
	Slot      any    `json:"slot"`
	Kind      string `json:"kind"`
	Owner     string `json:"owner"`
	Token     string `json:"token"`
	// Fence is the slot lease's fence (lease.Record.Fence): it only grows
	// per slot, so a resource can refuse an older holder. 0 (and absent)
	// when the lease was granted by a tool that keeps none.
	Fence      int64             `json:"fence,omitempty"`
	TTLMinutes float64           `json:"ttlMinutes"`
	Attributes map[string]any    `json:"attributes"`
	Env        map[string]string `json:"env"`
	GrantedAt  string            `json:"grantedAt"`
	// Fields are the pool file's grantFields, printed at top level.
	Fields map[string]any `json:"-"`
}

// MarshalJSON prints the grant with ok and state first, the grantFields at
// top level and the snake_case twins.
func (g *Grant) MarshalJSON() ([]byte, error) {
	type plain Grant
	base, err := json.Marshal((*plain)(g))
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(base, &fields); err != nil {
		return nil, err
	}
	for k, v := range g.Fields {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		fields[k] = b
	}
	fields["request_id"], fields["slot_id"], fields["attrs"] = fields["requestId"], fields["slot"], fields["attributes"]
	return marshalOrdered(fields, []string{"ok", "state"}, map[string]json.RawMessage{
		"ok": json.RawMessage("true"), "state": json.RawMessage(`"` + GrantReady + `"`),
	})
}

// marshalOrdered writes first keys (from head) then the rest sorted.
func marshalOrdered(fields map[string]json.RawMessage, first []string, head map[string]json.RawMessage) ([]byte, error) {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if _, dup := head[k]; !dup {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := []byte("{")
	write := func(k string, v json.RawMessage) {
		if len(out) > 1 {
			out = append(out, ',')
		}
		kb, _ := json.Marshal(k)
		out = append(append(append(out, kb...), ':'), v...)
	}
	for _, k := range first {
		write(k, head[k])
	}
	for _, k := range keys {
		write(k, fields[k])
	}
	return append(out, '}'), nil
}

// failureRecord is a grant file for a grant that failed.
type failureRecord struct {
	OK        bool   `json:"ok"`
	State     string `json:"state"`
	RequestID string `json:"requestId"`
	ReqIDSnk  string `json:"request_id"`
	Slot      any    `json:"slot"`
	SlotID    any    `json:"slot_id"`
	Error     string `json:"error"`
	At        string `json:"at"`
}

// slotPayload is stored in a granted slot's lease, so waiters can tell a
// slot granted to an entry ahead of them from one held by a stranger.
type slotPayload struct {
	RequestID string `json:"requestId"`
	Session   string `json:"session"`
	Mode      string `json:"mode"`
}

// tryGrant is one self-grant attempt for the entry id. It returns nil when
// it is not this entry's turn or every free slot was lost to a racer, and
// ErrQueueEntryLost when the entry is no longer queued.
func (p *Pool) tryGrant(ctx context.Context, id, owner string, work holderWork) (*Grant, error) {
	p.sweepIfStale(ctx, owner)
	live, err := p.queue(ctx)
	if err != nil {
		return nil, err
	}
	idx := -1
	for i := range live {
		if live[i].ID == id {
			idx = i
			break
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("%w: request %s is not queued", ErrQueueEntryLost, id)
	}
	entry, ahead := live[idx], live[:idx]
	if err := ownedBy(entry, owner, "grant it"); err != nil {
		return nil, err // never a slot for another owner's entry, whoever calls
	}
	aheadIDs := make(map[string]bool, len(ahead))
	for _, e := range ahead {
		aheadIDs[e.ID] = true
	}
	var free []*Slot
	grantedAhead, quarantined := 0, 0
	for _, s := range p.cfg.Slots {
		st, err := p.store.Peek(ctx, s.Kind)
		if err != nil {
			return nil, err
		}
		if st.State == lease.Held && quarantineOf(st.Record) != nil {
			quarantined++
			continue
		}
		switch st.State {
		case lease.Free:
			free = append(free, s)
		case lease.Held:
			var pl slotPayload
			if json.Unmarshal(st.Record.Payload, &pl) == nil && aheadIDs[pl.RequestID] {
				grantedAhead++ // granted but not yet dequeued: not really waiting
			}
		}
	}
	if quarantined == len(p.cfg.Slots) {
		return nil, p.quarantinedError() // nobody could ever be granted one
	}
	if len(free) <= len(ahead)-grantedAhead {
		return nil, nil
	}
	payload, _ := json.Marshal(slotPayload{RequestID: id, Session: entry.Session, Mode: entry.Mode})
	for _, s := range free {
		acq, err := p.store.Acquire(ctx, lease.Request{Kind: s.Kind, Owner: owner, TTLMinutes: p.ttl, Payload: payload, Work: work.work})
		if errors.Is(err, lease.ErrHeld) {
			continue // a racer won this slot; try the next
		}
		if err != nil {
			return nil, err
		}
		if acq.TookOverExpired {
			p.logEvent(ctx, EventSlotTakeoverOnGrant, map[string]any{"slot_id": s.RawID, "previous": acq.Previous})
		}
		if work.acquired != nil {
			work.acquired(acq.Record)
		}
		p.leaveQueue(ctx, id, owner)
		return p.prepare(ctx, s, acq.Record, entry)
	}
	return nil, nil
}

// leaveQueue removes a granted entry. A granted entry left behind would
// stand ahead of every later waiter until it went stale, so a busy queue
// lock is retried, whatever happened to ctx.
func (p *Pool) leaveQueue(ctx context.Context, id, owner string) {
	ctx = context.WithoutCancel(ctx)
	var err error
	for try := 0; try < 3; try++ {
		if err = p.dequeue(ctx, id, owner); err == nil {
			return
		}
	}
	fmt.Fprintf(p.log, "pool: leaving the queue: %v\n", err)
}

// prepare provisions and health-checks a slot just acquired for entry,
// keeping its lease alive meanwhile, and hands out the grant only if the
// lease is still this grant's afterwards. On failure the slot is released
// and the failure is written to the request's grant file.
func (p *Pool) prepare(ctx context.Context, s *Slot, rec *lease.Record, entry Entry) (*Grant, error) {
	// A failure is recorded (grant file, log) before the slot goes back, so
	// that the count of its failures in a row includes it: the slot is
	// released, or quarantined at quarantineAfter failures in a row.
	fail := func(sentinel error, state, event string, cause error, release bool) error {
		serr := &SlotError{Err: sentinel, Slot: s, State: state, Cause: cause}
		_ = p.putGrant(ctx, entry.ID, failureRecord{State: state, RequestID: entry.ID, ReqIDSnk: entry.ID,
			Slot: s.RawID, SlotID: s.RawID, Error: serr.Error(), At: p.stamp()})
		fields := map[string]any{"slot_id": s.RawID, "request_id": entry.ID, "error": serr.Error()}
		if out := failureOutput(cause); out != "" {
			fields["output"] = out
		}
		p.logEvent(ctx, event, fields)
		if release {
			p.afterFailure(ctx, s, rec, serr)
		}
		return serr
	}
	var stage provision.Action
	var err error
	if p.cmds.provision != "" || p.cmds.health != "" {
		// Kept alive while the commands run. Without commands there is
		// nothing to keep it alive through: the heartbeat that would start
		// the hold rewrites a record written a moment ago, three more files
		// made on the way to the grant (PROTOCOL §6.4, step 6).
		stage, err = p.runThenHealth(ctx, s, rec, provision.ActionProvision, p.cmds.provision)
	}
	switch {
	case errors.Is(err, ErrLeaseLost):
		return nil, fail(ErrLeaseLost, GrantLeaseLostReset, EventGrantLeaseLostReset, err, false)
	case err != nil && ctx.Err() != nil:
		// The waiter was cancelled mid-provision: give the slot back.
		if _, rerr := p.store.Release(context.WithoutCancel(ctx), lease.Ref{Kind: s.Kind, Owner: rec.Owner, Token: rec.Token}); rerr != nil {
			fmt.Fprintf(p.log, "pool: releasing slot %s: %v\n", s.ID, rerr)
		}
		return nil, ctx.Err()
	case stage == provision.ActionProvision:
		return nil, fail(ErrProvisionFailed, GrantResetFailed, EventGrantResetFailed, err, true)
	case stage == provision.ActionHealth:
		return nil, fail(ErrHealthFailed, GrantHealthFailed, EventGrantHealthFailed, err, true)
	case err != nil:
		return nil, err
	}
	// A provision longer than the TTL, or a takeover meanwhile, means the
	// slot may be someone else's: never hand out a grant without its lease.
	st, err := p.store.Status(ctx, s.Kind)
	if err != nil || st.State != lease.Held || st.Record.Token != rec.Token {
		return nil, fail(ErrLeaseLost, GrantLeaseLostReset, EventGrantLeaseLostReset,
			fmt.Errorf("the lease lapsed while the slot was prepared (ttl %v min); raise the ttl", p.ttl), false)
	}
	env, fields, err := p.cfg.grantParts(s)
	if err != nil {
		return nil, err
	}
	g := &Grant{RequestID: entry.ID, Mode: entry.Mode, Slot: s.RawID, Kind: s.Kind, Owner: rec.Owner,
		Token: rec.Token, Fence: rec.Fence, TTLMinutes: rec.TTLMinutes, Attributes: s.Attributes, Env: env,
		GrantedAt: p.stamp(), Fields: fields}
	if err := p.putGrant(ctx, entry.ID, g); err != nil {
		fmt.Fprintf(p.log, "pool: writing the grant: %v\n", err)
	}
	logged := map[string]any{"slot_id": s.RawID, "request_id": entry.ID, "owner": rec.Owner, "mode": entry.Mode}
	// For history: how long the request waited for its slot, and how long
	// the slot took to provision (additive fields; the Node tool's grants
	// have neither).
	if at, err := lease.ParseTime(entry.EnqueuedAt); err == nil && !rec.AcquiredAt.IsZero() {
		logged["waitedMs"] = max(rec.AcquiredAt.Sub(at).Milliseconds(), 0)
	}
	if !rec.AcquiredAt.IsZero() {
		logged["provisionMs"] = max(p.now().Sub(rec.AcquiredAt).Milliseconds(), 0)
	}
	p.logEvent(ctx, EventGranted, logged)
	if entry.Mode == ModeAsync {
		p.notify(ctx, Nudge{Event: p.cfg.NudgeEvent, Session: entry.Session, RequestID: entry.ID, Grant: g})
	}
	return g, nil
}
