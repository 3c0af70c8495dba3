// Command lease takes, refreshes, releases and inspects durable leases.
// See `lease --help` and docs/PROTOCOL.md.
package main

import (
	"os"
	"syscall"

	"github.com/durable-lease/durable-lease/internal/cli/cliparse/signals"
	"github.com/durable-lease/durable-lease/internal/cli/leasecli"
)

func main() {
	// SIGINT, SIGTERM and SIGHUP cancel a wait. They are registered only
	// when something waits (see package signals): until the store is
	// touched they end the process, and a call that never waits runs to
	// its end.
	sigs := signals.New(os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	os.Exit(leasecli.MainSignals(sigs, os.Args[1:], os.Stdout, os.Stderr))
}
