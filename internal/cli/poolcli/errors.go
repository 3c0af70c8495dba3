package poolcli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/durable-lease/durable-lease/internal/cli/cliparse"
	"github.com/durable-lease/durable-lease/internal/cli/outcome"
	"github.com/durable-lease/durable-lease/internal/cli/poolcodes"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// classify maps an error to its code word and exit status; the mapping
// is shared with pool-run in [poolcodes.Classify], after the one error only
// this CLI's plumbing and waiter verbs meet: a request they need queued
// was granted (code granted, exit 1: the step was not made, and the
// caller stops heartbeating and claims the grant). It is checked first,
// as it also matches pool.ErrQueueEntryLost.
func classify(err error) (code string, exit int) {
	if errors.Is(err, pool.ErrGranted) {
		return "granted", outcome.ExitRefused
	}
	return poolcodes.Classify(err)
}

// failureOut is every ok:false object; the optional fields say where a
// refused waiter stood, which slot failed, or who holds a slot.
type failureOut struct {
	outcome.Failure
	State      string `json:"state,omitempty"`
	RequestID  string `json:"requestId,omitempty"`
	ReqIDSnake string `json:"request_id,omitempty"`
	Position   int    `json:"position,omitempty"`
	EtaMs      *int64 `json:"etaMs,omitempty"`
	Eta        string `json:"eta,omitempty"`
	WaitedMs   *int64 `json:"waitedMs,omitempty"`
	Slot       any    `json:"slot,omitempty"`
	SlotID     any    `json:"slot_id,omitempty"`
	Holder     string `json:"holder,omitempty"`
	ExpiresAt  string `json:"expiresAt,omitempty"`
}

// withRequest is an error that knows the request it concerns.
type withRequest struct {
	err error
	id  string
}

func (w *withRequest) Error() string { return w.err.Error() }
func (w *withRequest) Unwrap() error { return w.err }

// fail prints err as one JSON object (or, in --shell mode, as a comment and
// `false`, so an eval of the output fails without running any text) and
// returns the exit status. args is the command line, whose verb a usage
// error points to the help of (a mistake in the pool file, which the
// error places, gets no such hint).
func fail(stdout, stderr io.Writer, pretty, shell bool, err error, args []string) int {
	code, exit := classify(err)
	out := failureOut{Failure: outcome.Failure{Code: code, Error: outcome.Describe(err)}}
	var qe *pool.QueueError
	if errors.As(err, &qe) {
		out.Position = qe.Position
		eta := qe.EtaMs
		out.EtaMs, out.Eta = &eta, pool.FormatEta(eta)
		if qe.RequestID != "" {
			out.RequestID, out.ReqIDSnake = qe.RequestID, qe.RequestID
		}
		if qe.WaitedMs > 0 {
			w := qe.WaitedMs
			out.WaitedMs = &w
		}
	}
	var se *pool.SlotError
	if errors.As(err, &se) {
		out.State, out.Slot, out.SlotID = se.State, se.Slot.RawID, se.Slot.RawID
	}
	var ce *pool.ClaimError
	if errors.As(err, &ce) {
		out.State = ce.State
		if len(ce.Slot) > 0 {
			out.Slot, out.SlotID = ce.Slot, ce.Slot
		}
	}
	var ge *pool.GrantedError
	if errors.As(err, &ge) {
		out.State = ge.State
		if len(ge.Slot) > 0 {
			out.Slot, out.SlotID = ge.Slot, ge.Slot
		}
		out.RequestID, out.ReqIDSnake = ge.RequestID, ge.RequestID
	}
	var wr *withRequest
	if errors.As(err, &wr) {
		out.RequestID, out.ReqIDSnake = wr.id, wr.id
	}
	if rec := lease.LiveRecord(err); rec != nil {
		out.Holder, out.ExpiresAt = rec.Owner, lease.FormatTime(rec.ExpiresAt())
	}
	if shell {
		var b strings.Builder
		_ = outcome.Write(&b, out, false)
		fmt.Fprintf(stdout, "# %s\nfalse\n", strings.TrimSpace(b.String()))
	} else {
		_ = outcome.Write(stdout, out, pretty)
	}
	msg := "pool: " + outcome.Unprefixed(outcome.Describe(err), "pool: ", "lease: ")
	if exit == outcome.ExitUsage && out.Code == "usage" && !errors.Is(err, pool.ErrConfig) {
		msg += "\n" + cliparse.HelpHint(new(cli), "pool", args)
	}
	fmt.Fprintln(stderr, msg)
	return exit
}
