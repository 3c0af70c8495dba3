package poolcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/durable-lease/durable-lease/internal/cli/cliparse"
	"github.com/durable-lease/durable-lease/internal/cli/progress"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

type acquireCmd struct {
	Owner   string `required:"" placeholder:"OWNER" help:"Who takes the slot (must match the owner pattern)."`
	Session string `placeholder:"NAME" help:"Requester name shown in status (default: the owner)."`
	waitFlags
	WaitMs *int64 `name:"wait-ms" placeholder:"MS" help:"Give up after this many milliseconds in the queue (exit 1, code timeout); 0 is --no-wait. Default: wait as long as it takes."`
	NoWait bool   `name:"no-wait" help:"Take a slot now or refuse at once (exit 1, code saturated, with position and etaMs)."`
	Shell  bool   `help:"Print export lines for eval (the grant env plus <shellPrefix>_SLOT, _TOKEN, _OWNER) instead of JSON."`
}

func (c *acquireCmd) Run(e *env) error {
	var wait time.Duration
	if c.WaitMs != nil {
		var err error
		if wait, err = cliparse.Ms("wait-ms", *c.WaitMs); err != nil {
			return err
		}
	}
	if c.WaitMs != nil && *c.WaitMs == 0 {
		c.NoWait = true
	}
	if c.NoWait && c.WaitMs != nil && *c.WaitMs > 0 {
		return cliparse.Usagef("--no-wait and --wait-ms exclude each other")
	}
	p, err := e.open(c.waitFlags)
	if err != nil {
		return err
	}
	line := progress.New(e.stderr, "pool")
	g, err := p.Acquire(e.ctx, pool.AcquireRequest{Owner: c.Owner, Session: c.Session, NoWait: c.NoWait, Wait: wait, OnWait: line.Show})
	line.Done()
	if err != nil {
		return err
	}
	if err := e.printGrant(p, g, c.Shell); err != nil {
		// A grant nobody received must not hold the slot for a whole TTL.
		if _, rerr := p.Release(context.WithoutCancel(e.ctx), fmt.Sprint(g.Slot), g.Owner, g.Token, false); rerr != nil {
			fmt.Fprintf(e.stderr, "pool: releasing slot %v after a failed hand-out: %v\n", g.Slot, rerr)
		}
		return err
	}
	return nil
}

func (e *env) printGrant(p *pool.Pool, g *pool.Grant, shell bool) error {
	if shell {
		text, err := pool.GrantExports(g, p.Config().ShellPrefix)
		if err != nil {
			return err
		}
		_, err = fmt.Fprint(e.stdout, text)
		return err
	}
	return e.emit(g)
}

type requestCmd struct {
	Owner   string `required:"" placeholder:"OWNER" help:"Who will hold the slot."`
	Session string `placeholder:"NAME" help:"The session to nudge when the grant is ready (default: the owner)."`
	waitFlags
	TimeoutMs int64 `name:"timeout-ms" env:"POOL_WAITER_TIMEOUT_MS" default:"3600000" placeholder:"MS" help:"The detached waiter gives the request up after this long in the queue."`
	NoWaiter  bool  `name:"no-waiter" help:"(plumbing) Queue the request without starting its waiter: the caller keeps it live with heartbeat-entry and grants it with try-grant, or the next sweep drops it after waiterStaleMs."`
}

type requestOut struct {
	OK         bool   `json:"ok"`
	Queued     bool   `json:"queued"`
	RequestID  string `json:"requestId"`
	ReqIDSnake string `json:"request_id"`
	Owner      string `json:"owner"`
	Session    string `json:"session"`
	Position   int    `json:"position"`
	EtaMs      int64  `json:"etaMs"`
	Eta        string `json:"eta"`
	WaiterPID  int    `json:"waiterPid,omitempty"`
}

