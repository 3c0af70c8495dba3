// Package jsonout holds what the durable-lease CLIs share about their
// output: exactly one JSON object on stdout, and the exit statuses. It is
// package outcome plus the errors of package pool, for the CLIs that use
// pools.
package jsonout

import (
	"io"

	"github.com/durable-lease/durable-lease/internal/outcome"
)

// Exit statuses shared by every CLI of the project (see package outcome).
const (
	ExitOK       = outcome.ExitOK
	ExitRefused  = outcome.ExitRefused
	ExitUsage    = outcome.ExitUsage
	ExitInternal = outcome.ExitInternal
)

// Failure is the common part of every ok:false object.
type Failure = outcome.Failure

// Write prints v as one JSON object and a newline, indented when pretty.
// HTML characters are not escaped, so payloads read back as written.
func Write(w io.Writer, v any, pretty bool) error { return outcome.Write(w, v, pretty) }
