// Command durable-lease-top runs `pool top`, the live terminal view of a
// pool, on a directory or an etcd:// store. Users do not run it by name:
// pool hands the command line of `pool top` to it (it must be installed
// beside pool: that is the one place pool looks), so that the terminal UI
// library stays out of every other pool call.
//
//	durable-lease-top pool [GLOBAL FLAGS] top [--interval DUR]
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/internal/cli/poolcli"
	"github.com/durable-lease/durable-lease/internal/cli/pooltop"
	"github.com/durable-lease/durable-lease/internal/cli/storeopen"
	"github.com/durable-lease/durable-lease/pool"
)

func main() {
	// An etcd:// store opens here, not in durable-lease-etcd: that one's
	// pool has no live view and would hand `pool top` back.
	storeopen.Register(etcdstore.Scheme, etcdstore.Open)
	poolcli.Top = func(ctx context.Context, p *pool.Pool, o poolcli.TopOptions) error {
		return pooltop.Run(ctx, p, pooltop.Options{Interval: o.Interval})
	}
	if len(os.Args) < 2 || os.Args[1] != "pool" {
		fmt.Fprintf(os.Stderr, "usage: %s pool [FLAGS] top [--interval DUR]\n(pool runs it for `pool top`)\n", filepath.Base(os.Args[0]))
		os.Exit(2)
	}
	ctx, _ := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	os.Exit(poolcli.Main(ctx, os.Args[2:], os.Stdout, os.Stderr))
}
