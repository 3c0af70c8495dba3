package pool

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/durable-lease/durable-lease/internal/storefile"
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

type queueDoc struct {
	Entries []Entry `json:"entries"`
}

type statsDoc struct {
	DurationsMs []float64 `json:"durationsMs"`
}

// readJSON decodes path into v. A missing or unreadable file leaves v as it
// is: the queue and the statistics are advisory and rebuild themselves.
func readJSON(path string, v any) {
	data, err := storefile.Read(path, maxStateBytes)
	if err != nil {
		return
	}
	_ = json.Unmarshal(data, v)
}

// writeJSON replaces path atomically (a temporary file renamed over it).
func (p *Pool) writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := p.ensureDir(filepath.Dir(path)); err != nil {
		return err
	}
	return storefile.Replace(path, ".tmp-"+newID(), append(data, '\n'))
}

// ensureDir makes sure dir, the pool's directory or one under it, is a
// real directory, so nothing written there lands outside the store.
func (p *Pool) ensureDir(dir string) error {
	if dir != p.dir {
		if err := storefile.Dir(p.dir); err != nil {
			return err
		}
	}
	return storefile.Dir(dir)
}

// appendLine appends one JSON line with a single write to a file of the
// pool's directory.
func (p *Pool) appendLine(path string, v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := p.ensureDir(filepath.Dir(path)); err != nil {
		return err
	}
	return storefile.Append(path, append(line, '\n'))
}

// logEvent appends an event to pool.log; the journal is best effort.
// maxStateBytes bounds what is read of a queue, statistics or grant file:
// a queue of thousands of waiters fits many times over.
const maxStateBytes = 4 << 20

func (p *Pool) logEvent(event string, fields map[string]any) {
	e := map[string]any{"at": lease.FormatTime(p.now()), "event": event}
	for k, v := range fields {
		e[k] = v
	}
	if err := p.appendLine(filepath.Join(p.dir, LogFile), orderedEvent(e)); err != nil {
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

func (p *Pool) grantPath(requestID string) string {
	return filepath.Join(p.dir, GrantsDir, requestID+".json")
}

// readGrantFile returns the grant file of a request as raw fields, or nil.
func (p *Pool) readGrantFile(requestID string) (map[string]json.RawMessage, error) {
	data, err := storefile.Read(p.grantPath(requestID), maxStateBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		return nil, fmt.Errorf("pool: grant file %s is not a JSON object", p.grantPath(requestID))
	}
	return m, nil
}

func (p *Pool) readStats() statsDoc {
	st := statsDoc{DurationsMs: []float64{}}
	readJSON(filepath.Join(p.dir, StatsFile), &st)
	return st
}

// MovingAvg is the mean of the last hold durations, rounded to the
// millisecond as the Node tool rounds it (half up: [1000, 1001] averages
// 1001 ms), or the seed when there is no history. Both tools give the
// same ETAs from one stats.json.
func (p *Pool) MovingAvg() time.Duration {
	d := p.readStats().DurationsMs
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

// sweepGrants deletes grant files older than grantMaxAge: only regular
// files named as grants are, in a grants directory that is not a symlink.
func (p *Pool) sweepGrants() {
	dir := filepath.Join(p.dir, GrantsDir)
	if !storefile.IsDir(p.dir) || !storefile.IsDir(dir) {
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	now := p.now()
	for _, e := range entries {
		id, isJSON := strings.CutSuffix(e.Name(), ".json")
		if !e.Type().IsRegular() || !isJSON || !validRequestID(id) {
			continue
		}
		if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) > grantMaxAge {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
