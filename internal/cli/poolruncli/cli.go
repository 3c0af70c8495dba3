// Package poolruncli is the pool-run command: it parses the command line,
// resolves flags, the gate file and the environment into runner options,
// runs the work and turns the result into an exit status and one line on
// stderr. Stdout belongs to the command being run.
package poolruncli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/dirstore/dirpool"
	"github.com/durable-lease/durable-lease/gates"
	"github.com/durable-lease/durable-lease/internal/cli/cliparse"
	_ "github.com/durable-lease/durable-lease/internal/cli/cliparse/kongparse" // help and errors: the full parser
	"github.com/durable-lease/durable-lease/internal/cli/outcome"
	"github.com/durable-lease/durable-lease/internal/cli/poolcodes"
	"github.com/durable-lease/durable-lease/internal/cli/progress"
	"github.com/durable-lease/durable-lease/internal/cli/storeopen"
	"github.com/durable-lease/durable-lease/internal/sys/storefile"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
	"github.com/durable-lease/durable-lease/runner"
)

type cli struct {
	Owner        *string        `placeholder:"OWNER" help:"Who holds the lease (default: the gate file's owner, then $$LEASE_OWNER, then pool-run@ and the name of the worktree or directory it runs in)."`
	Pool         *string        `placeholder:"FILE" help:"Take a slot of this pool file (default: the gate file's pool, then $$LEASE_POOL_FILE, then the nearest durable-lease-pool.json from the working directory up to the top of its repository)."`
	Kind         *string        `placeholder:"KIND" help:"Hold this one lease (a baton) instead of a slot."`
	Gate         *string        `placeholder:"FILE" help:"Run the phases of this gate file (YAML) instead of a command."`
	Store        string         `placeholder:"DIR" env:"LEASE_STORE" help:"Lease store directory, or a store URL (etcd://HOST:PORT/PREFIX across machines; git+REMOTE[#NAMESPACE] for leases and batons, not pools). Default: the pool file's store, else the user's store for this host ($XDG_STATE_HOME/durable-lease/leases or ~/.local/state/durable-lease/leases), the same from every directory, clone and worktree."`
	OwnerPattern string         `placeholder:"REGEX" env:"LEASE_OWNER_PATTERN" help:"Owner fence: an anchored regular expression (^...$)."`
	TTL          *float64       `name:"ttl" placeholder:"MINUTES" help:"Lease TTL in minutes, fractions allowed (default: the gate file's, then $$POOL_TTL_MINUTES, then the pool file's ttlMinutes; 15 for a baton)."`
	Heartbeat    *time.Duration `placeholder:"DURATION" help:"Time between heartbeats, e.g. 30s (default: the gate file's, else TTL/8). Must be shorter than the TTL."`
	KillGrace    *time.Duration `name:"kill-grace" placeholder:"DURATION" help:"Time between SIGTERM and SIGKILL when the command is stopped (default: the gate file's, else 10s)."`
	NoWait       bool           `name:"no-wait" help:"Take a slot (or the baton) now or give up at once (exit 1)."`
	WaitMs       *int64         `name:"wait-ms" placeholder:"MS" help:"Give up after this many milliseconds of waiting (exit 1, code timeout); 0 is --no-wait. Default: wait as long as it takes."`
	Payload      *string        `placeholder:"JSON" help:"A JSON value kept with a baton lease, shown by lease status (no secrets)."`
	SummaryJSON  string         `name:"summary-json" placeholder:"FILE" help:"Also write how the run ended as JSON to FILE (see below)."`
	PollMs       int64          `name:"poll-ms" placeholder:"MS" env:"POOL_POLL_MS" help:"How often a queued waiter re-checks when no file event wakes it (default 5000)."`
	ProvisionCmd string         `name:"provision-cmd" placeholder:"CMD" env:"POOL_PROVISION_CMD" help:"Override the pool file's provision command."`
	ResetCmd     string         `name:"reset-cmd" placeholder:"CMD" env:"POOL_RESET_CMD" help:"Override the pool file's reset command."`
	HealthCmd    string         `name:"health-cmd" placeholder:"CMD" env:"POOL_HEALTH_CMD" help:"Override the pool file's health command."`
	NoPty        bool           `name:"no-pty" help:"Never give the command a pseudo-terminal, even when stdin and stdout are a terminal."`
	Containment  string         `placeholder:"auto|cgroup|tree" env:"POOL_RUN_CONTAINMENT" help:"How the work is held: a cgroup of its own where one can be made (auto, the default), a cgroup or fail (cgroup), or the guardian's process tree (tree)."`
	CgroupParent string         `name:"cgroup-parent" placeholder:"DIR" env:"POOL_RUN_CGROUP_PARENT" help:"The cgroup v2 directory to make the run's cgroup in (default: pool-run's own cgroup, where this user may write it)."`
	Explain      bool           `help:"Say how a run with these flags would hold its work (containment, the shortest TTL it keeps) as JSON, and exit without acquiring anything."`
	cliparse.VersionFlag

	Command []string `arg:"" optional:"" passthrough:"partial" placeholder:"-- COMMAND [ARGS...]" help:"The command to run while the lease is held (no shell)."`
}

