package pool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/provision"
)

// DefaultPoll is how often a waiter re-checks the pool when no filesystem
// event wakes it, and heartbeats its queue entry. Events normally wake it
// within milliseconds of a release; the poll covers missed events.
const DefaultPoll = 5 * time.Second

// ScriptRunner runs one provision, reset or health command for a slot. The
// default runs script in-process with package provision; tests inject fakes.
type ScriptRunner func(ctx context.Context, action provision.Action, slot *Slot, script string) error

// Options tune a [Pool]. Zero values keep the pool file's settings.
type Options struct {
	// TTLMinutes overrides the pool file's slot TTL.
	TTLMinutes float64
	// Poll overrides DefaultPoll. It is capped at a third of the waiter
	// stale bound so a live waiter is never dropped.
	Poll time.Duration
	// Provision, Reset, Health and NudgeCommand override the pool file's
	// commands (the CLI resolves flags and environment into them).
	Provision, Reset, Health, NudgeCommand string
	// ScriptRunner replaces the in-process shell runner.
	ScriptRunner ScriptRunner
	// Notify replaces the default nudge delivery (nudges.jsonl plus the
	// nudge command).
	Notify func(ctx context.Context, n Nudge)
	// Log receives command output and warnings; nil discards them.
	Log io.Writer
	// Env is the base environment of commands; nil means os.Environ().
	Env []string
	// Backend replaces the state the store's backend keeps for the pool
	// (see [Backend]).
	Backend Backend
}

// Pool is one pool of slots over a lease store.
type Pool struct {
	store        *lease.Store
	backend      Backend
	cfg          *Config
	ttl          float64
	poll         time.Duration
	cmds         commands
	scriptRunner ScriptRunner
	notify       func(context.Context, Nudge)
	log          io.Writer
	env          []string
	// swept is when this process last swept the pool (Unix ns), so that
	// an attempt right after the enqueue's sweep does not read every slot
	// again (see sweepIfStale).
	swept atomic.Int64
	// holdsWarned says the statistics could not be read, once.
	holdsWarned sync.Once
}

type commands struct {
	provision, reset, health, nudge string
}

// Open returns the pool described by cfg over store. It creates nothing on
// disk; the pool's directory appears with its first write. Its state is
// kept by the store's backend (a [BackendProvider], or one found through
// [RegisterProvider]): a program that opens pools on a directory store
// must link package dirstore/dirpool, or Open refuses the store.
func Open(store *lease.Store, cfg *Config, opts Options) (*Pool, error) {
	p := &Pool{
		store: store, cfg: cfg,
		ttl: cfg.TTLMinutes, poll: DefaultPoll, log: opts.Log, env: opts.Env,
		cmds: commands{provision: cfg.Provision, reset: cfg.Reset, health: cfg.Health, nudge: cfg.NudgeCommand},
	}
	if opts.TTLMinutes != 0 {
		if !lease.ValidTTL(opts.TTLMinutes) {
			return nil, fmt.Errorf("%w: ttl %v minutes must be %s", ErrInvalid, opts.TTLMinutes, lease.TTLRange)
		}
		p.ttl = opts.TTLMinutes
	}
	if opts.Poll > 0 {
		p.poll = opts.Poll
	}
	p.poll = min(p.poll, cfg.WaiterStale/3)
	if opts.Provision != "" {
		p.cmds.provision = opts.Provision
		if opts.Reset == "" && cfg.Reset == cfg.Provision {
			p.cmds.reset = opts.Provision // reset still defaults to provision
		}
	}
	if opts.Reset != "" {
		p.cmds.reset = opts.Reset
	}
	if opts.Health != "" {
		p.cmds.health = opts.Health
	}
	if opts.NudgeCommand != "" {
		p.cmds.nudge = opts.NudgeCommand
	}
	if p.log == nil {
		p.log = io.Discard
	}
	if p.env == nil {
		p.env = os.Environ()
	}
	for _, c := range []struct {
		name, script string
		takesSlot    bool
	}{
		{"provision", p.cmds.provision, true}, {"reset", p.cmds.reset, true},
		{"health", p.cmds.health, true}, {"nudgeCommand", p.cmds.nudge, false},
	} {
		if c.script == "" {
			continue
		}
		if err := provision.Check(c.script, c.takesSlot); err != nil {
			return nil, fmt.Errorf("%w: the %s command %q: %v", ErrConfig, c.name, c.script, err)
		}
	}
	p.scriptRunner = opts.ScriptRunner
	if p.scriptRunner == nil {
		p.scriptRunner = p.runShell
	}
	p.notify = opts.Notify
	if p.notify == nil {
		p.notify = p.deliverNudge
	}
	switch sp := providerFor(store.Backend()); {
	case opts.Backend != nil:
		p.backend = opts.Backend
	case sp != nil:
		st, err := sp.PoolBackend(cfg, Host{Store: store, Live: p.live, Event: p.logEvent, Log: p.log})
		if err != nil {
			return nil, err
		}
		p.backend = st
	default:
		if r, ok := store.Backend().(PoolRefuser); ok {
			return nil, fmt.Errorf("%w: the store %s keeps no pools: %s", lease.ErrInvalid, store.Where(), r.WhyNoPools())
		}
		if store.Dir() != "" {
			return nil, fmt.Errorf("%w: the store %s keeps no pools in this program: a directory store's pools are package dirstore/dirpool's, which it does not link", ErrConfig, store.Where())
		}
		return nil, fmt.Errorf("%w: the store %s keeps no pools: its backend keeps no pool state", ErrConfig, store.Where())
	}
	return p, nil
}

// Config is the pool's configuration.
func (p *Pool) Config() *Config { return p.cfg }

// Dir is the pool's state directory, <store>/<name>, or "" when its state
// is kept elsewhere (on etcd).
func (p *Pool) Dir() string {
	if d, ok := p.backend.(interface{ Dir() string }); ok {
		return d.Dir()
	}
	return ""
}

// Backend is where the pool keeps its state (see [Backend]).
func (p *Pool) Backend() Backend { return p.backend }

// Where names the place the pool's state is kept: its directory, or a
// URL under the store's.
func (p *Pool) Where() string { return p.backend.Where() }

// Store is the lease store under the pool.
func (p *Pool) Store() *lease.Store { return p.store }

// TTLMinutes is the TTL given to slot leases.
func (p *Pool) TTLMinutes() float64 { return p.ttl }

func (p *Pool) now() time.Time { return p.store.Now() }

func (p *Pool) stamp() string { return lease.FormatTime(p.now()) }

// newID returns a random version-4 UUID, the form the reference
// implementation uses for request ids.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// CheckRequestID validates a request id before it names a file.
func CheckRequestID(id string) error {
	if !validRequestID(id) {
		return fmt.Errorf("%w: request id %q must match %s", ErrInvalid, id, requestIDPattern)
	}
	return nil
}
