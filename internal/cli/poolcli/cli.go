// Package poolcli is the pool command: it parses the command line, calls
// package pool and prints one JSON object on stdout for every outcome.
package poolcli

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/dirstore/dirpool"
	"github.com/durable-lease/durable-lease/internal/cli/cliparse"
	_ "github.com/durable-lease/durable-lease/internal/cli/cliparse/kongparse" // help and errors: the full parser
	"github.com/durable-lease/durable-lease/internal/cli/outcome"
	"github.com/durable-lease/durable-lease/internal/cli/storeopen"
	"github.com/durable-lease/durable-lease/internal/testkit/testclock"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

type globals struct {
	Pool         string `placeholder:"FILE" env:"LEASE_POOL_FILE" help:"The pool file (JSON): slots and their commands."`
	Store        string `placeholder:"DIR" env:"LEASE_STORE" help:"Lease store directory, or a store URL (etcd://HOST:PORT/PREFIX across machines; git+REMOTE[#NAMESPACE] for leases and batons, not pools). Default: the pool file's store, else the user's store for this host ($XDG_STATE_HOME/durable-lease/leases or ~/.local/state/durable-lease/leases), the same from every directory, clone and worktree."`
	OwnerPattern string `placeholder:"REGEX" env:"LEASE_OWNER_PATTERN" help:"Owner fence: an anchored regular expression (^...$)."`
	Pretty       bool   `help:"Indent the JSON output."`
	ProvisionCmd string `name:"provision-cmd" placeholder:"CMD" env:"POOL_PROVISION_CMD" help:"Override the pool file's provision command (run on every grant)."`
	ResetCmd     string `name:"reset-cmd" placeholder:"CMD" env:"POOL_RESET_CMD" help:"Override the pool file's reset command."`
	HealthCmd    string `name:"health-cmd" placeholder:"CMD" env:"POOL_HEALTH_CMD" help:"Override the pool file's health command."`
	NudgeCmd     string `name:"nudge-cmd" placeholder:"CMD" env:"POOL_NUDGE_CMD" help:"Override the pool file's nudge command (gets each async grant as JSON on stdin)."`
	cliparse.VersionFlag
}

// waitFlags are shared by the verbs that take a slot.
type waitFlags struct {
	TTL    *float64 `name:"ttl" placeholder:"MINUTES" env:"POOL_TTL_MINUTES" help:"Slot lease TTL in minutes (default: the pool file's ttlMinutes, else 30)."`
	PollMs int64    `name:"poll-ms" placeholder:"MS" env:"POOL_POLL_MS" help:"How often a waiter re-checks when no file event wakes it (default 5000)."`
}

type cli struct {
	globals

	Acquire      acquireCmd      `cmd:"" help:"Wait for a slot, provision it and print the grant (or export lines with --shell)."`
	Request      requestCmd      `cmd:"" help:"Queue an async request and return at once; a detached waiter grants it and sends a nudge."`
	Claim        claimCmd        `cmd:"" help:"Fetch an async request's grant, or its queue position."`
	Heartbeat    heartbeatCmd    `cmd:"" help:"Refresh a slot lease you hold."`
	Reset        resetCmd        `cmd:"" help:"Re-run reset and health on a slot you hold."`
	Release      releaseCmd      `cmd:"" help:"Give a slot back (owner and token), or remove its lease with --force (journaled)."`
	Reprovision  reprovisionCmd  `cmd:"" help:"Run reset and health on a slot nobody holds (a held slot is refused)."`
	Health       healthCmd       `cmd:"" help:"Run a slot's health command; needs no lease."`
	Status       statusCmd       `cmd:"" help:"Slots with their holders, the queue with positions and ETAs, the moving average."`
	Pump         pumpCmd         `cmd:"" help:"One maintenance pass: reap dead slot leases, drop silent waiters, probe free slots (probeMs)."`
	History      historyCmd      `cmd:"" help:"Grants, hold times, waits and failures per slot, from the pool's log."`
	Quarantine   quarantineCmd   `cmd:"" help:"Take a slot out of rotation (owner-fenced, journaled); waiters never get it."`
	Unquarantine unquarantineCmd `cmd:"" help:"Reset and health-check a quarantined slot, and put it back into rotation if both pass."`
	Top          topCmd          `cmd:"" help:"A live view of the pool on a terminal: slots, queue and recent events, redrawn as they change (q leaves; runs durable-lease-top)."`
	Version      versionCmd      `cmd:"" help:"Print the version and the commit this build was made from (as --version does)."`
	Waiter       waiterCmd       `cmd:"" hidden:"" help:"(internal) The detached waiter of an async request."`

	// Plumbing: one step of a waiter each, for callers that drive the queue.
	Enqueue        enqueueCmd        `cmd:"" group:"plumbing" help:"(plumbing) Join the queue and return at once, with no waiter: keep the entry live with heartbeat-entry, grant it with try-grant."`
	TryGrant       tryGrantCmd       `cmd:"" name:"try-grant" group:"plumbing" help:"(plumbing) One self-grant attempt for a queued entry: the grant, or exit 1 saturated with its position."`
	HeartbeatEntry heartbeatEntryCmd `cmd:"" name:"heartbeat-entry" group:"plumbing" help:"(plumbing) Keep a queued entry live and print its position."`
}