// RunsCommands marks pool-run as a CLI whose arguments are a command to
// run: "pool-run help" runs a program named help, it is not a help verb.
func (*cli) RunsCommands() {}

const description = `Hold a slot of a pool (or one baton lease) while a command or a gate file's
phases run: acquire (waiting in the queue), provision, run, heartbeat, and
release on every exit path. The command runs directly, in a process group of
its own, on a pseudo-terminal when stdin and stdout are a terminal. If the
lease is lost, the whole group gets SIGTERM, then SIGKILL after the kill
grace. SIGINT, SIGTERM, SIGHUP and SIGQUIT are passed to the group.

  pool-run --pool pool.json -- npm run test:e2e
  pool-run --kind merge-baton --owner "$USER" -- git merge --ff-only topic
  pool-run --gate gate.yaml

pool-run's flags end at the first word that is neither one of them nor a
flag's value: from there on every word is the command's, flags too
("pool-run --kind k git --version" runs git --version). "--" ends them as
well. Flags beat the gate file, which beats the environment.

The work's environment is pool-run's, without any POOL_RUN_* variable of an
outer pool-run and without the etcd credentials (LEASE_ETCD_USER,
LEASE_ETCD_PASSWORD, LEASE_ETCD_CERT, LEASE_ETCD_KEY; LEASE_ETCD_CACERT
stays), plus the grant's variables and:
  POOL_RUN_SLOT        the slot's id (for a baton POOL_RUN_KIND, its kind)
  POOL_RUN_TOKEN       the lease's token
  POOL_RUN_OWNER       its owner
  POOL_RUN_FENCE       its fence, when the store keeps one
  LEASE_STORE          the store this run used: an absolute directory (the
                       same store from a gate phase, which runs in the gate
                       file's directory) or the store URL
  DURABLE_LEASE_HELD   what this run and the pool-runs it runs under hold,
                       outermost first: entries separated by ";", each
                       "store=STORE,kind=KIND" plus ",pool=NAME,slot=ID" for
                       a slot (STORE: the absolute directory, symbolic links
                       resolved, or the URL; %XX escapes ',', ';', '=', '%',
                       spaces, control characters and non-ASCII bytes)
A nested pool-run asking for a lease one of them holds on the same store,
or for a pool all of whose slots they hold, would wait for itself forever:
it fails at once instead (exit 1, held_by_ancestor), naming the lease. It
may take a slot they do not hold.

pool-run's last line on stderr says how the run ended, and --summary-json
FILE writes the same as JSON (ok, code, exit, error, held, heldMs, phases;
phases is [] for a command): code is ok, failed (the work's own non-zero
status, 75 included), lease_lost, interrupted, timeout (waiting for the
lease; for a gate, also a phase), held_by_ancestor, or the refusal of the
acquisition (held, saturated, ...). FILE is relative to the current
directory.

Exit status:
  the command's own    its status; 128+n when it died of signal n
  0                    every gate phase passed
  1, 2, 3              nothing was acquired and nothing ran: 1 refused, timed
                       out, or held by an ancestor (held_by_ancestor); 2 usage
                       or invalid pool or gate file; 3 internal
  75                   the lease was lost while the work ran (it was stopped)
  124                  a gate phase ran out of its timeout
  126, 127             the command cannot be executed / was not found (checked
                       before anything is acquired)
  128+n                signal n ended pool-run (the lease was released)`

