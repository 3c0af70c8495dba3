package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/durable-lease/durable-lease/lease"
)

// Quarantine says why a slot is out of rotation. A quarantined slot's
// lease is held, for a year, by a record whose payload is
// {"quarantine": Quarantine}: no waiter of either implementation is ever
// granted it, and it shows as held (quarantined) to everyone.
type Quarantine struct {
	// Reason is the operator's text, or what failed.
	Reason string `json:"reason"`
	// Output is the end of the last failure's output, when failures
	// quarantined the slot.
	Output string `json:"output,omitempty"`
	// By is who quarantined it: an operator's owner, or "pool" when its
	// failures did.
	By string `json:"by"`
	// At is when.
	At string `json:"at"`
	// Failures is how many failures in a row quarantined it (0 for an
	// operator's quarantine).
	Failures int `json:"failures,omitempty"`
}

// ByPool is Quarantine.By when the slot's own failures quarantined it.
const ByPool = "pool"

// maxReasonBytes bounds an operator's reason; maxOutputBytes what is kept
// of a failure's output (its end).
const (
	maxReasonBytes = 1000
	maxOutputBytes = 2000
)

// failureEvents are the log events of a failed provision, reset or
// health check of a slot; restartEvents end a run of them (the slot
// worked, or an operator stepped in).
var (
	failureEvents = map[string]bool{
		EventGrantResetFailed: true, EventGrantHealthFailed: true,
		EventSlotReprovisionFailed: true, EventSlotProbeFailed: true,
	}
	restartEvents = map[string]bool{
		EventGranted: true, EventSlotReprovisioned: true, EventSlotProbeOK: true,
		EventSlotQuarantined: true, EventSlotUnquarantined: true,
	}
)

// failuresInARow counts the failures of slot s at the end of the pool's
// log: the events in failureEvents since the last in restartEvents.
func (p *Pool) failuresInARow(ctx context.Context, s *Slot) int {
	lines, err := p.backend.Log(ctx)
	if err != nil {
		fmt.Fprintf(p.log, "pool: counting the failures of slot %s: the pool's log: %v\n", s.ID, err)
		return 0
	}
	want := fmt.Sprint(s.RawID)
	n := 0
	for i := len(lines) - 1; i >= 0; i-- {
		var e struct {
			Event string `json:"event"`
			Slot  any    `json:"slot_id"`
		}
		if json.Unmarshal(lines[i], &e) != nil || e.Slot == nil || fmt.Sprint(e.Slot) != want {
			continue
		}
		switch {
		case failureEvents[e.Event]:
			n++
		case restartEvents[e.Event]:
			return n
		}
	}
	return n
}

// afterFailure decides what becomes of slot s, whose lease rec this
// caller holds, after a failure cause was logged: back into rotation
// (released), or, at quarantineAfter failures in a row, into quarantine.
func (p *Pool) afterFailure(ctx context.Context, s *Slot, rec *lease.Record, cause error) {
	ctx = context.WithoutCancel(ctx)
	if _, err := p.store.Release(ctx, lease.Ref{Kind: s.Kind, Owner: rec.Owner, Token: rec.Token}); err != nil {
		fmt.Fprintf(p.log, "pool: releasing slot %s after a failure: %v\n", s.ID, err)
		return
	}
	if p.cfg.QuarantineAfter <= 0 {
		return
	}
	n := p.failuresInARow(ctx, s)
	if n < p.cfg.QuarantineAfter {
		return
	}
	q := Quarantine{Reason: fmt.Sprintf("%d failures in a row; the last: %v", n, cause), Output: failureOutput(cause),
		By: ByPool, Failures: n}
	// The slot was free for a moment: a waiter may have taken it, and then
	// its own failure quarantines it.
	if err := p.putInQuarantine(ctx, s, rec.Owner, q); err != nil && !errors.Is(err, lease.ErrHeld) {
		fmt.Fprintf(p.log, "pool: quarantining slot %s: %v\n", s.ID, err)
	}
}

// putInQuarantine takes slot s's lease for quarantine q, as owner.
func (p *Pool) putInQuarantine(ctx context.Context, s *Slot, owner string, q Quarantine) error {
	q.At = p.stamp()
	acq, err := p.store.Acquire(ctx, lease.Request{Kind: s.Kind, Owner: owner, TTLMinutes: lease.MaxTTLMinutes, Payload: quarantinePayload(q)})
	if err != nil {
		return err
	}
	if acq.TookOverExpired {
		p.logEvent(ctx, EventSlotTakeoverOnQuarantine, map[string]any{"slot_id": s.RawID, "previous": acq.Previous})
	}
	fields := map[string]any{"slot_id": s.RawID, "by": q.By, "owner": owner, "reason": q.Reason}
	if q.Failures > 0 {
		fields["failures"] = q.Failures
	}
	p.logEvent(ctx, EventSlotQuarantined, fields)
	return nil
}