func (c *requestCmd) Run(e *env) error {
	if c.TimeoutMs <= 0 || c.TimeoutMs > cliparse.MaxMs {
		return cliparse.Usagef("--timeout-ms (POOL_WAITER_TIMEOUT_MS) must be between 1 and %d milliseconds (366 days)", int64(cliparse.MaxMs))
	}
	p, err := e.open(c.waitFlags)
	if err != nil {
		return err
	}
	q, err := p.Request(e.ctx, c.Owner, c.Session)
	if err != nil {
		return err
	}
	pid := 0
	if !c.NoWaiter {
		pid, err = e.startWaiter(p, q.RequestID, c.Owner, c.waitFlags, c.TimeoutMs)
	}
	if err != nil {
		if werr := p.Withdraw(context.WithoutCancel(e.ctx), q.RequestID, c.Owner); werr != nil {
			fmt.Fprintf(e.stderr, "pool: withdrawing request %s: %v\n", q.RequestID, werr)
		}
		return fmt.Errorf("the waiter of request %s did not start, so it was withdrawn: %w", q.RequestID, err)
	}
	return e.emit(requestOut{OK: true, Queued: true, RequestID: q.RequestID, ReqIDSnake: q.RequestID,
		Owner: q.Owner, Session: q.Session, Position: q.Position.Position, EtaMs: q.EtaMs,
		Eta: pool.FormatEta(q.EtaMs), WaiterPID: pid})
}

// SelfCommand is the word that makes the running executable read a pool
// command line, for the processes pool starts of itself (the detached
// waiter): "" where the executable is pool itself (or a test binary run as
// pool), "pool" in one that serves several CLIs by their first word
// (durable-lease-etcd pool ARGS...), whose main sets it before [Main].
var SelfCommand string

// selfCommand returns the path and the first arguments that run this
// executable as pool. The path is the running executable's own file
// (os.Executable, from /proc/self/exe), never a lookup of os.Args[0] on
// PATH, which could find another installation, of another version, or
// another program of the same name; after a hand-off os.Args[0] is not
// even pool (durable-lease-etcd pool ARGS...).
func selfCommand() (path string, argv []string, err error) {
	if path, err = os.Executable(); err != nil {
		return "", nil, fmt.Errorf("finding the running executable: %w", err)
	}
	// argv[0] keeps the name the process was run by: a test binary run
	// as pool by testscript knows what to serve by it alone.
	argv = []string{filepath.Base(os.Args[0])}
	if SelfCommand != "" {
		argv = append(argv, SelfCommand)
	}
	return path, argv, nil
}

