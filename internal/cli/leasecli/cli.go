// Package leasecli is the lease command: it parses the command line, calls
// package lease and prints one JSON object on stdout for every outcome.
//
// The command line is read by package cliparse's quick parser alone, which
// reports every mistake itself; the help it prints is kong's rendering of
// the grammar below, kept in help_gen.go, which go generate writes
// (helpgen) and a test keeps up to date. So the lease executable links no
// kong (a test of internal/testkit/linkbudget holds it to that).
package leasecli

//go:generate go run gen_help.go -o help_gen.go

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/internal/cli/cliparse"
	"github.com/durable-lease/durable-lease/internal/cli/cliparse/signals"
	"github.com/durable-lease/durable-lease/internal/cli/outcome"
	"github.com/durable-lease/durable-lease/internal/cli/storeopen"
	"github.com/durable-lease/durable-lease/internal/testkit/testclock"
	"github.com/durable-lease/durable-lease/lease"
)

type globals struct {
	Store        string `placeholder:"DIR" env:"LEASE_STORE" help:"Store directory, or a store URL (etcd://HOST:PORT/PREFIX across machines; git+REMOTE[#NAMESPACE] for leases on a git remote). Default: the user's store for this host, $XDG_STATE_HOME/durable-lease/leases or ~/.local/state/durable-lease/leases, the same from every directory, clone and worktree."`
	OwnerPattern string `placeholder:"REGEX" env:"LEASE_OWNER_PATTERN" help:"Owner fence: an anchored regular expression (^...$) every owner must match. Default: ${default_owner_pattern}"`
	Pretty       bool   `help:"Indent the JSON output."`
	RevealTokens bool   `name:"reveal-tokens" help:"Print tokens in full where they are otherwise shown as sha256: fingerprints (status, list, reconcile, reap, a forced release, a refusal). Whoever reads such output can heartbeat or release those leases: for tools that need records as stored, such as a conformance suite, never for logs."`
	cliparse.VersionFlag
}

type cli struct {
	globals

	Acquire   acquireCmd   `cmd:"" help:"Take the lease on a kind; refuse (exit 1) if it is held, or wait with --wait-ms."`
	Heartbeat heartbeatCmd `cmd:"" help:"Refresh a lease you hold (needs the token from acquire). Fails once the lease has expired."`
	Release   releaseCmd   `cmd:"" help:"Give a lease back (needs owner and token), or remove it with --force (journaled)."`
	Status    statusCmd    `cmd:"" help:"Read a lease: state free, held or unknown (expired or unreadable). Always exits 0."`
	Reap      reapCmd      `cmd:"" help:"Remove a dead (expired or unreadable) lease; refuses a live one."`
	List      listCmd      `cmd:"" help:"Read every lease in the store."`
	Reconcile reconcileCmd `cmd:"" help:"Session-start sweep: reap dead leases inside the owner fence, report live and foreign ones."`
	Version   versionCmd   `cmd:"" help:"Print the version and the commit this build was made from (as --version does)."`
}

const description = `Durable, heartbeat-expiring, owner-fenced leases in a directory shared by the
processes of one host. Every outcome prints one JSON object on stdout.

Exit status: 0 success (status always 0), 1 refusal (held, expired, not owner,
timeout, not dead), 2 usage or validation error (nothing changed), 3 internal error.`

// helpVars are the variables the help text interpolates.
func helpVars() map[string]string {
	return map[string]string{"default_owner_pattern": lease.DefaultOwnerPattern, "kind_pattern": lease.KindPattern}
}

// Grammar is what help_gen.go, the man page and the shell completions
// (internal/cli/clidoc) are generated from: the grammar (a new one), the
// description and the variables its help interpolates.
func Grammar() (grammar any, desc string, vars map[string]string) {
	return new(cli), description, helpVars()
}

// versionCmd is the version verb; the parser prints the version for it,
// so its Run is only there for a caller that runs it anyway.
type versionCmd struct{ cliparse.VersionCmd }

