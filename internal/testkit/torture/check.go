package torture

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/durable-lease/durable-lease/lease"
)

// Report is the checker's verdict and the run's figures.
type Report struct {
	Mode          string
	Processes     int
	Ops           int // lease operations completed (acquire, heartbeat, release)
	Interrupted   int // lease operations begun by a killed client and never finished
	Won           int
	TookOver      int // acquisitions that took over an expired record (lease mode)
	Refused       int
	LostGrants    int // pool grants whose lease was gone when the client looked
	BeatsOK       int
	BeatsFailed   int
	LateRefused   int // deliberately late heartbeats, refused as they must be
	Releases      int
	ReleaseFailed int
	Sections      int            // fenced critical sections completed
	Overstays     int            // sections met by a successor after the first holder's lease had lapsed (not a violation)
	Errors        map[string]int // error outcomes by code
	Starved       int            // operations that failed guard_busy: 5 s without getting into the guard
	Journal       map[string]int // reaped.log events by name
	PoolLog       map[string]int // pool.log events by name
	Kills         int
	KillsWhere    map[string]int // kills by what the dead process left behind
	KillsTarget   map[string]int // kills by what the supervisor waited for
	// GuardsOfKilled counts guard_reaped events naming a killed client's
	// pid: kills that landed inside a guard, recovered by the next comer.
	GuardsOfKilled int
	MaxGap         time.Duration // longest time between two acquisitions (of the lease, or of any slot)
	Wall           time.Duration
	Violations     []string
}

// tenure is one acquisition as its client saw it.
type tenure struct {
	client, kind, tok string
	acq               int64   // acquire stamp, ms
	acqTA             int64   // acquire's return, ns
	stamps            []int64 // known heartbeat stamps, ms, in order
	stampTA           []int64 // when each became known (the call's return), ns
	relTB             int64   // first release call's begin, ns (0: none)
	released          bool
	ttl               int64 // ms
}

// lastStampBefore is the latest stamp known to be on disk before t (ns).
func (t *tenure) lastStampBefore(ns int64) (int64, bool) {
	var s int64
	ok := false
	for i, ta := range t.stampTA {
		if ta < ns {
			s, ok = t.stamps[i], true
		}
	}
	return s, ok
}

// liveAt reports whether the tenure's lease was certainly live at the
// instant ms (an instant in [ms, ms+1) ms): its record was written before,
// its holder had not begun to release it, and its latest known heartbeat
// plus the TTL is not before ms.
func (t *tenure) liveAt(ms int64) bool {
	ns := ms * 1e6
	if t.acqTA >= ns {
		return false
	}
	if t.relTB != 0 && t.relTB < (ms+1)*1e6 {
		return false
	}
	s, ok := t.lastStampBefore(ns)
	return ok && ms <= s+t.ttl
}

func ms(ns int64) int64 { return ns / 1e6 }

