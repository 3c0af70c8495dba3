// Package jsonout holds what the durable-lease CLIs share about their
// output: exactly one JSON object on stdout, and the exit statuses.
package jsonout

import (
	"encoding/json"
	"io"
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
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if pretty {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(v)
}
