package pool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/durable-lease/durable-lease/provision"
)

// nudgeTimeout bounds the nudge command: a nudge is latency, not truth, and
// must not hold up the grant path.
const nudgeTimeout = 15 * time.Second

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
