//go:build !unix

package provision

import (
	"time"

	"mvdan.cc/sh/v3/interp"
)

// processes stands in for the Unix process group bookkeeping. Process groups
// are a Unix notion, so on other platforms a cancelled command stops only
// the programs it started directly, as the interpreter's default exec
// handler does.
type processes struct {
	grace time.Duration
}

// middleware is an interp.ExecHandlers middleware that replaces the
// interpreter's default exec handler with one using p's grace period.
func (p *processes) middleware(interp.ExecHandlerFunc) interp.ExecHandlerFunc {
	return interp.DefaultExecHandler(p.grace)
}

// stop does nothing; the default exec handler stops its own programs.
func (p *processes) stop() {}