// IO is the process's streams and the signals it forwards.
type IO struct {
	Stdin          *os.File
	Stdout, Stderr io.Writer
	Signals        <-chan os.Signal
}

// Process runs pool-run on this process's arguments, streams and signals
// and returns the exit status, for the caller to exit with at once: the
// signals stay registered, as unregistering them would only cost a round
// trip per signal with the runtime's signal thread.
func Process() int {
	sigs := make(chan os.Signal, 8)
	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
		// A signal ignored by whoever started pool-run (nohup, a shell's
		// background job without job control) stays ignored, as it
		// would for the command run directly.
		if !signal.Ignored(sig) {
			signal.Notify(sigs, sig)
		}
	}
	return Main(context.Background(), os.Args[1:], IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Signals: sigs})
}

// Grammar is the command line's grammar (a new one), its description and
// the variables its help interpolates, for what is generated from it (the
// man page and the shell completions, internal/cli/clidoc).
func Grammar() (grammar any, desc string, vars map[string]string) {
	return new(cli), description, map[string]string{}
}

// Main runs pool-run with args (without the program name).
func Main(ctx context.Context, args []string, stdio IO) int {
	var c cli
	_, exited, status, err := cliparse.Parse(&c, "pool-run", description, kong.Vars{}, args, stdio.Stdout, stdio.Stderr)
	if exited {
		return status
	}
	if err != nil {
		return usage(stdio.Stderr, err)
	}
	if len(c.Command) > 0 && c.Command[0] == "--" {
		c.Command = c.Command[1:] // kong passes the separator through
	}
	cwd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "pool-run: working directory: %v\n", err)
		return outcome.ExitInternal
	}
	if c.SummaryJSON != "" {
		// Judged before anything is acquired: a run never ends by
		// failing to write where it was told to.
		if err := checkSummaryPath(abs(cwd, c.SummaryJSON)); err != nil {
			return usage(stdio.Stderr, err)
		}
	}
	var closeStore func() error
	o, gate, err := c.options(cwd, args, stdio, &closeStore)
	if closeStore != nil {
		// A git store's scratch repository does not end with the
		// process, as a connection does.
		defer func() { _ = closeStore() }()
	}
	if err != nil {
		code, exit := poolcodes.Classify(err)
		if (exit == outcome.ExitUsage && code != "unsafe_store" && code != "store_conflict") || errors.Is(err, gates.ErrInvalid) {
			return usage(stdio.Stderr, err)
		}
		fmt.Fprintf(stdio.Stderr, "pool-run: %v (%s)\n", err, code)
		return exit
	}
	if c.Explain {
		return explain(stdio.Stdout, o)
	}
	var res *runner.Result
	if err := runner.CheckAncestors(o, nil); err != nil {
		res = heldByAncestor(err, gate)
	} else if gate != nil {
		res = runner.Gate(ctx, *o, gate)
	} else {
		res = runner.Command(ctx, *o, c.Command)
	}
	classify(res)
	if res.Code == runner.CodeUsage && res.Held.Kind == "" {
		return usage(stdio.Stderr, res.Err)
	}
	report(stdio.Stderr, res, gate != nil)
	if c.SummaryJSON != "" {
		if err := writeSummary(abs(cwd, c.SummaryJSON), res); err != nil {
			fmt.Fprintf(stdio.Stderr, "pool-run: writing the summary: %v\n", err)
			if res.Exit == 0 {
				return outcome.ExitInternal
			}
		}
	}
	return res.Exit
}

