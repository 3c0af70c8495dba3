package leasecli

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/durable-lease/durable-lease/internal/cli/cliparse"
	"github.com/durable-lease/durable-lease/internal/cli/outcome"
	"github.com/durable-lease/durable-lease/lease"
)

// classify maps an error to its code word and exit status: the lease CLI
// has no errors of its own beyond those every CLI shares.
func classify(err error) (code string, exit int) { return outcome.Classify(err) }

// failureOut is every ok:false object. A refusal by a live lease names its
// holder and when it expires.
type failureOut struct {
	outcome.Failure
	Kind        string        `json:"kind,omitempty"`
	Holder      string        `json:"holder,omitempty"`
	HeldBySelf  *bool         `json:"heldBySelf,omitempty"`
	ExpiresAt   string        `json:"expiresAt,omitempty"`
	ExpiresInMs *int64        `json:"expiresInMs,omitempty"`
	WaitedMs    *int64        `json:"waitedMs,omitempty"`
	Record      *lease.Record `json:"record,omitempty"`
}

// refusal is an error from a command that knows its kind and caller.
type refusal struct {
	err   error
	kind  string
	owner string
	now   time.Time
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// fail prints err as one JSON object, a hint on stderr, and returns the
// exit status. args is the command line, whose verb a usage error points
// to the help of.
func fail(stdout, stderr io.Writer, pretty, reveal bool, err error, args []string) int {
	code, exit := classify(err)
	out := failureOut{Failure: outcome.Failure{Code: code, Error: outcome.Describe(err)}}
	var r *refusal
	if errors.As(err, &r) {
		out.Kind = r.kind
		if rec := lease.LiveRecord(err); rec != nil {
			out.Holder, out.Record = rec.Owner, shown(rec, reveal)
			out.ExpiresAt = lease.FormatTime(rec.ExpiresAt())
			left := rec.ExpiresAt().Sub(r.now).Milliseconds()
			out.ExpiresInMs = &left
			if r.owner != "" {
				self := rec.Owner == r.owner
				out.HeldBySelf = &self
			}
		}
		var held *lease.HeldError
		if errors.As(err, &held) && held.Timeout {
			w := held.Waited.Milliseconds()
			out.WaitedMs = &w
		}
	}
	_ = outcome.Write(stdout, out, pretty)
	if exit == outcome.ExitUsage {
		msg := "lease: " + outcome.Unprefixed(outcome.Describe(err), "lease: ")
		if out.Code == "usage" {
			msg += "\n" + cliparse.HelpHint(new(cli), "lease", args)
		}
		fmt.Fprintln(stderr, msg)
	}
	return exit
}
