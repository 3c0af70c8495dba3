package pool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// AcquireRequest asks for a slot.
type AcquireRequest struct {
	Owner string
	// Session names the requester for nudges and status; default Owner.
	Session string
	// NoWait refuses with ErrSaturated instead of queueing.
	NoWait bool
	// Wait bounds the time spent queued (0: no bound). It does not bound
	// the provisioning of a slot once granted.
	Wait time.Duration
	// OnWait is called with the waiter's position when it first queues and
	// whenever the position or ETA changes.
	OnWait func(Position)
	// Work, when set, names the cgroup the holder's work will run in: the
	// slot's lease carries it (see [lease.Work]), so that whoever takes the
	// slot from this holder first ends what the work left running.
	Work *lease.Work
	// Acquired, when set, is called with the slot's record once its lease
	// is taken, before the slot's provision command runs (a holder binds
	// its cgroup to the incarnation there: lease.WorkBinding).
	Acquired func(rec *lease.Record)
}

// holderWork is what a grant carries of its holder's work.
type holderWork struct {
	work     *lease.Work
	acquired func(*lease.Record)
}

func (r *AcquireRequest) check(p *Pool) error {
	if err := p.checkOwner(r.Owner); err != nil {
		return err
	}
	if r.Session == "" {
		r.Session = r.Owner
	}
	return nil
}

func (p *Pool) checkOwner(owner string) error {
	if err := p.store.CheckOwner(owner); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalid, strings.TrimPrefix(err.Error(), lease.ErrInvalid.Error()+": "))
	}
	return nil
}

// Acquire queues for a slot and waits until this caller may grant itself
// one, then provisions it and returns the grant. A wait longer than r.Wait
// ends with a [*QueueError] matching ErrTimeout, and so does ctx's deadline
// if it passes while queued (but a deadline also bounds the provisioning,
// which r.Wait does not); cancelling ctx ends the wait, or stops a
// provision in progress, with ctx's error. Either way the
// caller leaves the queue. With NoWait it grants at once or fails with a
// [*QueueError] matching ErrSaturated.
func (p *Pool) Acquire(ctx context.Context, r AcquireRequest) (*Grant, error) {
	if err := r.check(p); err != nil {
		return nil, err
	}
	if r.NoWait {
		if err := p.saturatedNow(ctx); err != nil {
			return nil, err
		}
	}
	entry, pos, err := p.enqueue(ctx, r.Owner, r.Session, ModeBlocking)
	if err != nil {
		return nil, err
	}
	granted := false
	defer func() {
		if !granted {
			_ = p.dequeue(context.WithoutCancel(ctx), entry.ID, r.Owner)
		}
	}()
	g, err := p.await(ctx, entry, r.Owner, r.NoWait, r.Wait, r.OnWait, holderWork{r.Work, r.Acquired})
	granted = g != nil
	if err != nil && r.NoWait && errors.Is(err, ErrSaturated) {
		live, _ := p.queue(ctx)
		pos = p.position(ctx, entry.ID, len(live)-1) // the place it would take, counting itself
		return nil, &QueueError{Err: ErrSaturated, Position: pos.Position, EtaMs: pos.EtaMs}
	}
	return g, err
}

// saturatedNow refuses a no-wait acquire without touching the queue when a
// lock-free reading shows every slot held by a live lease: nothing could be
// granted or reaped, so the queue-lock round trips of enqueue, grant and
// dequeue would change nothing. The reading is of whole records (they are
// renamed into place); a slot freed just after it is a race the caller
// lost a moment earlier. It returns nil when some slot is not plainly held.
func (p *Pool) saturatedNow(ctx context.Context) error {
	slots := make([]SlotStatus, 0, len(p.cfg.Slots))
	for _, s := range p.cfg.Slots {
		st, err := p.store.Peek(ctx, s.Kind)
		if err != nil || st.State != lease.Held {
			return nil
		}
		slots = append(slots, p.slotStatus(s, st))
	}
	if allQuarantined(slots) {
		return p.quarantinedError()
	}
	live, err := p.queue(ctx)
	if err != nil {
		return err
	}
	pos := p.model(ctx, slots).position("", len(live))
	return &QueueError{Err: ErrSaturated, Position: pos.Position, EtaMs: pos.EtaMs}
}

