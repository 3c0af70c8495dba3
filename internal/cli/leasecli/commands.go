package leasecli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/durable-lease/durable-lease/internal/cli/cliparse"
	"github.com/durable-lease/durable-lease/internal/cli/outcome"
	"github.com/durable-lease/durable-lease/lease"
)

type acquireCmd struct {
	Kind    string  `required:"" placeholder:"KIND" help:"Lease kind: a slug matching ${kind_pattern}."`
	Owner   string  `required:"" placeholder:"OWNER" help:"Who holds the lease (must match the owner pattern)."`
	TTL     float64 `name:"ttl" required:"" placeholder:"MINUTES" help:"Minutes of silence before the lease expires; fractions allowed (0.5 = 30 s)."`
	Payload *string `placeholder:"JSON" help:"Any JSON value to keep with the lease (readable by anyone; no secrets)."`
	WaitMs  int64   `name:"wait-ms" placeholder:"MS" help:"If held, wait up to this many milliseconds for it to come free (0: refuse at once)."`
}

type acquireOut struct {
	OK              bool          `json:"ok"`
	Code            string        `json:"code"`
	Kind            string        `json:"kind"`
	Record          *lease.Record `json:"record"`
	Fence           int64         `json:"fence,omitempty"`
	ExpiresAt       string        `json:"expiresAt"`
	TookOverExpired bool          `json:"tookOverExpired,omitempty"`
	Previous        *lease.Record `json:"previous,omitempty"`
}

func (c *acquireCmd) waits() bool { return c.WaitMs > 0 }

// AppendJSON implements outcome.Appender: the output as encoding/json
// writes it (the records' own MarshalJSON writes compact JSON).
func (o acquireOut) AppendJSON(b []byte) ([]byte, bool) {
	j := outcome.NewObject(b)
	j.Bool("ok", o.OK)
	j.Str("code", o.Code)
	j.Str("kind", o.Kind)
	j.Marshaler("record", o.Record, o.Record == nil)
	if o.Fence != 0 {
		j.Int("fence", o.Fence)
	}
	j.Str("expiresAt", o.ExpiresAt)
	if o.TookOverExpired {
		j.Bool("tookOverExpired", true)
	}
	if o.Previous != nil {
		j.Marshaler("previous", o.Previous, false)
	}
	return j.End()
}

// floorChecked is the longest TTL warnFloor asks the store about: no
// store's renewal floor comes near a minute, and a longer TTL costs no
// request.
const floorChecked = time.Minute

// warnFloor says on stderr when a lease of ttl minutes is shorter than a
// holder can keep on the store through the faults it rides out
// ([lease.Store.RenewalFloor]): it is granted (a lease meant to lapse
// soon is a lease too), but its heartbeats could not keep it through a
// leader election.
func warnFloor(e *env, ttlMinutes float64) {
	ttl := time.Duration(ttlMinutes * float64(time.Minute))
	if ttl >= floorChecked {
		return
	}
	floor, why := e.store.RenewalFloor(e.ctx)
	if ttl >= floor {
		return
	}
	fmt.Fprintf(e.stderr, "lease: warning: ttl %s is shorter than a holder can keep on this store: %s; the shortest it keeps is %s (%.4g minutes); heartbeats may not keep this lease\n",
		ttl, why, floor, floor.Minutes())
}

func (c *acquireCmd) Run(e *env) error {
	wait, err := cliparse.Ms("wait-ms", c.WaitMs)
	if err != nil {
		return err
	}
	req := lease.Request{Kind: c.Kind, Owner: c.Owner, TTLMinutes: c.TTL}
	if c.Payload != nil {
		if err := cliparse.JSON("payload", *c.Payload); err != nil {
			return err
		}
		req.Payload = json.RawMessage(*c.Payload)
	}
	warnFloor(e, c.TTL)
	acq, err := e.store.Acquire(e.ctx, req)
	if held := (*lease.HeldError)(nil); c.WaitMs > 0 && errors.As(err, &held) {
		// Say why nothing happens yet; a wait must never look like a hang.
		fmt.Fprintf(e.stderr, "lease: %s is held by %q until %s; waiting up to %d ms\n",
			c.Kind, held.Record.Owner, lease.FormatTime(held.ExpiresAt), c.WaitMs)
		began := time.Now()
		ctx, cancel := context.WithTimeout(e.ctx, wait)
		defer cancel()
		acq, err = e.store.AcquireWait(ctx, req)
		if errors.As(err, &held) && held.Timeout {
			// Count the wait from the moment its deadline was set, so a
			// timeout never reports less than --wait-ms.
			held.Waited = max(held.Waited, time.Since(began))
		}
	}
	if err != nil {
		return &refusal{err: err, kind: c.Kind, owner: c.Owner, now: e.store.Now()}
	}
	if acq.TookOverExpired {
		fmt.Fprintf(e.stderr, "lease: took over the dead lease %s of %s (journaled in %s)\n", c.Kind, describeOwner(acq.Previous), e.store.JournalWhere())
	}
	return e.emit(acquireOut{
		OK: true, Code: "acquired", Kind: c.Kind, Record: acq.Record, Fence: acq.Record.Fence,
		ExpiresAt:       lease.FormatTime(acq.Record.ExpiresAt()),
		TookOverExpired: acq.TookOverExpired, Previous: e.show(acq.Previous),
	})
}

