package poolruncli

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/durable-lease/durable-lease/internal/cli/poolcodes"
	"github.com/durable-lease/durable-lease/runner"
)

// classify gives a run that acquired nothing the code and exit status
// of its refusal, as the pool CLI names them ("held", "saturated",
// "timeout", exit 1; "queue_busy", exit 3; ...): runner reports only that
// nothing was acquired ([runner.AcquireError]) and why, in the pool's or
// the store's own error.
func classify(r *runner.Result) {
	var ae *runner.AcquireError
	if errors.As(r.Err, &ae) {
		r.Code, r.Exit = poolcodes.Classify(ae.Err)
	}
}

// closingLine is the one-line account of a run for stderr: what was
// held, for how long, and how it ended.
func closingLine(r *runner.Result) string {
	var b strings.Builder
	b.WriteString("pool-run: ")
	if r.Held.Kind != "" {
		fmt.Fprintf(&b, "held %s for %s; ", r.Held, roundDuration(r.HeldFor))
	}
	switch r.Code {
	case runner.CodeOK:
		b.WriteString("exit 0")
	case runner.CodeFailed:
		fmt.Fprintf(&b, "failed with exit %d", r.Exit)
	default:
		fmt.Fprintf(&b, "%s (exit %d)", r.Code, r.Exit)
		if r.Err != nil {
			fmt.Fprintf(&b, ": %v", r.Err)
		}
	}
	return b.String()
}

// phaseTable is a gate's summary: each phase with its result and duration.
func phaseTable(r *runner.Result) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  phase\tresult\tduration\t")
	for _, p := range r.Phases {
		d := "-"
		if p.Result != runner.PhaseSkipped {
			d = roundDuration(p.Duration).String()
		}
		res := p.Result
		if p.Result != runner.PhasePassed && p.Result != runner.PhaseSkipped {
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

// summary is the JSON form of a result, as --summary-json writes it, for
// a command as for a gate: Code and Exit as in [runner.Result] (a
// command's own status 75 is "failed", never "lease_lost"), Held null when
// nothing was held, and Phases empty, never null, for a command.
type summary struct {
	OK     bool           `json:"ok"`
	Code   string         `json:"code"`
	Exit   int            `json:"exit"`
	Error  string         `json:"error,omitempty"`
	Held   *summaryHeld   `json:"held"`
	HeldMs int64          `json:"heldMs"`
	Phases []phaseSummary `json:"phases"`
	// Containment is how the work was held, for a run that acquired.
	Containment *runner.Containment `json:"containment,omitempty"`
}

// summaryHeld is what was held, in a [summary]; never its token.
type summaryHeld struct {
	Kind  string `json:"kind"`
	Slot  string `json:"slot,omitempty"`
	Pool  string `json:"pool,omitempty"`
	Owner string `json:"owner"`
}

// phaseSummary is one phase in a [summary].
type phaseSummary struct {
	Name       string `json:"name"`
	Result     string `json:"result"`
	Exit       int    `json:"exit"`
	Reset      bool   `json:"reset"`
	DurationMs int64  `json:"durationMs"`
	Error      string `json:"error,omitempty"`
}

// summaryOf returns r in its JSON form.
func summaryOf(r *runner.Result) summary {
	s := summary{OK: r.Exit == 0, Code: r.Code, Exit: r.Exit, HeldMs: r.HeldFor.Milliseconds(), Phases: []phaseSummary{}, Containment: r.Containment}
	if r.Err != nil {
		s.Error = r.Err.Error()
	}
	if r.Held.Kind != "" {
		h := r.Held
		s.Held = &summaryHeld{Kind: h.Kind, Slot: h.Slot, Pool: h.Pool, Owner: h.Owner}
	}
	for _, p := range r.Phases {
		ps := phaseSummary{Name: p.Name, Result: p.Result, Exit: p.Exit, Reset: p.Reset, DurationMs: p.Duration.Milliseconds()}
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
