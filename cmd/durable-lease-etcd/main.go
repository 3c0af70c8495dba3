// Command durable-lease-etcd runs the lease, pool and pool-run commands on
// an etcd store, and serves nothing else. Users do not run it by name:
// lease, pool and pool-run hand a command line whose store is an etcd://
// URL to it, so that the etcd client stays out of every directory-store
// call (internal/linkbudget holds them to that). They look for it in one
// place only, the directory they were started from: it must be installed
// beside them.
//
//	durable-lease-etcd lease|pool|pool-run ARGS...
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/internal/leasecli"
	"github.com/durable-lease/durable-lease/internal/poolcli"
	"github.com/durable-lease/durable-lease/internal/poolruncli"
	"github.com/durable-lease/durable-lease/internal/storeopen"
	"github.com/durable-lease/durable-lease/runner"
)

func main() {
	storeopen.Register(etcdstore.Scheme, etcdstore.OpenStore)
	// pool-run's guardian is this executable again, and releases the
	// lease of a pool-run that died: it runs here, with etcd://
	// registered, not in runner's init.
	runner.ServeRoles()
	if len(os.Args) < 2 {
		fmt.Fprintf(os.Stderr, "usage: %s lease|pool|pool-run ARGS...\n(lease, pool and pool-run run it for etcd:// stores)\n", filepath.Base(os.Args[0]))
		os.Exit(2)
	}
	cli, args := os.Args[1], os.Args[2:]
	switch cli {
	case "lease", "pool":
		// A request's detached waiter is this executable again, run as
		// "durable-lease-etcd pool waiter ...": without the word it would
		// be "durable-lease-etcd waiter ...", which nothing serves.
		poolcli.SelfCommand = "pool"
		ctx, _ := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
		if cli == "lease" {
			os.Exit(leasecli.Main(ctx, args, os.Stdout, os.Stderr))
		}
		os.Exit(poolcli.Main(ctx, args, os.Stdout, os.Stderr))
	case "pool-run":
		os.Args = append([]string{"pool-run"}, args...)
		os.Exit(poolruncli.Process())
	}
	fmt.Fprintf(os.Stderr, "%s: unknown command %q: want lease, pool or pool-run\n", filepath.Base(os.Args[0]), cli)
	os.Exit(2)
}
