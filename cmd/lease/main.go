// Command lease takes, refreshes, releases and inspects durable leases.
// See `lease --help` and docs/PROTOCOL.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/durable-lease/durable-lease/internal/leasecli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	code := leasecli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
