package poolcli

import (
	"context"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

type statusCmd struct{}

type slotStatusOut struct {
	Slot       any            `json:"slot"`
	SlotID     any            `json:"slot_id"`
	Kind       string         `json:"kind"`
	Attributes map[string]any `json:"attributes"`
	Attrs      map[string]any `json:"attrs"`
	State      lease.State    `json:"state"`
	Holder     *string        `json:"holder"`
	ExpiresAt  *string        `json:"expiresAt"`
	// Quarantine is set, and state is "quarantined", when the slot is out
	// of rotation.
	Quarantine *pool.Quarantine `json:"quarantine,omitempty"`
}

// stateQuarantined is the state status gives a quarantined slot (its
// lease is held by the quarantine).
const stateQuarantined lease.State = "quarantined"

type queueOut struct {
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

type statusOut struct {
	OK          bool            `json:"ok"`
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
	out := statusOut{OK: true, Name: p.Config().Name, Store: st.Store, PoolDir: st.Dir,
		Slots: []slotStatusOut{}, Queue: []queueOut{}, MovingAvgMs: st.MovingAvgMs}
	for _, s := range st.Slots {
		so := slotStatusOut{Slot: s.Slot.RawID, SlotID: s.Slot.RawID, Kind: s.Slot.Kind,
			Attributes: s.Slot.Attributes, Attrs: s.Slot.Attributes, State: s.State, Quarantine: s.Quarantine}
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
		out.Queue = append(out.Queue, queueOut{RequestID: q.ID, ReqIDSnake: q.ID, Owner: q.Owner, Session: q.Session,
			Mode: q.Mode, Position: q.Position.Position, EtaMs: q.EtaMs, Eta: pool.FormatEta(q.EtaMs), EnqueuedAt: q.EnqueuedAt})
	}
	return out, nil
}

func (c *statusCmd) Run(e *env) error {
	p, err := e.openRead()
	if err != nil {
		return err
	}
	out, err := statusView(e.ctx, p)
	if err != nil {
		return err
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