// await loops self-grant attempts for a queued entry until it is granted,
// the entry is lost, wait (if positive) has passed, or ctx ends. The entry
// is heartbeated every poll. A busy queue lock is waited out, not fatal: it
// only means many waiters.
//
// An attempt runs at every poll, and on a file event only when it could
// succeed: a change to a slot wakes only the entries that may be granted
// (see mayGrant), and a change to the queue makes the others re-read their
// position, nothing more. So a release with 50 waiters wakes one attempt,
// not 50 attempts racing with the one that matters.
//
// The wake-ups are set up only once the first attempt has failed, and an
// attempt follows at once (a release in between is not missed): a grant
// at the first attempt, and every no-wait acquire, then never pays for
// them. On Linux that matters: a process that made an inotify descriptor
// waits, when it exits, for the kernel to tear it down, which took 5 to
// 20 ms here, several times a whole pool acquire.
func (p *Pool) await(ctx context.Context, e Entry, owner string, noWait bool, wait time.Duration, onWait func(Position), work holderWork) (*Grant, error) {
	wake := Wakeups{Listen: func(bool) {}} // nil channels: nothing wakes yet
	watching := false
	defer func() {
		if watching {
			wake.stop()
		}
	}()
	start := time.Now()
	var deadline <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
	}
	var last Position
	nextBeat := time.Time{}
	var stamped time.Time // the entry's stamp in the queue, as far as this waiter knows
	beat := p.beat(false)
	nextCheck := time.Now().Add(p.poll)
	// A waiter behind the front re-checks every quarter of waiterStaleMs,
	// in case a change rang no bell (the Node tool's), and to keep its
	// position live; where a heartbeat is a touch, it beats more often
	// than that, without reading anything.
	backCheck := max(p.poll, p.cfg.WaiterStale/4)
	nextBack := time.Now().Add(backCheck)
	timer := time.NewTimer(p.poll)
	defer timer.Stop()
	// near: the entry could be granted a slot now; front: it is among the
	// entries rung when the queue moves (dirstore/dirpool/bell_unix.go), which re-check at
	// every poll, so a queue change nobody rang (the Node tool's) reaches
	// them within a poll. The others re-check every backCheck.
	attempt, near, front, check := true, true, true, false
	// A store that cannot be reached for a moment (an etcd election, a
	// network blip) is waited out while the entry can still be alive: the
	// entry lapses after waiterStaleMs without a heartbeat anyway.
	var unreachableSince time.Time
	unreachable := func(err error) bool {
		if !errors.Is(err, lease.ErrUnavailable) {
			unreachableSince = time.Time{}
			return false
		}
		if unreachableSince.IsZero() {
			unreachableSince = time.Now()
		}
		if time.Since(unreachableSince) >= p.cfg.WaiterStale {
			return false
		}
		fmt.Fprintf(p.log, "pool: %v; still waiting\n", err)
		return true
	}
	report := func(pos Position) {
		if onWait != nil && (pos.Position != last.Position || pos.EtaMs != last.EtaMs) {
			onWait(pos)
		}
		last = pos
	}
	for {
		if check {
			// The poll, or the bell: where the entry stands now. Only a
			// waiter that could be granted a slot tries, and listens to
			// the slots.
			var idx int
			near, idx = p.mayGrant(ctx, e.ID)
			front = idx < len(p.cfg.Slots)+FrontMargin
			attempt = attempt || near
			if idx >= 0 && !attempt {
				report(p.position(ctx, e.ID, idx))
			}
			wake.Listen(near)
			check = false
		}
		if attempt {
			g, err := p.tryGrant(ctx, e.ID, owner, work)
			switch {
			case g != nil:
				return g, nil
			case errors.Is(err, ErrQueueBusy):
				fmt.Fprintf(p.log, "pool: %v; still waiting\n", err)
			case unreachable(err):
			case err != nil:
				return nil, err
			case noWait:
				return nil, ErrSaturated
			}
			if !watching && !noWait { // not granted, and waiting: from now on, woken
				var stop func()
				if ew, ok := p.backend.(EntryWatcher); ok {
					wake, stop = ew.WatchEntry(ctx, e.ID, p.slotKinds())
				} else {
					wake, stop = p.backend.Watch(ctx, p.slotKinds())
				}
				wake.stop, watching = stop, true
				continue // attempt again: a release before the watch began is not missed
			}
			var idx int
			near, idx = p.mayGrant(ctx, e.ID)
			front = idx < len(p.cfg.Slots)+FrontMargin
			wake.Listen(near)
			attempt = false
		}
		if now := time.Now(); !now.Before(nextBeat) {
			if p.touchOnly(e.ID, stamped) {
				beat = p.beat(true)
			} else {
				pos, at, err := p.heartbeatEntry(ctx, e.ID, owner)
				switch {
				case errors.Is(err, ErrQueueBusy):
					fmt.Fprintf(p.log, "pool: %v; still waiting\n", err)
				case unreachable(err):
				case err != nil:
					return nil, err
				default:
					report(pos)
					stamped = at
				}
			}
			nextBeat = now.Add(beat)
		}
		// A waiter that could be granted re-checks at every poll (a
		// missed event costs at most that); one further back every
		// backCheck, woken sooner by its bell or the queue's watch.
		next := nextBeat
		if front && nextCheck.Before(next) {
			next = nextCheck
		}
		if !front && nextBack.Before(next) {
			next = nextBack
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(time.Until(next))
		timedOut := func() error {
			return &QueueError{Err: ErrTimeout, RequestID: e.ID, Position: last.Position,
				EtaMs: last.EtaMs, WaitedMs: time.Since(start).Milliseconds()}
		}
		var slots <-chan struct{}
		if near {
			slots = wake.Slots
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, timedOut()
			}
			return nil, ctx.Err()
		case <-deadline:
			return nil, timedOut()
		case <-slots:
			attempt = true
		case <-wake.Queue:
			check = true // Listen(true) comes before the attempt, so no release is missed
		case <-timer.C:
			if now := time.Now(); front && !now.Before(nextCheck) || !front && !now.Before(nextBack) {
				nextCheck, nextBack = now.Add(p.poll), now.Add(backCheck)
				check = true
			}
		}
	}
}

