// Command pool hands out slots of a pool of interchangeable resources.
// See `pool --help` and docs/PROTOCOL.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/durable-lease/durable-lease/internal/poolcli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	code := poolcli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
