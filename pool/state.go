package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// Names of the files in a pool's directory <store>/<name>/.
const (
	QueueFile  = "queue.json"
	StatsFile  = "stats.json"
	GrantsDir  = "grants"
	NudgesFile = "nudges.jsonl"
	LogFile    = "pool.log"
)

// movingAvgWindow is how many recent hold durations feed the ETA.
const movingAvgWindow = 10

// grantMaxAge is how long a grant file is kept for a claim before the sweep
// deletes it.
const grantMaxAge = 24 * time.Hour

// requestIDPattern bounds request ids: they name files under grants/.
const requestIDPattern = `^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`

// validRequestID checks requestIDPattern by hand (a {0,127} regexp is slow
// to compile, and every CLI call would pay for it).
func validRequestID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || i > 0 && (c == '_' || c == '-')
		if !ok {
			return false
		}
	}
	return true
}

// Entry is one waiter in queue.json.
type Entry struct {
	ID         string `json:"id"`
	Owner      string `json:"owner"`
	Session    string `json:"session"`
	Mode       string `json:"mode"`
	EnqueuedAt string `json:"enqueuedAt"`
	Heartbeat  string `json:"heartbeat"`
}

// Modes of a queue entry.
const (
	ModeBlocking = "blocking"
	ModeAsync    = "async"
)

// logEvent appends an event to the pool's log; the log is best effort.
func (p *Pool) logEvent(ctx context.Context, event string, fields map[string]any) {
	e := map[string]any{"at": lease.FormatTime(p.now()), "event": event}
	for k, v := range fields {
		e[k] = v
	}
	line, err := json.Marshal(orderedEvent(e))
	if err == nil {
		err = p.backend.AppendLog(context.WithoutCancel(ctx), line)
	}
	if err != nil {
		fmt.Fprintf(p.log, "pool: journal: %v\n", err)
	}
}

// orderedEvent writes "at" and "event" first, then the rest sorted.
type orderedEvent map[string]any

func (e orderedEvent) MarshalJSON() ([]byte, error) {
	out := []byte("{")
	keys := append([]string{"at", "event"}, without(sortedKeys(map[string]any(e)), "at", "event")...)
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(e[k])
		if err != nil {
			return nil, err
		}
		out = append(append(append(out, kb...), ':'), vb...)
	}
	return append(out, '}'), nil
}

func without(keys []string, drop ...string) []string {
	out := keys[:0:0]
	for _, k := range keys {
		if !contains(drop, k) {
			out = append(out, k)
		}
	}
	return out
}

// putGrant stores the grant document of a request.
func (p *Pool) putGrant(ctx context.Context, requestID string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return p.backend.PutGrant(context.WithoutCancel(ctx), requestID, append(data, '\n'))
}

// readGrant returns the grant document of a request as raw fields, or nil.
func (p *Pool) readGrant(ctx context.Context, requestID string) (map[string]json.RawMessage, error) {
	data, err := p.backend.Grant(ctx, requestID)
	if err != nil || data == nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		return nil, fmt.Errorf("pool: the grant of request %s in %s is not a JSON object", requestID, p.backend.Where())
	}
	return m, nil
}

// MovingAvg is the mean of the last hold durations, rounded to the
// millisecond as the Node tool rounds it (half up: [1000, 1001] averages
// 1001 ms), or the seed when there is no history. Both tools give the
// same ETAs from one stats.json.
func (p *Pool) MovingAvg(ctx context.Context) time.Duration {
	d, err := p.backend.Holds(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		// They only feed ETAs, which fall back to the seed; but a
		// statistics file that cannot be read is said once.
		p.holdsWarned.Do(func() { fmt.Fprintf(p.log, "pool: reading the hold times (ETAs use the seed): %v\n", err) })
	}
	if len(d) == 0 {
		return p.cfg.MovingAvgSeed
	}
	var sum float64
	for _, x := range d {
		sum += x
	}
	return time.Duration(roundHalfUp(sum/float64(len(d)))) * time.Millisecond
}

// roundHalfUp rounds x to the nearest integer, a tie toward +∞: the
// rounding of JavaScript's Math.round (-2.5 gives -2, 0.49999999999999994
// gives 0, where floor(x+0.5) would give 1).
func roundHalfUp(x float64) float64 {
	f := math.Floor(x)
	if x-f >= 0.5 {
		return f + 1
	}
	return f
}