func (*versionCmd) Run(e *env) error {
	_, err := fmt.Fprintf(e.stdout, "%s %s\n", "lease", cliparse.Version())
	return err
}

// verb is every command: Parse returns the selected one.
type verb interface{ Run(e *env) error }

// waiter is a verb that may wait for a lease when waits says so.
type waiter interface{ waits() bool }

// env is what every command's Run receives.
type env struct {
	ctx    context.Context
	store  *lease.Store
	stdout io.Writer
	stderr io.Writer
	pretty bool
	reveal bool
}

func (e *env) emit(v any) error { return outcome.Write(e.stdout, v, e.pretty) }

// show is r as output may show it: with its token as a fingerprint,
// unless --reveal-tokens asked for it in full.
func (e *env) show(r *lease.Record) *lease.Record { return shown(r, e.reveal) }

func shown(r *lease.Record, reveal bool) *lease.Record {
	if reveal {
		return r
	}
	return r.Redacted()
}

// Main runs the lease command with args (without the program name) and
// returns the process exit status. ctx cancels a wait.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return run(ctx, nil, args, stdout, stderr)
}

// MainSignals is Main for the lease executable: its context is sigs's.
// Until the store is first touched a signal ends the process, before
// anything was changed; from then on the signals are held (see
// [signals.Lazy.Hold]) by a call that does not wait, and cancel one that
// waits (acquire --wait-ms), whose signals are registered just before.
func MainSignals(sigs *signals.Lazy, args []string, stdout, stderr io.Writer) int {
	return run(sigs.Context(), sigs.Hold, args, stdout, stderr)
}

// run is Main; hold, when not nil, is called just before the store is
// first touched.
func run(ctx context.Context, hold func(), args []string, stdout, stderr io.Writer) int {
	var c cli
	pretty, reveal := false, false
	cmd, exited, err := cliparse.ParseAlone(&c, "lease", embeddedHelp, args, stdout)
	if exited {
		return outcome.ExitOK
	}
	if err != nil {
		return fail(stdout, stderr, pretty, reveal, err, args)
	}
	pretty, reveal = c.Pretty, c.RevealTokens
	var cwd string
	if !filepath.IsAbs(c.Store) {
		// Only a relative or default store is found from the working
		// directory (an absolute one is used as it is: two system calls
		// saved).
		if cwd, err = os.Getwd(); err != nil {
			return fail(stdout, stderr, pretty, reveal, err, args)
		}
	}
	clock, err := testclock.StoreOptions()
	if err != nil {
		return fail(stdout, stderr, pretty, reveal, cliparse.Usagef("%v", err), args)
	}
	opts := append([]lease.Option{lease.WithOwnerPattern(c.OwnerPattern)}, clock...)
	where, err := dirstore.ResolveStore(c.Store, "", cwd)
	if err != nil {
		return fail(stdout, stderr, pretty, reveal, err, args)
	}
	if a, ok := cmd.Target.(*acquireCmd); ok && c.Store == "" {
		if err := dirstore.CheckCheckoutStore(ctx, cwd, where, []string{a.Kind}, opts...); err != nil {
			return fail(stdout, stderr, pretty, reveal, err, args)
		}
	}
	store, closeStore, err := storeopen.OpenOrHandOff(ctx, where, "lease", args, opts...)
	if err != nil {
		return fail(stdout, stderr, pretty, reveal, err, args)
	}
	defer closeStore()
	if w, ok := cmd.Target.(waiter); ok && w.waits() {
		// A call that will wait has its signals registered before it
		// touches the store (asking its context is what registers
		// them), so that none is lost between its first attempt and
		// its wait.
		_ = ctx.Err()
	} else if hold != nil {
		hold()
	}
	e := &env{ctx: ctx, store: store, stdout: stdout, stderr: stderr, pretty: pretty, reveal: reveal}
	if err := cmd.Target.(verb).Run(e); err != nil {
		return fail(stdout, stderr, pretty, reveal, err, args)
	}
	return outcome.ExitOK
}
