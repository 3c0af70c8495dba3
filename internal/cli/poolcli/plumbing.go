package poolcli

import (
	"github.com/durable-lease/durable-lease/pool"
)

// The plumbing verbs run one step of the queue protocol each, for callers
// that drive a waiter themselves (a conformance suite, a broker of their
// own). An entry they create has no waiter behind it: whoever created it
// keeps it live with heartbeat-entry and grants it with try-grant. Both
// act for the entry's owner only (another owner is refused not_owner,
// nothing touched), and answer granted (exit 1, with the slot) for a
// request that has left the queue with a slot.

type enqueueCmd struct {
	Owner   string `required:"" placeholder:"OWNER" help:"Who will hold the slot."`
	Session string `placeholder:"NAME" help:"The requester's name (default: the owner)."`
	Mode    string `default:"blocking" enum:"blocking,async" placeholder:"MODE" help:"The entry's mode: blocking or async (an async entry's grant sends a nudge)."`
}

type entryOut struct {
	OK         bool       `json:"ok"`
	Queued     bool       `json:"queued"`
	RequestID  string     `json:"requestId"`
	ReqIDSnake string     `json:"request_id"`
	Entry      pool.Entry `json:"entry"`
	Position   int        `json:"position"`
	EtaMs      int64      `json:"etaMs"`
	Eta        string     `json:"eta"`
}

func (c *enqueueCmd) Run(e *env) error {
	p, err := e.open(waitFlags{})
	if err != nil {
		return err
	}
	q, err := p.Enqueue(e.ctx, c.Owner, c.Session, c.Mode)
	if err != nil {
		return err
	}
	return e.emit(entryOut{OK: true, Queued: true, RequestID: q.RequestID, ReqIDSnake: q.RequestID, Entry: q.Entry,
		Position: q.Position.Position, EtaMs: q.EtaMs, Eta: pool.FormatEta(q.EtaMs)})
}

type tryGrantCmd struct {
	Request string `required:"" placeholder:"ID" help:"The queued entry's request id."`
	Owner   string `required:"" placeholder:"OWNER" help:"The entry's owner, who takes the slot (another owner is refused: exit 1, not_owner)."`
	waitFlags
}

func (c *tryGrantCmd) Run(e *env) error {
	p, err := e.open(c.waitFlags)
	if err != nil {
		return err
	}
	g, err := p.TryGrant(e.ctx, c.Request, c.Owner)
	if err != nil {
		return &withRequest{err: err, id: c.Request}
	}
	return e.emit(g)
}

type heartbeatEntryCmd struct {
	Request string `required:"" placeholder:"ID" help:"The queued entry's request id."`
	Owner   string `required:"" placeholder:"OWNER" help:"The entry's owner (another owner is refused: exit 1, not_owner)."`
}

type positionOut struct {
	OK         bool   `json:"ok"`
	Queued     bool   `json:"queued"`
	RequestID  string `json:"requestId"`
	ReqIDSnake string `json:"request_id"`
	Position   int    `json:"position"`
	EtaMs      int64  `json:"etaMs"`
	Eta        string `json:"eta"`
}

func (c *heartbeatEntryCmd) Run(e *env) error {
	p, err := e.open(waitFlags{})
	if err != nil {
		return err
	}
	pos, err := p.HeartbeatEntry(e.ctx, c.Request, c.Owner)
	if err != nil {
		return &withRequest{err: err, id: c.Request}
	}
	return e.emit(positionOut{OK: true, Queued: true, RequestID: c.Request, ReqIDSnake: c.Request,
		Position: pos.Position, EtaMs: pos.EtaMs, Eta: pool.FormatEta(pos.EtaMs)})
}