// Check replays the journals of a run in dir against the store's history
// and returns the figures and every violation found.
func Check(dir string, res *Result) (*Report, error) {
	r := &Report{Mode: res.Profile.Mode, Processes: res.Processes, Kills: len(res.Kills), Wall: res.Wall,
		Errors: map[string]int{}, Journal: map[string]int{}, PoolLog: map[string]int{},
		KillsWhere: map[string]int{}, KillsTarget: map[string]int{}}
	viol := func(format string, args ...any) {
		if len(r.Violations) < 200 {
			r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
		}
	}
	killed := map[string]bool{}
	for _, k := range res.Kills {
		killed[k.Client] = true
		r.KillsTarget[k.Target]++
		for _, w := range k.Where {
			r.KillsWhere[w]++
		}
	}
	for _, f := range res.Failed {
		viol("wedge: a surviving client failed: %s", f)
	}
	if res.FinalErr != "" {
		viol("wedge: the final process could not take every kind: %s", res.FinalErr)
	}
	journals, err := ReadJournals(filepath.Join(dir, "journals"))
	if err != nil {
		return nil, err
	}
	victimPid := map[int]bool{}
	var tenures []*tenure
	byTok := map[string]*tenure{}
	tookOver := map[string]Entry{} // prev token -> the takeover entry
	lastBegin := map[string]Entry{}
	var wins []int64
	winsByKind := map[string][]int64{}
	for _, cj := range journals {
		if cj.Torn > 1 || cj.Torn == 1 && !(cj.TornLast && killed[cj.Client]) {
			viol("torn journal: %s has %d unparsable lines", cj.Client, cj.Torn)
		}
		var cur *tenure
		var pending *Entry
		for i := range cj.Entries {
			e := cj.Entries[i]
			if e.Op == "start" && killed[e.Client] {
				victimPid[e.Pid] = true
			}
			if e.Phase == "begin" {
				if e.Op == "release" && cur != nil && cur.relTB == 0 {
					cur.relTB = e.TB
				}
				ee := e
				pending = &ee
				continue
			}
			pending = nil
			switch e.Op {
			case "acquire":
				r.Ops++
				switch e.Out {
				case "won", "tookover":
					r.Won++
					if e.PrevCorrupt {
						viol("torn record: %s took over a corrupt record of %s", e.Client, e.Kind)
					}
					if e.Out == "tookover" {
						r.TookOver++
						tookOver[e.PrevTok] = e
					}
					cur = &tenure{client: e.Client, kind: e.Kind, tok: e.Tok, acq: e.Stamp, acqTA: e.TA,
						stamps: []int64{e.Stamp}, stampTA: []int64{e.TA}, ttl: e.TTLms}
					if r.Mode != "pool" && (e.Stamp < ms(e.TB) || e.Stamp > ms(e.TA)) {
						viol("clock: %s acquire stamp %d outside its call [%d, %d]", e.Client, e.Stamp, ms(e.TB), ms(e.TA))
					}
					tenures = append(tenures, cur)
					byTok[e.Tok] = cur
					if e.Client != "final" {
						wins = append(wins, e.Stamp)
						winsByKind[e.Kind] = append(winsByKind[e.Kind], e.Stamp)
					}
				case "refused":
					r.Refused++
					if e.PrevCorrupt {
						viol("torn record: %s was refused by a corrupt live record", e.Client)
					}
				case "lost":
					r.LostGrants++
				default:
					r.Errors[e.Code]++
				}
			case "heartbeat":
				r.Ops++
				if cur == nil || cur.tok != e.Tok {
					viol("journal: %s heartbeat seq %d for a lease it never acquired", e.Client, e.Seq)
					continue
				}
				prev := cur.stamps[len(cur.stamps)-1]
				if e.Out == "ok" {
					r.BeatsOK++
					if e.Stamp-prev > cur.ttl {
						viol("heartbeat after expiry: %s refreshed %s at %d, %d ms after its last heartbeat %d (TTL %d ms)%s",
							e.Client, e.Kind, e.Stamp, e.Stamp-prev, prev, cur.ttl, lateNote(e))
					}
					if e.Stamp < ms(e.TB) || e.Stamp > ms(e.TA) {
						viol("clock: %s heartbeat stamp %d outside its call [%d, %d]", e.Client, e.Stamp, ms(e.TB), ms(e.TA))
					}
					cur.stamps = append(cur.stamps, e.Stamp)
					cur.stampTA = append(cur.stampTA, e.TA)
					continue
				}
				r.BeatsFailed++
				if e.Late && (e.Code == "expired" || e.Code == "not_owner" || e.Code == "not_held") {
					r.LateRefused++
				}
				switch e.Code {
				case "expired", "not_owner", "not_held":
					if ms(e.TA) <= prev+cur.ttl {
						viol("lost record: %s heartbeat on %s failed (%s) at %d, while its lease was live until %d: %s",
							e.Client, e.Kind, e.Code, ms(e.TA), prev+cur.ttl, e.Err)
					}
				default:
					r.Errors[e.Code]++
				}
			case "release":
				r.Ops++
				if cur == nil || cur.tok != e.Tok {
					viol("journal: %s release seq %d for a lease it never acquired", e.Client, e.Seq)
					continue
				}
				if e.Out == "ok" {
					r.Releases++
					cur.released = true
					continue
				}
				r.ReleaseFailed++
				prev := cur.stamps[len(cur.stamps)-1]
				switch e.Code {
				case "not_owner", "not_held":
					if ms(e.TA) <= prev+cur.ttl {
						viol("lost record: %s release of %s failed (%s) at %d, while its lease was live until %d: %s",
							e.Client, e.Kind, e.Code, ms(e.TA), prev+cur.ttl, e.Err)
					}
				default:
					r.Errors[e.Code]++
				}
			case "cs":
				if e.Out == "ok" || e.Out == "interleaved" {
					r.Sections++
				} else {
					r.Errors["cs_"+e.Out]++
				}
			}
		}
		if pending != nil {
			lastBegin[cj.Client] = *pending
			if pending.Op == "acquire" || pending.Op == "heartbeat" || pending.Op == "release" {
				r.Interrupted++
			}
			if !killed[cj.Client] {
				viol("journal: %s (not killed) ends inside a %s call", cj.Client, pending.Op)
			}
		}
	}
	r.Starved = r.Errors["guard_busy"]
	if r.Starved > 0 && res.Profile.StrictGuard {
		viol("wedge: %d operations failed with guard_busy (never got into the guard in 5 s)", r.Starved)
	}
	for code, n := range r.Errors {
		switch code {
		case "queue_busy", "internal", "deadline", "invalid":
			viol("wedge: %d operations failed with %s", n, code)
		}
	}

	// Two holders at once: an acquisition at an instant another tenure of
	// the same kind was certainly live.
	byKind := map[string][]*tenure{}
	var window int64
	for _, t := range tenures {
		byKind[t.kind] = append(byKind[t.kind], t)
		window = max(window, t.stamps[len(t.stamps)-1]+t.ttl-t.acq)
	}
	for kind, ts := range byKind {
		sort.Slice(ts, func(i, j int) bool { return ts[i].acq < ts[j].acq })
		for i, b := range ts {
			for j := i - 1; j >= 0 && ts[j].acq >= b.acq-window-1; j-- {
				if a := ts[j]; a.liveAt(b.acq) {
					viol("two holders of %s: %s acquired at %d while %s's lease (acquired %d, live until at least %d) was live",
						kind, b.client, b.acq, a.client, a.acq, lastOr(a, b.acq)+a.ttl)
				}
			}
		}
	}

	// The fenced resource: another holder's enter line inside a holder's
	// section, at an instant that holder's lease was certainly live.
	resFiles, _ := filepath.Glob(filepath.Join(dir, "res", "*.res"))
	for _, p := range resFiles {
		checkResource(p, byTok, &r.Overstays, viol)
	}

	// Every takeover journaled, every replaced tenure accounted for.
	events, torn, err := readLog(filepath.Join(dir, "store", "reaped.log"))
	if err != nil {
		return nil, err
	}
	if torn > 0 {
		viol("torn journal: reaped.log has %d unparsable lines", torn)
	}
	journaled := map[string]logEvent{}
	for _, ev := range events {
		r.Journal[ev.Event]++
		if ev.Previous != nil {
			if ev.Previous.Corrupt {
				viol("torn record: reaped.log %s of %s replaced a corrupt record: %s", ev.Event, ev.Kind, ev.Previous.Reason)
			}
			journaled[ev.Previous.Token] = ev
			journaled[lease.TokenFingerprint(ev.Previous.Token)] = ev
		}
		if ev.Event == lease.EventGuardReaped && victimPid[ev.PID] {
			r.GuardsOfKilled++
		}
		if ev.Event == lease.EventGuardLost {
			viol("guard: reaped.log journals guard_lost for %s (%s)", ev.Kind, ev.Reason)
		}
		if ev.Event == lease.EventTakeover && r.Mode != "pool" {
			if _, ok := tookOver[ev.Previous.Token]; !ok {
				lb, isKilled := lastBegin[ev.By]
				if !(isKilled && lb.Op == "acquire" && killed[ev.By]) {
					viol("takeover: reaped.log has a takeover of %s by %s that no client journaled", ev.Kind, ev.By)
				}
			}
		}
	}
	for prev, e := range tookOver {
		ev, ok := journaled[prev]
		if !ok || ev.Event != lease.EventTakeover || ev.By != e.Client || ev.Kind != e.Kind {
			viol("takeover not journaled: %s took over %s from %s (token %s) at %d, reaped.log has no such takeover", e.Client, e.Kind, e.PrevOwner, short(prev), e.Stamp)
		}
	}
	for _, t := range tenures {
		if t.released || t.relTB != 0 && lastBegin[t.client].Op == "release" && lastBegin[t.client].TB == t.relTB {
			// Released, or killed inside its release call (which may
			// have happened).
			continue
		}
		if _, ok := journaled[t.tok]; !ok {
			viol("lost record: %s's lease on %s (token %s, acquired %d) was neither released by it nor taken over or reaped in reaped.log", t.client, t.kind, short(t.tok), t.acq)
		}
	}
	if pl, _, err := readLog(filepath.Join(dir, "store", "pool", "pool.log")); err == nil {
		for _, ev := range pl {
			r.PoolLog[ev.Event]++
		}
	}

	// The store at the end: the final process released everything, and
	// whatever record is there must read.
	recs, _ := filepath.Glob(filepath.Join(dir, "store", "*.json"))
	for _, p := range recs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		kind := strings.TrimSuffix(filepath.Base(p), ".json")
		if rec := lease.DecodeRecord(kind, data); rec.Corrupt {
			viol("torn record: %s at the end: %s", kind, rec.Reason)
		}
	}

	// No wedge: the longest time nobody could acquire.
	gaps := winsByKind
	if r.Mode == "pool" {
		gaps = map[string][]int64{"pool": wins}
	}
	for kind, ws := range gaps {
		sort.Slice(ws, func(i, j int) bool { return ws[i] < ws[j] })
		for i := 1; i < len(ws); i++ {
			if g := time.Duration(ws[i]-ws[i-1]) * time.Millisecond; g > r.MaxGap {
				r.MaxGap = g
			}
		}
		if len(ws) == 0 {
			viol("wedge: nobody ever acquired %s", kind)
		}
	}
	if res.Profile.MaxGap > 0 && r.MaxGap > res.Profile.MaxGap {
		viol("wedge: %s went %v without an acquisition (bound %v)", r.Mode, r.MaxGap, res.Profile.MaxGap)
	}
	return r, nil
}

