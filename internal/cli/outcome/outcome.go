// Package outcome is how a call of a durable-lease CLI ends: exactly one
// JSON object on stdout, a code word and an exit status. It knows the
// errors of the command line and of package lease; package poolcodes adds
// those of package pool. The lease CLI meets no pool errors and uses
// outcome alone, so its binary does not link (or initialise) the pool and
// its shell interpreter.
package outcome

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/internal/cli/cliparse"
	"github.com/durable-lease/durable-lease/internal/sys/jsonfast"
	"github.com/durable-lease/durable-lease/internal/sys/storefile"
	"github.com/durable-lease/durable-lease/lease"
)

// Exit statuses shared by every CLI of the project.
const (
	// ExitOK is success; a status query always exits with it.
	ExitOK = 0
	// ExitRefused is an operational refusal: held, expired, not owner,
	// timed out, saturated.
	ExitRefused = 1
	// ExitUsage is a usage or validation error; nothing was changed.
	ExitUsage = 2
	// ExitInternal is an unexpected failure (I/O, a stuck guard).
	ExitInternal = 3
)

// Failure is the common part of every ok:false object.
type Failure struct {
	OK    bool   `json:"ok"`
	Code  string `json:"code"`
	Error string `json:"error"`
}

// Write prints v as one JSON object and a newline, indented when pretty.
// HTML characters are not escaped, so payloads read back as written.
func Write(w io.Writer, v any, pretty bool) error {
	if a, ok := v.(Appender); ok && !pretty {
		if b, ok := a.AppendJSON(make([]byte, 0, 1024)); ok {
			_, err := w.Write(append(b, '\n'))
			return err
		}
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if pretty {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(v)
}

// Appender is an output that writes itself exactly as Write's encoder
// would write it, without encoding/json's reflection, which a process
// pays on the first value of each type it encodes: for the outputs of the
// hot commands, which encode one line per process (docs/FAST-PATHS.md).
// ok false hands it to the encoder after all.
type Appender interface {
	AppendJSON(dst []byte) (out []byte, ok bool)
}

// Object writes a JSON object member by member as the encoder writes
// it, for an [Appender]: each method appends the member's name (with the
// comma before it when it is not the first) and its value. OK is false
// once a value could not be written so (a marshaler that failed), and the
// caller then hands the whole value to the encoder.
type Object struct {
	B  []byte
	OK bool
	n  int
}

// NewObject starts an object at the end of dst.
func NewObject(dst []byte) *Object { return &Object{B: append(dst, '{'), OK: true} }

func (o *Object) name(name string) {
	if o.n > 0 {
		o.B = append(o.B, ',')
	}
	o.n++
	o.B = jsonfast.AppendString(o.B, name, false)
	o.B = append(o.B, ':')
}

// Str appends a string member.
func (o *Object) Str(name, v string) {
	o.name(name)
	o.B = jsonfast.AppendString(o.B, v, false)
}

// Bool appends a boolean member.
func (o *Object) Bool(name string, v bool) {
	o.name(name)
	o.B = strconv.AppendBool(o.B, v)
}

// Int appends an integer member.
func (o *Object) Int(name string, v int64) {
	o.name(name)
	o.B = strconv.AppendInt(o.B, v, 10)
}

// Marshaler appends what m's MarshalJSON returns (null when isNil), as the
// encoder writes it when that is already compact JSON, which the caller
// must know it is.
func (o *Object) Marshaler(name string, m json.Marshaler, isNil bool) {
	o.name(name)
	if isNil {
		o.B = append(o.B, "null"...)
		return
	}
	b, err := m.MarshalJSON()
	if err != nil {
		o.OK = false
		return
	}
	o.B = append(o.B, b...)
}

// End closes the object and returns what an Appender returns.
func (o *Object) End() ([]byte, bool) { return append(o.B, '}'), o.OK }

// Classify maps the errors of the command line and of package lease,
// signals and the rest to a stable code word and an exit status.
// poolcodes.Classify checks the errors of package pool first and falls back
// to it; with each CLI's own checks they are the only place a code or an
// exit status is decided.
func Classify(err error) (code string, exit int) {
	switch {
	case errors.Is(err, dirstore.ErrUnsafeStore):
		return "unsafe_store", ExitUsage
	case errors.Is(err, dirstore.ErrStoreSplit):
		return "store_conflict", ExitUsage
	case errors.Is(err, cliparse.ErrUsage), errors.Is(err, lease.ErrInvalid):
		return "usage", ExitUsage
	case errors.Is(err, lease.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return "timeout", ExitRefused // before held: a wait that ended matches both
	case errors.Is(err, lease.ErrHeld):
		return "held", ExitRefused
	case errors.Is(err, lease.ErrNotHeld):
		return "not_held", ExitRefused
	case errors.Is(err, lease.ErrExpired):
		return "expired", ExitRefused
	case errors.Is(err, lease.ErrTokenMismatch):
		return "token_mismatch", ExitRefused // before not_owner, which it also matches
	case errors.Is(err, lease.ErrNotOwner):
		return "not_owner", ExitRefused
	case errors.Is(err, lease.ErrNotDead):
		return "not_dead", ExitRefused
	case errors.Is(err, lease.ErrWorkRunning):
		// The previous holder's work runs on in a cgroup this user cannot
		// end: the lease stays where it is, as for a live holder.
		return "work_running", ExitRefused
	case errors.Is(err, context.Canceled):
		return "interrupted", ExitRefused
	case errors.Is(err, lease.ErrGuardBusy):
		return "guard_busy", ExitInternal
	case errors.Is(err, lease.ErrUnavailable):
		return "unavailable", ExitInternal
	case errors.Is(err, storefile.ErrTooLarge):
		// A store file over its read bound: not read, never taken for
		// an empty one, and nothing changed.
		return "too_large", ExitInternal
	}
	return "internal", ExitInternal
}

// Describe is err's text for people: a cancellation, which the CLIs only
// get from a signal, says so instead of "context canceled".
func Describe(err error) string {
	if errors.Is(err, context.Canceled) {
		return "interrupted by a signal before it finished"
	}
	return err.Error()
}

// Unprefixed is msg without the first of prefixes it starts with, for a
// CLI that puts its own name before a message on stderr: "pool: " and
// "lease: held" make "pool: held", not "pool: lease: held". Each message
// a CLI prints carries one prefix.
func Unprefixed(msg string, prefixes ...string) string {
	for _, p := range prefixes {
		if rest, ok := strings.CutPrefix(msg, p); ok {
			return rest
		}
	}
	return msg
}