// FrontMargin is how many waiters behind the first len(slots), those that
// could be granted a slot, belong to the front of the queue. A waiter in
// the front re-checks the queue at every poll, so that its position stays
// live and it is ready when its turn comes; the stores wake a waiter
// further back only when it enters the front (the directory store's
// bells, etcd's watches of the entries just ahead).
const FrontMargin = 3

// beat is how often a waiter heartbeats its queue entry, and never more
// often than it polls. Where each heartbeat rewrites the queue (which
// every other waiter of the Node tool re-reads), a quarter of
// waiterStaleMs: three heartbeats can be missed before the entry lapses.
// Once a heartbeat has been a touch (an [entryToucher]: touching is
// cheap, and the queue is rewritten only when the entry's stamp there
// reaches rewriteAge), an eighth.
func (p *Pool) beat(touching bool) time.Duration {
	if touching {
		return max(p.poll, p.cfg.WaiterStale/8)
	}
	return max(p.poll, p.cfg.WaiterStale/4)
}

// rewriteAge is how old an entry's stamp in the queue may get before its
// waiter, which touches it every beat, rewrites it: half waiterStaleMs,
// and at least three touching beats short of it, so that a reader of the
// queue alone (the Node tool) still finds the entry fresh after three
// heartbeats were missed.
func (p *Pool) rewriteAge() time.Duration {
	return max(0, min(p.cfg.WaiterStale/2, p.cfg.WaiterStale-3*p.beat(true)))
}

// mayGrant reports whether entry id could be granted a slot now, as far as
// the queue says: only the first len(slots) live entries can be (granting
// needs more free slots than live entries ahead that hold none, and free
// slots plus slots held by entries ahead are at most all slots). An entry
// that is not found says yes, so that the attempt reports it lost. One read
// of the queue, without the lock.
//
// idx is the entry's index in the live queue, -1 when not found or the
// queue could not be read.
func (p *Pool) mayGrant(ctx context.Context, id string) (may bool, idx int) {
	live, err := p.queue(ctx)
	if err != nil {
		return true, -1 // the attempt will report it
	}
	for i := range live {
		if live[i].ID == id {
			return i < len(p.cfg.Slots), i
		}
	}
	return true, -1
}

// slotKinds are the lease kinds of the pool's slots.
func (p *Pool) slotKinds() []string {
	kinds := make([]string, len(p.cfg.Slots))
	for i, s := range p.cfg.Slots {
		kinds[i] = s.Kind
	}
	return kinds
}

