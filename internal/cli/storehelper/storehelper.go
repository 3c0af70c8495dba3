// Package storehelper is the whole of a store helper executable
// (durable-lease-etcd, durable-lease-git): lease, pool and pool-run hand
// a command line whose store they do not serve to the helper beside them
// (package storeopen), which runs the same CLI code with its scheme
// registered.
package storehelper

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/durable-lease/durable-lease/internal/cli/leasecli"
	"github.com/durable-lease/durable-lease/internal/cli/poolcli"
	"github.com/durable-lease/durable-lease/internal/cli/poolruncli"
	"github.com/durable-lease/durable-lease/internal/cli/storeopen"
	"github.com/durable-lease/durable-lease/runner"
)

// Main registers open for scheme and runs "helper lease|pool|pool-run
// ARGS..." from os.Args; it does not return.
func Main(scheme string, open storeopen.Opener) {
	storeopen.Register(scheme, open)
	// pool-run's guardian is this executable again, and releases the
	// lease of a pool-run that died: it runs here, with the scheme
	// registered, not in runner's init.
	runner.ServeRoles()
	name := filepath.Base(os.Args[0])
	if len(os.Args) < 2 {
		fmt.Fprintf(os.Stderr, "usage: %s lease|pool|pool-run ARGS...\n(lease, pool and pool-run run it for %s stores)\n", name, describe(scheme))
		os.Exit(2)
	}
	cli, args := os.Args[1], os.Args[2:]
	switch cli {
	case "lease", "pool":
		// A request's detached waiter is this executable again, run as
		// "<helper> pool waiter ...": without the word it would be
		// "<helper> waiter ...", which nothing serves.
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
	fmt.Fprintf(os.Stderr, "%s: unknown command %q: want lease, pool or pool-run\n", name, cli)
	os.Exit(2)
}

func describe(scheme string) string {
	if scheme == "git" {
		return "git+<remote>"
	}
	return scheme + "://"
}
