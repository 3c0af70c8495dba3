// Command pool hands out slots of a pool of interchangeable resources.
// See `pool --help` and docs/PROTOCOL.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/durable-lease/durable-lease/internal/cli/poolcli"
)

func main() {
	// The signals are not unregistered before os.Exit: that would only
	// cost a round trip per signal with the runtime's signal thread.
	ctx, _ := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	os.Exit(poolcli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
