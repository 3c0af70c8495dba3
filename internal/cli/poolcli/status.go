package poolcli

import (
	"context"
	"io"
	"os"

	"golang.org/x/term"

	"github.com/durable-lease/durable-lease/internal/cli/cliparse"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

type statusCmd struct {
	Format string `placeholder:"FORMAT" help:"table (for people), json (one JSON object, format 2: one name per field, the Node tool's), or json1 (format 1: slot, attributes and requestId beside slot_id, attrs and request_id, as before format 2). Default: table when stdout is a terminal, else json."`
}

// statusFormat is the version of status's JSON, its "format" field.
// Format 1 (no "format" field) printed slot/slot_id, attributes/attrs and
// requestId/request_id, each pair with one value; format 2 keeps the
// Node tool's name of each (slot_id, attrs, request_id).
const statusFormat = 2

type slotStatusOut struct {
	SlotID any            `json:"slot_id"`
	Kind   string         `json:"kind"`
	Attrs  map[string]any `json:"attrs"`
	State  lease.State    `json:"state"`
	Holder *string        `json:"holder"`
	// ExpiresAt is when the lease lapses without a heartbeat.
	ExpiresAt *string `json:"expiresAt"`
	// Quarantine is set, and state is "quarantined", when the slot is out
	// of rotation.
	Quarantine *pool.Quarantine `json:"quarantine,omitempty"`
}

// stateQuarantined is the state status gives a quarantined slot (its
// lease is held by the quarantine).
const stateQuarantined lease.State = "quarantined"

type queueOut struct {
	RequestID  string `json:"request_id"`
	Owner      string `json:"owner"`
	Session    string `json:"session"`
	Mode       string `json:"mode"`
	Position   int    `json:"position"`
	EtaMs      int64  `json:"etaMs"`
	Eta        string `json:"eta"`
	EnqueuedAt string `json:"enqueuedAt"`
}

type statusOut struct {
	OK          bool            `json:"ok"`
	Format      int             `json:"format"`
	Name        string          `json:"name"`
	Store       string          `json:"store"`
	PoolDir     string          `json:"poolDir"`
	Slots       []slotStatusOut `json:"slots"`
	Queue       []queueOut      `json:"queue"`
	MovingAvgMs int64           `json:"movingAvgMs"`
}

func statusView(ctx context.Context, p *pool.Pool) (statusOut, error) {
	st, err := p.Status(ctx)
	if err != nil {
		return statusOut{}, err
	}
	out := statusOut{OK: true, Format: statusFormat, Name: p.Config().Name, Store: st.Store, PoolDir: st.Dir,
		Slots: []slotStatusOut{}, Queue: []queueOut{}, MovingAvgMs: st.MovingAvgMs}
	for _, s := range st.Slots {
		so := slotStatusOut{SlotID: s.Slot.RawID, Kind: s.Slot.Kind, Attrs: s.Slot.Attributes, State: s.State, Quarantine: s.Quarantine}
		if s.Quarantine != nil {
			so.State = stateQuarantined
		}
		if s.Holder != "" {
			h := s.Holder
			so.Holder = &h
		}
		if s.ExpiresAt != "" {
			x := s.ExpiresAt
			so.ExpiresAt = &x
		}
		out.Slots = append(out.Slots, so)
	}
	for _, q := range st.Queue {
		out.Queue = append(out.Queue, queueOut{RequestID: q.ID, Owner: q.Owner, Session: q.Session,
			Mode: q.Mode, Position: q.Position.Position, EtaMs: q.EtaMs, Eta: pool.FormatEta(q.EtaMs), EnqueuedAt: q.EnqueuedAt})
	}
	return out, nil
}

// Format 1 of status's JSON, for --format json1: every field of format 2,
// and beside slot_id, attrs and request_id this CLI's names of them.
type (
	slotStatusOutV1 struct {
		Slot       any              `json:"slot"`
		SlotID     any              `json:"slot_id"`
		Kind       string           `json:"kind"`
		Attributes map[string]any   `json:"attributes"`
		Attrs      map[string]any   `json:"attrs"`
		State      lease.State      `json:"state"`
		Holder     *string          `json:"holder"`
		ExpiresAt  *string          `json:"expiresAt"`
		Quarantine *pool.Quarantine `json:"quarantine,omitempty"`
	}
	queueOutV1 struct {
		RequestID  string `json:"requestId"`
		ReqIDSnake string `json:"request_id"`
		Owner      string `json:"owner"`
		Session    string `json:"session"`
		Mode       string `json:"mode"`
		Position   int    `json:"position"`
		EtaMs      int64  `json:"etaMs"`
		Eta        string `json:"eta"`
		EnqueuedAt string `json:"enqueuedAt"`
	}
	statusOutV1 struct {
		OK          bool              `json:"ok"`
		Name        string            `json:"name"`
		Store       string            `json:"store"`
		PoolDir     string            `json:"poolDir"`
		Slots       []slotStatusOutV1 `json:"slots"`
		Queue       []queueOutV1      `json:"queue"`
		MovingAvgMs int64             `json:"movingAvgMs"`
	}
)

// v1 is out in format 1.
func (out statusOut) v1() statusOutV1 {
	o := statusOutV1{OK: out.OK, Name: out.Name, Store: out.Store, PoolDir: out.PoolDir,
		Slots: []slotStatusOutV1{}, Queue: []queueOutV1{}, MovingAvgMs: out.MovingAvgMs}
	for _, s := range out.Slots {
		o.Slots = append(o.Slots, slotStatusOutV1{Slot: s.SlotID, SlotID: s.SlotID, Kind: s.Kind, Attributes: s.Attrs, Attrs: s.Attrs,
			State: s.State, Holder: s.Holder, ExpiresAt: s.ExpiresAt, Quarantine: s.Quarantine})
	}
	for _, q := range out.Queue {
		o.Queue = append(o.Queue, queueOutV1{RequestID: q.RequestID, ReqIDSnake: q.RequestID, Owner: q.Owner, Session: q.Session,
			Mode: q.Mode, Position: q.Position, EtaMs: q.EtaMs, Eta: q.Eta, EnqueuedAt: q.EnqueuedAt})
	}
	return o
}

// stdoutIsTerminal reports whether w is a terminal: status then prints
// its table.
var stdoutIsTerminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func (c *statusCmd) Run(e *env) error {
	format := c.Format
	switch format {
	case "":
		format = "json"
		if stdoutIsTerminal(e.stdout) {
			format = "table"
		}
	case "table", "json", "json1":
	default:
		return cliparse.Usagef("--format %q: expected table, json or json1", c.Format)
	}
	p, err := e.openRead()
	if err != nil {
		return err
	}
	out, err := statusView(e.ctx, p)
	if err != nil {
		return err
	}
	switch format {
	case "table":
		return writeStatus(e.stdout, out, p.Store().Now())
	case "json1":
		return e.emit(out.v1())
	}
	return e.emit(out)
}

type pumpCmd struct {
	Owner string `required:"" placeholder:"OWNER" help:"Who does the bookkeeping (takes the queue lock)."`
}

type pumpOut struct {
	OK             bool              `json:"ok"`
	ReapedSlots    []pool.ReapedSlot `json:"reapedSlots"`
	DroppedEntries []pool.Entry      `json:"droppedEntries"`
	Probed         []pool.Probed     `json:"probed,omitempty"`
	Status         statusOut         `json:"status"`
}

func (c *pumpCmd) Run(e *env) error {
	p, err := e.open(waitFlags{})
	if err != nil {
		return err
	}
	sw, err := p.Pump(e.ctx, c.Owner)
	if err != nil {
		return err
	}
	st, err := statusView(e.ctx, p)
	if err != nil {
		return err
	}
	return e.emit(pumpOut{OK: true, ReapedSlots: sw.ReapedSlots, DroppedEntries: sw.DroppedEntries, Probed: sw.Probed, Status: st})
}