// heldByAncestor is the result of a run that asked for what an ancestor
// pool-run holds: refused (exit 1) before anything was acquired or run.
func heldByAncestor(err error, gate *gates.Gate) *runner.Result {
	r := &runner.Result{Exit: outcome.ExitRefused, Code: codeHeldByAncestor, Err: err}
	if gate != nil {
		for _, p := range gate.Phases {
			r.Phases = append(r.Phases, runner.PhaseResult{Name: p.Name, Result: runner.PhaseSkipped})
		}
	}
	return r
}

// codeHeldByAncestor is the code of a run refused by runner.CheckAncestors.
const codeHeldByAncestor = "held_by_ancestor"

func usage(w io.Writer, err error) int {
	// "(usage)" says what the sentinels' text would: one prefix,
	// pool-run's.
	msg := outcome.Unprefixed(err.Error(), runner.ErrInvalid.Error()+": ", lease.ErrInvalid.Error()+": ", pool.ErrInvalid.Error()+": ")
	fmt.Fprintf(w, "pool-run: %s (usage)\nRun 'pool-run --help' for usage.\n", msg)
	return outcome.ExitUsage
}

// report prints the run's closing lines on stderr.
func report(w io.Writer, r *runner.Result, gate bool) {
	if gate && len(r.Phases) > 0 {
		fmt.Fprint(w, "pool-run: gate summary\n"+phaseTable(r))
	}
	fmt.Fprintln(w, closingLine(r))
}

// checkSummaryPath accepts a --summary-json path only where a summary
// can replace what is there without harm: a regular file, or nothing, in
// a directory that exists. A device (a --summary-json /dev/null as root
// would replace the real one), a FIFO, a socket, a directory or a symbolic
// link at the path, or a missing parent, is a usage error.
func checkSummaryPath(path string) error {
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return cliparse.Usagef("--summary-json %s: the directory %s does not exist", path, dir)
	}
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return cliparse.Usagef("--summary-json %s: %v", path, err)
	case st.Mode().IsRegular():
		return nil
	}
	return cliparse.Usagef("--summary-json %s is %s, not a regular file; the summary would replace it", path, storefile.DescribeMode(st.Mode()))
}

// explain prints how a run with o would hold its work, as JSON, with the
// version line of this pool-run (as --version prints it), for a bug
// report to name the build whose behaviour it describes.
func explain(w io.Writer, o *runner.Options) int {
	out := struct {
		OK            bool               `json:"ok"`
		Version       string             `json:"version"`
		Store         string             `json:"store"`
		Containment   runner.Containment `json:"containment"`
		MinTTLMinutes float64            `json:"minTtlMinutes"`
	}{OK: true, Version: cliparse.Version(), Store: o.Store.Where(), MinTTLMinutes: runner.MinTTL(*o)}
	c, err := runner.Explain(*o)
	if err != nil {
		// A run with these flags would fail before acquiring: so does this.
		code, exit := poolcodes.Classify(err)
		fail := struct {
			outcome.Failure
			Store string `json:"store"`
		}{Failure: outcome.Failure{Code: code, Error: err.Error()}, Store: o.Store.Where()}
		_ = outcome.Write(w, fail, true)
		return exit
	}
	out.Containment = c
	data, _ := json.MarshalIndent(out, "", "  ")
	fmt.Fprintln(w, string(data))
	return 0
}

