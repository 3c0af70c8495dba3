package runner

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

// Line is the one-line account of a run for stderr: what was held, for
// how long, and how it ended.
func (r *Result) Line() string {
	var b strings.Builder
	b.WriteString("pool-run: ")
	if r.Held.Kind != "" {
		fmt.Fprintf(&b, "held %s for %s; ", r.Held, roundDuration(r.HeldFor))
	}
	switch r.Code {
	case "ok":
		b.WriteString("exit 0")
	case "failed":
		fmt.Fprintf(&b, "failed with exit %d", r.Exit)
	default:
		fmt.Fprintf(&b, "%s (exit %d)", r.Code, r.Exit)
		if r.Err != nil {
			fmt.Fprintf(&b, ": %v", r.Err)
		}
	}
	return b.String()
}

// Table is a gate's summary: each phase with its result and duration.
func (r *Result) Table() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  phase\tresult\tduration\t")
	for _, p := range r.Phases {
		d := "-"
		if p.Result != PhaseSkipped {
			d = roundDuration(p.Duration).String()
		}
		res := p.Result
		if p.Result != PhasePassed && p.Result != PhaseSkipped {
			res = fmt.Sprintf("%s (exit %d)", p.Result, p.Exit)
		}
		if p.Reset {
			res += ", after reset"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t\n", p.Name, res, d)
	}
	_ = tw.Flush()
	return b.String()
}

// Summary is the JSON form of a result, as --summary-json writes it, for
// a command as for a gate: Code and Exit as in [Result] (a command's own
// status 75 is "failed", never "lease_lost"), Held null when nothing was
// held, and Phases empty, never null, for a command.
type Summary struct {
	OK     bool           `json:"ok"`
	Code   string         `json:"code"`
	Exit   int            `json:"exit"`
	Error  string         `json:"error,omitempty"`
	Held   *Held          `json:"held"`
	HeldMs int64          `json:"heldMs"`
	Phases []PhaseSummary `json:"phases"`
}

// PhaseSummary is one phase in a [Summary].
type PhaseSummary struct {
	Name       string `json:"name"`
	Result     string `json:"result"`
	Exit       int    `json:"exit"`
	Reset      bool   `json:"reset"`
	DurationMs int64  `json:"durationMs"`
	Error      string `json:"error,omitempty"`
}

// Summary returns r in its JSON form.
func (r *Result) Summary() Summary {
	s := Summary{OK: r.Exit == 0, Code: r.Code, Exit: r.Exit, HeldMs: r.HeldFor.Milliseconds(), Phases: []PhaseSummary{}}
	if r.Err != nil {
		s.Error = r.Err.Error()
	}
	if r.Held.Kind != "" {
		h := r.Held
		s.Held = &h
	}
	for _, p := range r.Phases {
		ps := PhaseSummary{Name: p.Name, Result: p.Result, Exit: p.Exit, Reset: p.Reset, DurationMs: p.Duration.Milliseconds()}
		if p.Err != nil {
			ps.Error = p.Err.Error()
		}
		s.Phases = append(s.Phases, ps)
	}
	return s
}

// roundDuration keeps a duration readable: 10 us below a millisecond, ms
// below a second, then 0.1 s.
func roundDuration(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}