func describeOwner(r *lease.Record) string {
	if r == nil || r.Corrupt {
		return "an unreadable record"
	}
	return fmt.Sprintf("%q", r.Owner)
}

type heartbeatCmd struct {
	Kind  string `required:"" placeholder:"KIND" help:"Lease kind."`
	Owner string `required:"" placeholder:"OWNER" help:"The owner that acquired it."`
	Token string `required:"" placeholder:"TOKEN" help:"The fencing token from acquire (record.token)."`
}

type heartbeatOut struct {
	OK          bool          `json:"ok"`
	Code        string        `json:"code"`
	Kind        string        `json:"kind"`
	Record      *lease.Record `json:"record"`
	Fence       int64         `json:"fence,omitempty"`
	ExpiresAt   string        `json:"expiresAt"`
	ExpiresInMs int64         `json:"expiresInMs"`
}

func (c *heartbeatCmd) Run(e *env) error {
	rec, err := e.store.Heartbeat(e.ctx, lease.Ref{Kind: c.Kind, Owner: c.Owner, Token: c.Token})
	if err != nil {
		return &refusal{err: err, kind: c.Kind, owner: c.Owner, now: e.store.Now()}
	}
	return e.emit(heartbeatOut{
		OK: true, Code: "refreshed", Kind: c.Kind, Record: rec, Fence: rec.Fence,
		ExpiresAt:   lease.FormatTime(rec.ExpiresAt()),
		ExpiresInMs: rec.ExpiresAt().Sub(e.store.Now()).Milliseconds(),
	})
}

type releaseCmd struct {
	Kind  string `required:"" placeholder:"KIND" help:"Lease kind."`
	Owner string `placeholder:"OWNER" help:"The owner that acquired it (with --force: who is forcing, for the journal)."`
	Token string `placeholder:"TOKEN" help:"The fencing token from acquire."`
	Force bool   `help:"Operator escape hatch: remove the lease whoever holds it, without a token. Journaled. Never use it from automation; reap dead leases instead."`
}

type releaseOut struct {
	OK         bool          `json:"ok"`
	Code       string        `json:"code"`
	Kind       string        `json:"kind"`
	Released   bool          `json:"released"`
	WasExpired bool          `json:"wasExpired"`
	Forced     bool          `json:"forced,omitempty"`
	Previous   *lease.Record `json:"previous,omitempty"`
}

// AppendJSON implements outcome.Appender, as acquireOut's does.
func (o releaseOut) AppendJSON(b []byte) ([]byte, bool) {
	j := outcome.NewObject(b)
	j.Bool("ok", o.OK)
	j.Str("code", o.Code)
	j.Str("kind", o.Kind)
	j.Bool("released", o.Released)
	j.Bool("wasExpired", o.WasExpired)
	if o.Forced {
		j.Bool("forced", true)
	}
	if o.Previous != nil {
		j.Marshaler("previous", o.Previous, false)
	}
	return j.End()
}

func (c *releaseCmd) Run(e *env) error {
	var rel *lease.Released
	var err error
	if c.Force {
		rel, err = e.store.ForceRelease(e.ctx, c.Kind, c.Owner)
	} else {
		if c.Owner == "" || c.Token == "" {
			return cliparse.Usagef("release needs --owner and --token (or --force)")
		}
		rel, err = e.store.Release(e.ctx, lease.Ref{Kind: c.Kind, Owner: c.Owner, Token: c.Token})
	}
	if err != nil {
		return &refusal{err: err, kind: c.Kind, owner: c.Owner, now: e.store.Now()}
	}
	code := "released"
	if !rel.Released {
		code = "not_held"
	}
	return e.emit(releaseOut{OK: true, Code: code, Kind: c.Kind, Released: rel.Released,
		WasExpired: rel.WasExpired, Forced: c.Force, Previous: e.show(rel.Previous)})
}

type statusCmd struct {
	Kind string `required:"" placeholder:"KIND" help:"Lease kind."`
}