// commandFlags are the overrides of the pool file's commands: common
// flags that every verb takes (as the Node tool's pool CLI does, before
// the verb or after it), and that only the verbs running the command read.
var commandFlags = []string{"provision-cmd", "reset-cmd", "health-cmd", "nudge-cmd"}

// reads are the flags of commandFlags and waitFlags each verb reads; a
// verb missing here reads none of them.
var reads = map[string][]string{
	// A grant: provision then health; an async one nudges.
	"acquire":   {"provision-cmd", "health-cmd", "poll-ms"},
	"request":   {"provision-cmd", "health-cmd", "nudge-cmd", "poll-ms"}, // for its waiter
	"waiter":    {"provision-cmd", "health-cmd", "nudge-cmd", "poll-ms"},
	"try-grant": {"provision-cmd", "health-cmd", "nudge-cmd"},
	// Reset then health; pump's probes run health, and lift the
	// quarantines the pool made with reset and health.
	"reset":        {"reset-cmd", "health-cmd"},
	"reprovision":  {"reset-cmd", "health-cmd"},
	"unquarantine": {"reset-cmd", "health-cmd"},
	"pump":         {"reset-cmd", "health-cmd"},
	"health":       {"health-cmd"},
}

// UnreadFlags implements [cliparse.Unread]: the help of each verb lists
// only the command overrides it runs, and --poll-ms only where it waits.
func (*cli) UnreadFlags(verb string) []string {
	var unread []string
	for _, f := range append(slices.Clone(commandFlags), "poll-ms") {
		if !slices.Contains(reads[verb], f) {
			unread = append(unread, f)
		}
	}
	return unread
}

const description = `A pool of interchangeable slots (ports, a database, a cache index) shared by
the processes of one host (or of many, on an etcd:// store), each slot a
durable lease. Waiters queue in FIFO order and every grant runs the pool's
provision and health commands first. Every outcome prints one JSON object on
stdout (or export lines with --shell), except the views for people: status
prints a table when stdout is a terminal, history unless --json, and top
draws a live view.

Exit status: 0 success, 1 refusal (saturated, timeout, not owner, provision or
health failed, lease lost), 2 usage or invalid pool file (nothing changed),
3 internal error.`

// versionCmd is the version verb; the parser prints the version for it,
// so its Run is only there for a caller that runs it anyway.
type versionCmd struct{ cliparse.VersionCmd }

func (*versionCmd) Run(e *env) error {
	_, err := fmt.Fprintf(e.stdout, "%s %s\n", "pool", cliparse.Version())
	return err
}

// verb is every command: Parse returns the selected one.
type verb interface{ Run(e *env) error }

// env is what every command's Run receives.
type env struct {
	ctx    context.Context
	g      *globals
	stdout io.Writer
	stderr io.Writer
	cwd    string
	args   []string // the command line, for a hand-off to another executable
	// readOnly marks a verb that only reads the pool (status, history,
	// top): on a default store it is checked against the host registry
	// but never claims the pool there.
	readOnly bool
	// takes marks a verb that takes a slot's lease or the queue's
	// ([takingVerbs]), which the Node tool's store of the checkout must
	// not hold (dirstore.CheckCheckoutStore).
	takes bool
}

// takingVerbs are the verbs that take a slot (or run a slot's commands
// holding its lease) rather than read, keep or give back what they hold.
var takingVerbs = map[string]bool{
	"acquire": true, "request": true, "enqueue": true, "try-grant": true, "waiter": true,
	"reprovision": true, "quarantine": true, "unquarantine": true, "pump": true,
}