// startWaiter starts this program's hidden waiter verb as a detached
// process (its own session, no terminal, no inherited output) that grants
// the request when its turn comes. It is the same executable, serving the
// same store (passed whole, with the pool file and the command overrides),
// so a pool handed an etcd:// store runs it in durable-lease-etcd as well.
func (e *env) startWaiter(p *pool.Pool, id, owner string, w waitFlags, timeoutMs int64) (int, error) {
	self, argv, err := selfCommand()
	if err != nil {
		return 0, err
	}
	args := append(argv, "waiter", "--request", id, "--owner", owner,
		"--pool", p.Config().File, "--store", p.Store().Where(),
		"--ttl", strconv.FormatFloat(p.TTLMinutes(), 'f', -1, 64), "--timeout-ms", strconv.FormatInt(timeoutMs, 10))
	if w.PollMs > 0 {
		args = append(args, "--poll-ms", strconv.FormatInt(w.PollMs, 10))
	}
	for _, f := range []struct{ name, value string }{
		{"--owner-pattern", e.g.OwnerPattern}, {"--provision-cmd", e.g.ProvisionCmd},
		{"--reset-cmd", e.g.ResetCmd}, {"--health-cmd", e.g.HealthCmd}, {"--nudge-cmd", e.g.NudgeCmd},
	} {
		if f.value != "" {
			args = append(args, f.name, f.value)
		}
	}
	cmd := &exec.Cmd{Path: self, Args: args, Dir: e.cwd, Env: os.Environ(),
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	return pid, nil
}

type waiterCmd struct {
	Request string `required:"" placeholder:"ID"`
	Owner   string `required:"" placeholder:"OWNER"`
	waitFlags
	TimeoutMs int64 `name:"timeout-ms" env:"POOL_WAITER_TIMEOUT_MS" default:"3600000" placeholder:"MS" help:"Give up on the request after this long."`
}

type waiterOut struct {
	OK         bool   `json:"ok"`
	Code       string `json:"code"`
	RequestID  string `json:"requestId"`
	ReqIDSnake string `json:"request_id"`
	Slot       any    `json:"slot"`
	SlotID     any    `json:"slot_id"`
}

func (c *waiterCmd) Run(e *env) error {
	if c.TimeoutMs <= 0 || c.TimeoutMs > cliparse.MaxMs {
		return cliparse.Usagef("POOL_WAITER_TIMEOUT_MS must be between 1 and %d milliseconds (366 days)", int64(cliparse.MaxMs))
	}
	p, err := e.open(c.waitFlags)
	if err != nil {
		return err
	}
	g, err := p.Wait(e.ctx, c.Request, c.Owner, time.Duration(c.TimeoutMs)*time.Millisecond)
	if err != nil {
		return &withRequest{err: err, id: c.Request}
	}
	return e.emit(waiterOut{OK: true, Code: "granted", RequestID: c.Request, ReqIDSnake: c.Request, Slot: g.Slot, SlotID: g.Slot})
}

type claimCmd struct {
	Request string `required:"" placeholder:"ID" help:"The requestId printed by request."`
	Owner   string `required:"" placeholder:"OWNER" help:"The owner that requested it."`
	Shell   bool   `help:"Print export lines for eval instead of JSON, once granted."`
}

type queuedOut struct {
	OK         bool   `json:"ok"`
	Queued     bool   `json:"queued"`
	State      string `json:"state"`
	RequestID  string `json:"requestId"`
	ReqIDSnake string `json:"request_id"`
	Position   int    `json:"position"`
	EtaMs      int64  `json:"etaMs"`
	Eta        string `json:"eta"`
	// SlotID names the slot of a request being provisioned.
	SlotID any `json:"slot_id,omitempty"`
}

func (c *claimCmd) Run(e *env) error {
	p, err := e.open(waitFlags{})
	if err != nil {
		return err
	}
	cl, err := p.Claim(e.ctx, c.Request, c.Owner)
	if err != nil {
		return &withRequest{err: err, id: c.Request}
	}
	if cl.Queued != nil {
		if c.Shell && cl.Queued.Provisioning {
			return &withRequest{err: fmt.Errorf("%w: request %s has slot %v and is being provisioned; claim again shortly",
				pool.ErrSaturated, c.Request, cl.Queued.Slot.RawID), id: c.Request}
		}
		if c.Shell {
			return &withRequest{err: fmt.Errorf("%w: request %s is still queued at position %d, eta %s",
				pool.ErrSaturated, c.Request, cl.Queued.Position.Position, pool.EtaText(cl.Queued.EtaMs)), id: c.Request}
		}
		q := cl.Queued
		if q.Provisioning {
			// Out of the queue with a slot whose grant is being prepared.
			return e.emit(queuedOut{OK: true, Queued: true, State: "provisioning", RequestID: q.RequestID, ReqIDSnake: q.RequestID,
				SlotID: q.Slot.RawID})
		}
		return e.emit(queuedOut{OK: true, Queued: true, State: "queued", RequestID: q.RequestID, ReqIDSnake: q.RequestID,
			Position: q.Position.Position, EtaMs: q.EtaMs, Eta: pool.FormatEta(q.EtaMs)})
	}
	if c.Shell {
		var g struct {
			Env   map[string]string `json:"env"`
			Token string            `json:"token"`
			Owner string            `json:"owner"`
			Fence int64             `json:"fence"`
		}
		raw, _ := json.Marshal(cl.Grant)
		if err := json.Unmarshal(raw, &g); err != nil {
			return fmt.Errorf("grant file of %s: %w", c.Request, err)
		}
		var slot any
		_ = json.Unmarshal(firstOf(cl.Grant, "slot", "slot_id"), &slot)
		text, err := pool.GrantExports(&pool.Grant{Env: g.Env, Slot: slot, Token: g.Token, Owner: g.Owner, Fence: g.Fence}, p.Config().ShellPrefix)
		if err != nil {
			return err
		}
		_, err = fmt.Fprint(e.stdout, text)
		return err
	}
	g, err := cl.GrantJSON()
	if err != nil {
		return err
	}
	return e.emit(g)
}

func firstOf(m map[string]json.RawMessage, keys ...string) json.RawMessage {
	for _, k := range keys {
		if v, ok := m[k]; ok {
			return v
		}
	}
	return json.RawMessage("null")
}

// slotOut names the slot an operation acted on.
type slotOut struct {
	OK     bool   `json:"ok"`
	Code   string `json:"code"`
	Slot   any    `json:"slot"`
	SlotID any    `json:"slot_id"`
	Kind   string `json:"kind"`
}

func slotResult(code string, s *pool.Slot) slotOut {
	return slotOut{OK: true, Code: code, Slot: s.RawID, SlotID: s.RawID, Kind: s.Kind}
}

type slotFlags struct {
	Slot string `required:"" placeholder:"ID" help:"The slot id."`
}

type heartbeatCmd struct {
	slotFlags
	Owner string `required:"" placeholder:"OWNER" help:"The owner of the grant."`
	Token string `required:"" placeholder:"TOKEN" help:"The grant's token."`
}

type heartbeatOut struct {
	slotOut
	Record      *lease.Record `json:"record"`
	ExpiresAt   string        `json:"expiresAt"`
	ExpiresInMs int64         `json:"expiresInMs"`
}

func (c *heartbeatCmd) Run(e *env) error {
	p, err := e.open(waitFlags{})
	if err != nil {
		return err
	}
	s, rec, err := p.Heartbeat(e.ctx, c.Slot, c.Owner, c.Token)
	if err != nil {
		return err
	}
	return e.emit(heartbeatOut{slotOut: slotResult("refreshed", s), Record: rec,
		ExpiresAt: lease.FormatTime(rec.ExpiresAt()), ExpiresInMs: rec.ExpiresAt().Sub(p.Store().Now()).Milliseconds()})
}

type resetCmd struct {
	slotFlags
	Owner string `required:"" placeholder:"OWNER" help:"The owner of the grant."`
	Token string `required:"" placeholder:"TOKEN" help:"The grant's token."`
}

func (c *resetCmd) Run(e *env) error {
	p, err := e.open(waitFlags{})
	if err != nil {
		return err
	}
	s, err := p.Reset(e.ctx, c.Slot, c.Owner, c.Token)
	if err != nil {
		return err
	}
	return e.emit(slotResult("reset", s))
}

type releaseCmd struct {
	slotFlags
	Owner string `placeholder:"OWNER" help:"The owner of the grant (with --force: who is forcing)."`
	Token string `placeholder:"TOKEN" help:"The grant's token."`
	Force bool   `help:"Operator escape hatch: remove the slot's lease whoever holds it. Journaled; needs --owner or the pool file's bookkeeper."`
}

type releaseOut struct {
	slotOut
	Released   bool `json:"released"`
	WasExpired bool `json:"wasExpired"`
	Forced     bool `json:"forced,omitempty"`
}

func (c *releaseCmd) Run(e *env) error {
	if !c.Force && (c.Owner == "" || c.Token == "") {
		return cliparse.Usagef("release needs --owner and --token (or --force)")
	}
	p, err := e.open(waitFlags{})
	if err != nil {
		return err
	}
	rel, err := p.Release(e.ctx, c.Slot, c.Owner, c.Token, c.Force)
	if err != nil {
		return err
	}
	code := "released"
	if !rel.Released {
		code = "not_held"
	}
	return e.emit(releaseOut{slotOut: slotResult(code, rel.Slot), Released: rel.Released, WasExpired: rel.WasExpired, Forced: c.Force})
}

type reprovisionCmd struct {
	slotFlags
	Owner string `required:"" placeholder:"OWNER" help:"Who holds the slot while it is reprovisioned."`
	waitFlags
}

func (c *reprovisionCmd) Run(e *env) error {
	p, err := e.open(c.waitFlags)
	if err != nil {
		return err
	}
	s, err := p.Reprovision(e.ctx, c.Slot, c.Owner)
	if err != nil {
		return err
	}
	return e.emit(slotResult("reprovisioned", s))
}

type healthCmd struct {
	slotFlags
}

type healthOut struct {
	slotOut
	Checked bool   `json:"checked"`
	Note    string `json:"note,omitempty"`
}

func (c *healthCmd) Run(e *env) error {
	p, err := e.open(waitFlags{})
	if err != nil {
		return err
	}
	s, checked, err := p.Health(e.ctx, c.Slot)
	var se *pool.SlotError
	if errors.As(err, &se) {
		se.State = "unhealthy"
	}
	if err != nil {
		return err
	}
	out := healthOut{slotOut: slotResult("healthy", s), Checked: checked}
	if !checked {
		out.Note = "the pool has no health command"
	}
	return e.emit(out)
}