func lastOr(t *tenure, atMs int64) int64 {
	s, _ := t.lastStampBefore(atMs * 1e6)
	return s
}

func lateNote(e Entry) string {
	if e.Late {
		return " (a deliberately late heartbeat)"
	}
	return ""
}

func short(tok string) string {
	if len(tok) > 8 {
		return tok[:8]
	}
	return tok
}

type logEvent struct {
	PID      int
	Event    string
	Kind     string
	By       string
	Reason   string
	Previous *lease.Record
}

// readLog reads a JSON-lines journal; previous records are decoded as the
// library decodes records.
func readLog(path string) ([]logEvent, int, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	var out []logEvent
	torn := 0
	for sc.Scan() {
		var raw struct {
			Event    string          `json:"event"`
			Kind     string          `json:"kind"`
			By       string          `json:"by"`
			Reason   string          `json:"reason"`
			PID      int             `json:"pid"`
			Previous json.RawMessage `json:"previous"`
		}
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			torn++
			continue
		}
		ev := logEvent{PID: raw.PID, Event: raw.Event, Kind: raw.Kind, By: raw.By, Reason: raw.Reason}
		if len(raw.Previous) > 0 {
			ev.Previous = lease.DecodeRecord(raw.Kind, raw.Previous)
			var c struct{ Corrupt bool }
			if json.Unmarshal(raw.Previous, &c) == nil && c.Corrupt {
				ev.Previous.Corrupt = true
			}
		}
		out = append(out, ev)
	}
	return out, torn, sc.Err()
}