// statusOut is one lease as status, list and reconcile print it.
type statusOut struct {
	OK           bool          `json:"ok,omitempty"`
	Kind         string        `json:"kind"`
	State        lease.State   `json:"state"`
	Holder       string        `json:"holder,omitempty"`
	Record       *lease.Record `json:"record,omitempty"`
	Fence        int64         `json:"fence,omitempty"`
	ExpiresAt    string        `json:"expiresAt,omitempty"`
	ExpiresInMs  *int64        `json:"expiresInMs,omitempty"`
	ExpiredForMs *int64        `json:"expiredForMs,omitempty"`
	Note         string        `json:"note,omitempty"`
}

func statusView(st *lease.Status, reveal bool) statusOut {
	// Whoever reads a status is not the holder: the token is shown only
	// as its fingerprint (unless --reveal-tokens), so reading a status
	// cannot give a lease away.
	out := statusOut{Kind: st.Kind, State: st.State, Record: shown(st.Record, reveal)}
	if st.Record != nil {
		out.Fence = st.Record.Fence
	}
	switch st.State {
	case lease.Invalid:
		out.Note = "file name is not a lease kind: reported, never touched"
	case lease.Held:
		ms := st.Remaining.Milliseconds()
		out.Holder, out.ExpiresAt, out.ExpiresInMs = st.Record.Owner, lease.FormatTime(st.ExpiresAt), &ms
	case lease.Unknown:
		if st.Rule == lease.RuleFuture {
			out.Note = fmt.Sprintf("heartbeat is more than %s ahead of this host's clock: not trusted, so the lease is expired", lease.MaxFuture(st.Record.TTL()))
		} else if !st.Record.Corrupt {
			ms := -st.Remaining.Milliseconds()
			out.ExpiresAt, out.ExpiredForMs = lease.FormatTime(st.ExpiresAt), &ms
		}
	}
	return out
}

func (c *statusCmd) Run(e *env) error {
	st, err := e.store.Status(e.ctx, c.Kind)
	if err != nil {
		return &refusal{err: err, kind: c.Kind, now: e.store.Now()}
	}
	out := statusView(st, e.reveal)
	out.OK = true
	return e.emit(out)
}

type reapCmd struct {
	Kind string `required:"" placeholder:"KIND" help:"Lease kind."`
}

type reapOut struct {
	OK       bool          `json:"ok"`
	Code     string        `json:"code"`
	Kind     string        `json:"kind"`
	Reaped   bool          `json:"reaped"`
	Previous *lease.Record `json:"previous,omitempty"`
}

func (c *reapCmd) Run(e *env) error {
	prev, err := e.store.Reap(e.ctx, c.Kind)
	if err != nil {
		return &refusal{err: err, kind: c.Kind, now: e.store.Now()}
	}
	if prev == nil {
		return e.emit(reapOut{OK: true, Code: "not_held", Kind: c.Kind})
	}
	return e.emit(reapOut{OK: true, Code: "reaped", Kind: c.Kind, Reaped: true, Previous: e.show(prev)})
}

type listCmd struct{}

type listOut struct {
	OK     bool        `json:"ok"`
	Store  string      `json:"store"`
	Leases []statusOut `json:"leases"`
}

func (c *listCmd) Run(e *env) error {
	all, err := e.store.List(e.ctx)
	if err != nil {
		return err
	}
	out := listOut{OK: true, Store: e.store.Where(), Leases: make([]statusOut, 0, len(all))}
	for i := range all {
		out.Leases = append(out.Leases, statusView(&all[i], e.reveal))
	}
	return e.emit(out)
}

type reconcileCmd struct{}

type reapedOut struct {
	Kind     string        `json:"kind"`
	Previous *lease.Record `json:"previous"`
}

type reconcileOut struct {
	OK      bool        `json:"ok"`
	Store   string      `json:"store"`
	Held    []statusOut `json:"held"`
	Reaped  []reapedOut `json:"reaped"`
	Foreign []statusOut `json:"foreign"`
}

func (c *reconcileCmd) Run(e *env) error {
	rep, err := e.store.Reconcile(e.ctx)
	if err != nil {
		return err
	}
	out := reconcileOut{OK: true, Store: e.store.Where(), Held: []statusOut{}, Reaped: []reapedOut{}, Foreign: []statusOut{}}
	for i := range rep.Held {
		out.Held = append(out.Held, statusView(&rep.Held[i], e.reveal))
	}
	for _, r := range rep.Reaped {
		out.Reaped = append(out.Reaped, reapedOut{Kind: r.Kind, Previous: e.show(r)})
	}
	for i := range rep.Foreign {
		out.Foreign = append(out.Foreign, statusView(&rep.Foreign[i], e.reveal))
	}
	return e.emit(out)
}
