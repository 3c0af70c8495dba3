package gitstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// Journal appends e to the journal ref on its own.
func (b *Backend) Journal(ctx context.Context, e lease.Event) error {
	pending := newAttempts()
	for round := 1; ; round++ {
		if pending.unknown >= maxUnknown {
			return fmt.Errorf("%w: %s: the outcome of %d journal appends is unknown", ErrUnreachable, b.loc, pending.unknown)
		}
		_, jtip, err := b.loadAll(ctx, nil, true)
		if err != nil {
			return err
		}
		if pending.writes[jtip] != nil {
			return nil // an append whose outcome was unknown landed
		}
		_, done, err := b.apply(ctx, "", tip{}, jtip, lease.Change{Op: lease.OpNone, Event: &e}, pending)
		if err != nil || done {
			return err
		}
		if round == maxRounds {
			return fmt.Errorf("gitstore: journal: gave up after %d conflicting appends", round)
		}
	}
}

// maxEvents bounds what Events reads of the journal, as the etcd store
// keeps its newest 10 000.
const maxEvents = 10000

// Events reads the journal's newest events, oldest first.
func (b *Backend) Events(ctx context.Context) ([]lease.Event, error) {
	ref := b.JournalRef()
	b.fetchMu.Lock()
	have, _, err := b.fetch(ctx, fullDepth, ref)
	b.fetchMu.Unlock()
	if err != nil || !have[ref] {
		return nil, err
	}
	// The newest maxEvents, oldest first (-n applies before --reverse).
	out, err := b.git(ctx, nil, "log", "-n", strconv.Itoa(maxEvents), "--reverse", "--format=%B%x00", scratchRef(ref))
	if err != nil {
		return nil, fmt.Errorf("gitstore: journal: %w", err)
	}
	var evs []lease.Event
	for _, msg := range strings.Split(string(out), "\x00") {
		msg = strings.TrimSpace(msg)
		if msg == "" {
			continue
		}
		e, err := decodeEvent([]byte(msg))
		if err != nil {
			return nil, fmt.Errorf("gitstore: journal: %w", err)
		}
		evs = append(evs, e)
	}
	return evs, nil
}

// decodeEvent parses one journal line.
func decodeEvent(line []byte) (lease.Event, error) {
	var e struct {
		lease.Event
		At       string          `json:"at"`
		Previous json.RawMessage `json:"previous"`
	}
	if err := json.Unmarshal(line, &e); err != nil {
		return lease.Event{}, err
	}
	if len(e.Previous) > 0 && string(e.Previous) != "null" {
		e.Event.Previous = lease.DecodeRecord(e.Kind, e.Previous)
	}
	e.Event.At, _ = time.Parse(time.RFC3339Nano, e.At)
	return e.Event, nil
}