// checkResource scans one resource file: between a holder's enter and
// exit lines, another enter line is a violation when, at the instant it
// was written, the first holder's lease was certainly live.
func checkResource(path string, byTok map[string]*tenure, benign *int, viol func(string, ...any)) {
	f, err := os.Open(path)
	if err != nil {
		viol("resource: %v", err)
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var inside []string // the enter line's fields while someone is inside
	n := 0
	for sc.Scan() {
		n++
		fs := strings.Fields(sc.Text())
		if len(fs) != 4 || fs[0] != "enter" && fs[0] != "exit" {
			viol("resource: %s line %d torn: %q", filepath.Base(path), n, sc.Text())
			continue
		}
		at, err := strconv.ParseInt(fs[3], 10, 64)
		if err != nil {
			viol("resource: %s line %d torn: %q", filepath.Base(path), n, sc.Text())
			continue
		}
		if fs[0] == "exit" {
			if inside != nil && inside[2] == fs[2] {
				inside = nil
			}
			continue
		}
		if inside != nil && inside[2] != fs[2] {
			// A client that overstays its lease (a slow process) may
			// legitimately meet its successor here; it is a violation
			// only if one of the two acquired while the other's lease
			// was certainly live.
			x, y := byTok[inside[2]], byTok[fs[2]]
			switch {
			case x != nil && y != nil && (x.liveAt(y.acq) || y.liveAt(x.acq)):
				viol("two holders in the critical section of %s: %s entered at %d (line %d) while %s was inside, and their leases overlapped (acquired %d and %d)",
					filepath.Base(path), fs[1], ms(at), n, inside[1], x.acq, y.acq)
			default:
				*benign++
			}
		}
		inside = fs
	}
}
