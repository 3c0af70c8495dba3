package torture

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Entry is one line of a client journal.
type Entry struct {
	Client string `json:"c"`
	Seq    int    `json:"seq"`
	// Phase is "begin" (just before a call) or "end" (just after it returns).
	Phase string `json:"ph"`
	// Op is acquire, heartbeat, release, cs (the fenced critical section),
	// start or exit.
	Op   string `json:"op"`
	Kind string `json:"kind,omitempty"`
	Slot string `json:"slot,omitempty"`
	// Out is the outcome: won, tookover, refused, ok, failed, error.
	Out  string `json:"out,omitempty"`
	Code string `json:"code,omitempty"`
	Tok  string `json:"tok,omitempty"`
	// Stamp is the heartbeat (ms since the epoch) of the record the call
	// returned: the acquire's or heartbeat's "now" as the library saw it.
	Stamp int64 `json:"stamp,omitempty"`
	// TTLms is the lease's TTL in milliseconds.
	TTLms int64 `json:"ttl,omitempty"`
	// PrevTok and PrevOwner name the record a takeover replaced.
	PrevTok     string `json:"ptok,omitempty"`
	PrevOwner   string `json:"powner,omitempty"`
	PrevCorrupt bool   `json:"pcorrupt,omitempty"`
	// Late marks a heartbeat deliberately sent after the TTL had passed.
	Late bool   `json:"late,omitempty"`
	Err  string `json:"err,omitempty"`
	// TB and TA are wall-clock nanoseconds taken just before the call and
	// just after it returned (TA is zero on a begin line).
	TB int64 `json:"tb"`
	TA int64 `json:"ta,omitempty"`
	// Pid is the client's process id (start line).
	Pid int `json:"pid,omitempty"`
}

// journal appends entries to one file, one write(2) per line.
type journal struct {
	mu     sync.Mutex
	f      *os.File
	client string
	seq    int
}

func openJournal(path, client string) (*journal, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &journal{f: f, client: client}, nil
}

func (j *journal) write(e Entry) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seq++
	e.Client, e.Seq = j.client, j.seq
	b, err := json.Marshal(e)
	if err != nil {
		panic(err)
	}
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		fmt.Fprintln(os.Stderr, "torture client: journal:", err)
		os.Exit(4)
	}
}

// begin journals the start of a call and returns its begin time.
func (j *journal) begin(op, kind string) int64 {
	tb := time.Now().UnixNano()
	j.write(Entry{Phase: "begin", Op: op, Kind: kind, TB: tb})
	return tb
}

// ClientJournal is one client's parsed journal.
type ClientJournal struct {
	Client  string
	Path    string
	Entries []Entry
	// Torn counts lines that did not parse; only the last line of a killed
	// client may be torn.
	Torn     int
	TornLast bool
}

// ReadJournals reads every *.jsonl journal in dir.
func ReadJournals(dir string) ([]*ClientJournal, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []*ClientJournal
	for _, p := range paths {
		cj := &ClientJournal{Client: strings.TrimSuffix(filepath.Base(p), ".jsonl"), Path: p}
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
		for i, l := range lines {
			var e Entry
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				cj.Torn++
				cj.TornLast = i == len(lines)-1
				continue
			}
			cj.Entries = append(cj.Entries, e)
		}
		out = append(out, cj)
	}
	return out, nil
}
