package poolcli

import "github.com/durable-lease/durable-lease/pool"

type quarantineCmd struct {
	slotFlags
	Owner  string `required:"" placeholder:"OWNER" help:"The operator: holds the quarantine, is journaled."`
	Reason string `required:"" placeholder:"TEXT" help:"Why the slot is out of rotation (shown in status and the log)."`
	Force  bool   `help:"Quarantine a held slot too, removing its holder's lease first (journaled, like release --force)."`
}

type quarantineOut struct {
	slotOut
	Quarantine pool.Quarantine `json:"quarantine"`
	Already    bool            `json:"already"`
}

func (c *quarantineCmd) Run(e *env) error {
	p, err := e.open(waitFlags{})
	if err != nil {
		return err
	}
	q, err := p.Quarantine(e.ctx, c.Slot, c.Owner, c.Reason, c.Force)
	if err != nil {
		return err
	}
	return e.emit(quarantineOut{slotOut: slotResult("quarantined", q.Slot), Quarantine: q.Quarantine, Already: q.Already})
}

type unquarantineCmd struct {
	slotFlags
	Owner string `required:"" placeholder:"OWNER" help:"The operator: runs reset and health on the slot, is journaled."`
	waitFlags
}

func (c *unquarantineCmd) Run(e *env) error {
	p, err := e.open(c.waitFlags)
	if err != nil {
		return err
	}
	s, err := p.Unquarantine(e.ctx, c.Slot, c.Owner)
	if err != nil {
		return err
	}
	return e.emit(slotResult("unquarantined", s))
}