// openRead is open for a verb that only reads the pool.
func (e *env) openRead() (*pool.Pool, error) {
	e.readOnly = true
	return e.open(waitFlags{})
}

// open loads the pool file and opens the pool with the command's TTL and
// poll settings.
func (e *env) open(w waitFlags) (*pool.Pool, error) {
	if e.g.Pool == "" {
		return nil, cliparse.Usagef("no pool file: pass --pool FILE or set LEASE_POOL_FILE")
	}
	ttl := 0.0 // the pool file's
	if w.TTL != nil {
		ttl = *w.TTL
		if !lease.ValidTTL(ttl) {
			return nil, cliparse.Usagef("--ttl must be a number of minutes %s", lease.TTLRange)
		}
	}
	poll, err := cliparse.Ms("poll-ms", w.PollMs)
	if err != nil {
		return nil, err
	}
	cfg, err := pool.LoadFile(e.g.Pool)
	if err != nil {
		return nil, err
	}
	clock, err := testclock.StoreOptions()
	if err != nil {
		return nil, cliparse.Usagef("%v", err)
	}
	opts := append([]lease.Option{lease.WithOwnerPattern(e.g.OwnerPattern)}, clock...)
	named, err := pool.StoreFor(e.g.Store, cfg)
	if err != nil {
		return nil, err
	}
	where, err := dirstore.ResolveStore(named, "", e.cwd)
	if err != nil {
		return nil, err
	}
	if named == "" && e.takes {
		if err := dirstore.CheckCheckoutStore(e.ctx, e.cwd, where, cfg.Kinds(), opts...); err != nil {
			return nil, err
		}
	}
	store, closeStore, err := storeopen.OpenOrHandOff(e.ctx, where, "pool", e.args, opts...)
	if err != nil {
		return nil, err
	}
	// An open pool's connection, if any, ends with the process; a store
	// that refuses pools (a git store, whose scratch repository does not
	// end with the process) is closed at once.
	if dir := store.Dir(); dir != "" {
		if err := dirpool.ClaimHostStore(dirpool.RegistryFrom(os.Getenv), cfg, dir, named == "", time.Now(), !e.readOnly); err != nil {
			_ = closeStore()
			return nil, err
		}
	}
	p, err := pool.Open(store, cfg, pool.Options{
		TTLMinutes: ttl, Poll: poll,
		Provision: e.g.ProvisionCmd, Reset: e.g.ResetCmd, Health: e.g.HealthCmd, NudgeCommand: e.g.NudgeCmd,
		Log: e.stderr,
	})
	if err != nil {
		_ = closeStore()
		return nil, err
	}
	return p, nil
}

func (e *env) emit(v any) error { return outcome.Write(e.stdout, v, e.g.Pretty) }

// shellRequested reports whether args ask for --shell output, before any
// "--" that ends the flags.
func shellRequested(args []string) bool {
	for _, a := range args {
		switch {
		case a == "--":
			return false
		case a == "--shell", strings.HasPrefix(a, "--shell="):
			return true
		}
	}
	return false
}

// Grammar is the command line's grammar (a new one), its description and
// the variables its help interpolates, for what is generated from it (the
// man page and the shell completions, internal/cli/clidoc).
func Grammar() (grammar any, desc string, vars map[string]string) {
	return new(cli), description, map[string]string{}
}

// Main runs the pool command with args (without the program name) and
// returns the exit status. ctx cancels waits and running commands.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c cli
	cmd, exited, status, err := cliparse.Parse(&c, "pool", description, kong.Vars{}, args, stdout, stderr)
	if exited {
		return status
	}
	if err != nil {
		// The command line did not parse, so whether --shell was meant
		// is read from the words themselves: output that may be eval'd
		// must be a comment and a failing command on every path.
		return fail(stdout, stderr, false, shellRequested(args), err, args)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fail(stdout, stderr, c.Pretty, false, fmt.Errorf("working directory: %w", err), args)
	}
	e := &env{ctx: ctx, g: &c.globals, stdout: stdout, stderr: stderr, cwd: cwd, args: args, takes: takingVerbs[cmd.Name]}
	if err := cmd.Target.(verb).Run(e); err != nil {
		shell := (cmd.Name == "acquire" && c.Acquire.Shell) || (cmd.Name == "claim" && c.Claim.Shell)
		return fail(stdout, stderr, c.Pretty, shell, err, args)
	}
	return outcome.ExitOK
}