// Quarantined is what [Pool.Quarantine] did.
type Quarantined struct {
	Slot       *Slot
	Quarantine Quarantine
	// Already is set when the slot was quarantined before (nothing changed).
	Already bool
}

// Quarantine takes a slot out of rotation for an operator (owner), with
// reason. A held slot is refused with lease.ErrHeld unless force, which
// first removes its holder's lease (journaled, like release --force). A
// slot quarantined already is left as it is.
func (p *Pool) Quarantine(ctx context.Context, slotID, owner, reason string, force bool) (*Quarantined, error) {
	s, err := p.cfg.SlotByID(slotID)
	if err != nil {
		return nil, err
	}
	if err := p.checkOwner(owner); err != nil {
		return nil, err
	}
	reason = strings.TrimSpace(reason)
	if reason == "" || len(reason) > maxReasonBytes || !utf8.ValidString(reason) {
		return nil, fmt.Errorf("%w: --reason must be 1 to %d bytes of text", ErrInvalid, maxReasonBytes)
	}
	st, err := p.store.Status(ctx, s.Kind)
	if err != nil {
		return nil, err
	}
	if q := quarantineOf(st.Record); st.State == lease.Held && q != nil {
		return &Quarantined{Slot: s, Quarantine: *q, Already: true}, nil
	}
	q := Quarantine{Reason: reason, By: owner}
	if force {
		// One change: the holder's lease becomes the quarantine's, so no
		// waiter can take the slot in between.
		q.At = p.stamp()
		acq, err := p.store.Replace(ctx, "", lease.Request{Kind: s.Kind, Owner: owner, TTLMinutes: lease.MaxTTLMinutes,
			Payload: quarantinePayload(q)})
		if err != nil {
			return nil, err
		}
		if prev := acq.Previous; prev != nil && !prev.Corrupt && quarantineOf(prev) == nil {
			p.logEvent(ctx, EventReleased, map[string]any{"slot_id": s.RawID, "owner": owner, "forced": true})
		}
		p.logEvent(ctx, EventSlotQuarantined, map[string]any{"slot_id": s.RawID, "by": q.By, "owner": owner, "reason": q.Reason})
		return &Quarantined{Slot: s, Quarantine: q}, nil
	}
	if err := p.putInQuarantine(ctx, s, owner, q); err != nil {
		if errors.Is(err, lease.ErrHeld) {
			return nil, fmt.Errorf("%w (quarantine it once it is released, or with --force)", err)
		}
		return nil, err
	}
	q.At = p.stamp()
	return &Quarantined{Slot: s, Quarantine: q}, nil
}

// quarantinePayload is the slot lease payload of quarantine q.
func quarantinePayload(q Quarantine) json.RawMessage {
	b, _ := json.Marshal(struct {
		Quarantine Quarantine `json:"quarantine"`
	}{q})
	return b
}

// Unquarantine puts a quarantined slot back into rotation for an operator
// (owner): it runs the reset and health commands first, keeping the
// quarantine's lease meanwhile (so no waiter gets the slot half reset),
// and refuses, leaving the slot quarantined, if either fails. A slot in
// rotation is refused with ErrNotQuarantined.
func (p *Pool) Unquarantine(ctx context.Context, slotID, owner string) (*Slot, error) {
	s, err := p.cfg.SlotByID(slotID)
	if err != nil {
		return nil, err
	}
	if err := p.checkOwner(owner); err != nil {
		return nil, err
	}
	return s, p.restore(ctx, s, owner, owner)
}