// refuseIfAllQuarantined fails with ErrQuarantined when every slot is
// quarantined, so nobody joins a queue that can never move.
func (p *Pool) refuseIfAllQuarantined(ctx context.Context) error {
	slots := make([]SlotStatus, 0, len(p.cfg.Slots))
	for _, s := range p.cfg.Slots {
		st, err := p.store.Peek(ctx, s.Kind)
		if err != nil {
			return nil // the grant attempt reports it
		}
		slots = append(slots, p.slotStatus(s, st))
	}
	if allQuarantined(slots) {
		return p.quarantinedError()
	}
	return nil
}

// Queued is an async request waiting in the queue.
type Queued struct {
	RequestID string
	Owner     string
	Session   string
	Position
	// Entry is the queue entry as queue.json holds it.
	Entry Entry
	// Provisioning is set when the request has left the queue with a slot
	// whose grant is still being prepared (Position is then 0 and Slot
	// names it): a grant takes its slot and leaves the queue before it
	// provisions, and writes its grant file after.
	Provisioning bool
	Slot         *Slot
}

// Request queues an async request and returns at once; the caller starts a
// detached waiter that runs [Pool.Wait] for it.
func (p *Pool) Request(ctx context.Context, owner, session string) (*Queued, error) {
	r := AcquireRequest{Owner: owner, Session: session}
	if err := r.check(p); err != nil {
		return nil, err
	}
	if err := p.refuseIfAllQuarantined(ctx); err != nil {
		return nil, err
	}
	e, pos, err := p.enqueue(ctx, r.Owner, r.Session, ModeAsync)
	if err != nil {
		return nil, err
	}
	p.logEvent(ctx, EventRequestQueued, map[string]any{"request_id": e.ID, "owner": e.Owner, "session": e.Session, "position": pos.Position})
	return &Queued{RequestID: e.ID, Owner: e.Owner, Session: e.Session, Position: pos, Entry: e}, nil
}

// Withdraw takes a request out of the queue (it was given up, or its waiter
// could not be started). Withdrawing a request that is not queued is not an
// error; withdrawing another owner's (queued or granted) is refused with
// lease.ErrNotOwner, before anything is touched.
func (p *Pool) Withdraw(ctx context.Context, requestID, owner string) error {
	if err := CheckRequestID(requestID); err != nil {
		return err
	}
	f, err := p.find(ctx, requestID)
	if err != nil {
		return err
	}
	if err := f.ownedBy(requestID, owner, "withdraw it"); err != nil {
		return err
	}
	if err := p.dequeue(ctx, requestID, owner); err != nil {
		return err
	}
	p.logEvent(ctx, EventRequestWithdrawn, map[string]any{"request_id": requestID, "owner": owner})
	return nil
}

// Wait is the detached waiter of an async request: it grants the request
// its slot when its turn comes (which writes the grant file and sends the
// nudge). When ctx ends, or timeout (if positive) passes, first, the
// request leaves the queue. Another owner's request is refused with
// lease.ErrNotOwner before anything is touched; a request no longer
// queued fails as with [Pool.TryGrant].
func (p *Pool) Wait(ctx context.Context, requestID, owner string, timeout time.Duration) (*Grant, error) {
	if err := CheckRequestID(requestID); err != nil {
		return nil, err
	}
	if err := p.checkOwner(owner); err != nil {
		return nil, err
	}
	queue, err := p.queue(ctx)
	if err != nil {
		return nil, err
	}
	var entry *Entry
	for _, e := range queue {
		if e.ID == requestID {
			entry = &e
			break
		}
	}
	if entry == nil {
		return nil, p.leftQueue(ctx, requestID, owner, "wait for it",
			fmt.Errorf("%w: request %s is not queued", ErrQueueEntryLost, requestID))
	}
	if err := ownedBy(*entry, owner, "wait for it"); err != nil {
		return nil, err
	}
	g, err := p.await(ctx, *entry, owner, false, timeout, nil, holderWork{})
	if err != nil && !errors.Is(err, ErrQueueEntryLost) {
		_ = p.dequeue(context.WithoutCancel(ctx), requestID, owner)
		p.logEvent(ctx, EventRequestAbandoned, map[string]any{"request_id": requestID, "error": err.Error()})
	}
	if errors.Is(err, ErrQuarantined) {
		// The claim must say why, not "unknown request, request again".
		_ = p.putGrant(ctx, requestID, failureRecord{State: GrantQuarantined, RequestID: requestID, ReqIDSnk: requestID,
			Error: err.Error(), At: p.stamp()})
	}
	return g, err
}