// writeSummary replaces path with the summary, atomically: a reader sees
// the old file or the whole new one. What is at path was judged before
// the run (checkSummaryPath), and is judged again now: only a regular
// file (or nothing) is replaced.
func writeSummary(path string, r *runner.Result) error {
	data, err := json.MarshalIndent(summaryOf(r), "", "  ")
	if err != nil {
		return err
	}
	if err := checkSummaryPath(path); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".pool-run-summary-*")
	if err != nil {
		return err
	}
	_, err = f.Write(append(data, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

// options resolves the command line, the gate file and the environment.
// options opens the store and says how to close it in *closeStore.
func (c *cli) options(cwd string, args []string, stdio IO, closeStore *func() error) (*runner.Options, *gates.Gate, error) {
	var g *gates.Gate
	if c.Gate != nil {
		if len(c.Command) > 0 {
			return nil, nil, cliparse.Usagef("--gate and a command exclude each other")
		}
		var err error
		if g, err = gates.Load(abs(cwd, *c.Gate)); err != nil {
			return nil, nil, err
		}
	} else {
		if len(c.Command) == 0 && !c.Explain {
			return nil, nil, cliparse.Usagef("no command: give one after --, or --gate FILE")
		}
	}
	if c.Pool != nil && c.Kind != nil {
		return nil, nil, cliparse.Usagef("--pool and --kind exclude each other")
	}
	var wait time.Duration
	if c.WaitMs != nil {
		var err error
		if wait, err = cliparse.Ms("wait-ms", *c.WaitMs); err != nil {
			return nil, nil, err
		}
	}
	if c.NoWait && c.WaitMs != nil && *c.WaitMs > 0 {
		return nil, nil, cliparse.Usagef("--no-wait and --wait-ms exclude each other")
	}
	poll, err := cliparse.Ms("poll-ms", c.PollMs)
	if err != nil {
		return nil, nil, err
	}
	switch c.Containment {
	case "", runner.ContainAuto, runner.ContainCgroup, runner.ContainTree:
	default:
		return nil, nil, cliparse.Usagef("--containment %q: want auto, cgroup or tree", c.Containment)
	}
	o := &runner.Options{JobControl: true, Stdin: stdio.Stdin, Stdout: stdio.Stdout, Stderr: stdio.Stderr, Signals: stdio.Signals, NoPty: c.NoPty, NoWait: c.NoWait,
		Queue: progress.New(stdio.Stderr, "pool-run"), Containment: c.Containment, CgroupParent: c.CgroupParent}
	if c.WaitMs != nil {
		if *c.WaitMs == 0 {
			o.NoWait = true
		}
		o.Wait = wait
	}

	// What to hold: a flag, else the gate file, else the environment.
	poolFile, kind := "", ""
	switch {
	case c.Pool != nil:
		poolFile = abs(cwd, *c.Pool)
	case c.Kind != nil:
		kind = *c.Kind
	case g != nil && g.Pool != "":
		poolFile = g.Pool
	case g != nil:
		kind = g.Kind
	case os.Getenv("LEASE_POOL_FILE") != "":
		poolFile = abs(cwd, os.Getenv("LEASE_POOL_FILE"))
	default:
		found, err := findPoolFile(cwd)
		if err != nil {
			return nil, nil, err
		}
		if found == "" {
			return nil, nil, cliparse.Usagef("nothing to hold: pass --pool FILE or --kind KIND, set LEASE_POOL_FILE, "+
				"or put the project's pool file, %s, in this directory or one above it in the repository", PoolFileName)
		}
		fmt.Fprintf(stdio.Stderr, "pool-run: pool file %s (found from the working directory; --pool names another)\n", found)
		poolFile = found
	}
	if kind != "" && !lease.ValidKind(kind) {
		return nil, nil, cliparse.Usagef("--kind %q must match %s", kind, lease.KindPattern)
	}
	if poolFile == "" && (c.ProvisionCmd != "" || c.ResetCmd != "" || c.HealthCmd != "") {
		return nil, nil, cliparse.Usagef("provision, reset and health commands need a pool")
	}
	if poolFile != "" && c.Payload != nil {
		return nil, nil, cliparse.Usagef("--payload is for a baton (--kind)")
	}
	if c.Payload != nil {
		if err := cliparse.JSON("payload", *c.Payload); err != nil {
			return nil, nil, err
		}
		o.Payload = json.RawMessage(*c.Payload)
	}

	if c.Owner != nil {
		o.Owner = *c.Owner // even "", which the owner fence then refuses
	} else {
		o.Owner = firstOf(gateField(g, func(g *gates.Gate) string { return g.Owner }), os.Getenv("LEASE_OWNER"), defaultOwner(cwd))
	}
	ttl := 0.0
	switch {
	case c.TTL != nil:
		ttl = *c.TTL
	case g != nil && g.TTLMinutes != 0:
		ttl = g.TTLMinutes
	case os.Getenv("POOL_TTL_MINUTES") != "":
		v, err := strconv.ParseFloat(os.Getenv("POOL_TTL_MINUTES"), 64)
		if err != nil {
			return nil, nil, cliparse.Usagef("POOL_TTL_MINUTES=%q is not a number of minutes", os.Getenv("POOL_TTL_MINUTES"))
		}
		ttl = v
	}
	if ttl != 0 || c.TTL != nil {
		if !lease.ValidTTL(ttl) {
			return nil, nil, cliparse.Usagef("--ttl must be a number of minutes %s", lease.TTLRange)
		}
	}
	switch {
	case c.Heartbeat != nil:
		if *c.Heartbeat <= 0 {
			return nil, nil, cliparse.Usagef("--heartbeat must be a positive duration such as 30s")
		}
		o.Heartbeat = *c.Heartbeat
	case g != nil:
		o.Heartbeat = g.Heartbeat
	}
	switch {
	case c.KillGrace != nil:
		if *c.KillGrace <= 0 {
			return nil, nil, cliparse.Usagef("--kill-grace must be a positive duration such as 10s")
		}
		o.KillGrace = *c.KillGrace
	case g != nil:
		o.KillGrace = g.KillGrace
	}

	var cfg *pool.Config
	named := c.Store
	if poolFile != "" {
		if cfg, err = pool.LoadFile(poolFile); err != nil {
			return nil, nil, err
		}
		if named, err = pool.StoreFor(c.Store, cfg); err != nil {
			return nil, nil, err
		}
	}
	where, err := dirstore.ResolveStore(named, "", cwd)
	if err != nil {
		return nil, nil, err
	}
	if named == "" {
		kinds := []string{kind}
		if cfg != nil {
			kinds = cfg.Kinds()
		}
		if err := dirstore.CheckCheckoutStore(context.Background(), cwd, where, kinds); err != nil {
			return nil, nil, err
		}
	}
	store, closer, err := storeopen.OpenOrHandOff(context.Background(), where, "pool-run", args, lease.WithOwnerPattern(c.OwnerPattern))
	if err != nil {
		return nil, nil, err
	}
	*closeStore = closer
	if err := store.CheckOwner(o.Owner); err != nil {
		return nil, nil, err
	}
	o.Store = store
	if poolFile == "" {
		o.Kind, o.TTLMinutes = kind, ttl
		return o, g, nil
	}
	if dir := store.Dir(); dir != "" {
		if err := dirpool.ClaimHostStore(dirpool.RegistryFrom(os.Getenv), cfg, dir, named == "", time.Now(), true); err != nil {
			return nil, nil, err
		}
	}
	o.Pool, err = pool.Open(store, cfg, pool.Options{
		TTLMinutes: ttl, Poll: poll,
		Provision: c.ProvisionCmd, Reset: c.ResetCmd, Health: c.HealthCmd, Log: stdio.Stderr,
	})
	if err != nil {
		return nil, nil, err
	}
	return o, g, nil
}

func abs(cwd, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(cwd, p)
}

func gateField(g *gates.Gate, f func(*gates.Gate) string) string {
	if g == nil {
		return ""
	}
	return f(g)
}

func firstOf(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