// restore resets and health-checks quarantined slot s and, when both
// pass, releases its quarantine. owner takes the quarantine's lease for
// the time it takes; by is who restores it, for the log. Taking it is one
// change fenced by the quarantine record's token, and the record taken is
// still the quarantine, marked as being lifted: so of two restorers (an
// operator and a probe, say) one runs the commands and the other is
// refused with ErrNotQuarantined, and if the restorer dies meanwhile the
// slot stays out of rotation until another restorer takes over its lift.
func (p *Pool) restore(ctx context.Context, s *Slot, owner, by string) error {
	st, err := p.store.Status(ctx, s.Kind)
	if err != nil {
		return err
	}
	q := quarantineOf(st.Record)
	if st.State != lease.Held || q == nil {
		return fmt.Errorf("%w: slot %s is %s, not quarantined", ErrNotQuarantined, s.ID, st.State)
	}
	// A restorer at work heartbeats the record it took; one silent for
	// liftStale has died, and its lift may be taken over.
	if l := liftingOf(st.Record); l != nil && p.now().Sub(st.Record.Heartbeat) < liftStale {
		return fmt.Errorf("%w: slot %s is being restored by %s", ErrNotQuarantined, s.ID, l.By)
	}
	payload, _ := json.Marshal(struct {
		Quarantine Quarantine `json:"quarantine"`
		Lifting    lifting    `json:"lifting"`
	}{*q, lifting{By: by, At: p.stamp()}})
	acq, err := p.store.Replace(ctx, st.Record.Token, lease.Request{Kind: s.Kind, Owner: owner,
		TTLMinutes: lease.MaxTTLMinutes, Payload: payload})
	if errors.Is(err, lease.ErrTokenMismatch) || errors.Is(err, lease.ErrNotHeld) {
		return fmt.Errorf("%w: slot %s changed meanwhile (another operator or a probe is restoring it)", ErrNotQuarantined, s.ID)
	}
	if err != nil {
		return err
	}
	rec := acq.Record
	if err := p.resetAndCheck(ctx, s, rec); err != nil {
		// Still quarantined, no longer being lifted: the next restorer
		// need not wait for this one's mark to go stale.
		if out := failureOutput(err); out != "" {
			q.Output = out
		}
		if _, rerr := p.store.Replace(context.WithoutCancel(ctx), rec.Token, lease.Request{Kind: s.Kind, Owner: owner,
			TTLMinutes: lease.MaxTTLMinutes, Payload: quarantinePayload(*q)}); rerr != nil {
			fmt.Fprintf(p.log, "pool: slot %s stays quarantined, marked as being restored for %s: %v\n", s.ID, liftStale, rerr)
		}
		p.logEvent(ctx, EventSlotUnquarantineFailed, map[string]any{"slot_id": s.RawID, "by": by, "error": err.Error(),
			"output": failureOutput(err)})
		return err
	}
	if _, err := p.store.Release(context.WithoutCancel(ctx), lease.Ref{Kind: s.Kind, Owner: rec.Owner, Token: rec.Token}); err != nil {
		return err
	}
	p.logEvent(ctx, EventSlotUnquarantined, map[string]any{"slot_id": s.RawID, "by": by})
	return nil
}

// lifting marks a quarantine record taken by a restorer (see restore).
type lifting struct {
	By string `json:"by"`
	At string `json:"at"`
}

// liftStale is how long a restorer's record may go without a heartbeat
// (it beats every 2 s while its commands run) before it counts as dead.
const liftStale = 30 * time.Second

// liftingOf returns the restorer of a quarantine record, or nil.
func liftingOf(rec *lease.Record) *lifting {
	if rec == nil || rec.Corrupt || len(rec.Payload) == 0 {
		return nil
	}
	var pl struct {
		Lifting *lifting `json:"lifting"`
	}
	if json.Unmarshal(rec.Payload, &pl) != nil {
		return nil
	}
	return pl.Lifting
}

// allQuarantined reports whether every slot is quarantined, from statuses
// read by the caller.
func allQuarantined(slots []SlotStatus) bool {
	for _, s := range slots {
		if s.Quarantine == nil {
			return false
		}
	}
	return len(slots) > 0
}

// quarantinedError is the refusal of a waiter when no slot is in rotation.
func (p *Pool) quarantinedError() error {
	return fmt.Errorf("%w: every slot of pool %s is quarantined, so no slot can be granted; see pool status, and pool unquarantine --slot ID",
		ErrQuarantined, p.cfg.Name)
}

// outputError is a command's failure with the end of its output.
type outputError struct {
	err    error
	output string
}

func (e *outputError) Error() string { return e.err.Error() }
func (e *outputError) Unwrap() error { return e.err }

// failureOutput returns the end of the output of the command whose
// failure err is, or "".
func failureOutput(err error) string {
	if se := (*SlotError)(nil); errors.As(err, &se) && se.Cause != nil {
		err = se.Cause // a SlotError unwraps to its sentinel, not its cause
	}
	var oe *outputError
	if errors.As(err, &oe) {
		return oe.output
	}
	return ""
}

// tail keeps the last max bytes written to it, from any goroutine.
type tail struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

// String is the kept text, from a whole UTF-8 character on.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	for len(b) > 0 && !utf8.RuneStart(b[0]) {
		b = b[1:]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
