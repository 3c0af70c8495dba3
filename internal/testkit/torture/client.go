package torture

import (
	"context"
	"errors"
	"fmt"
	_ "github.com/durable-lease/durable-lease/dirstore/dirpool" // a directory store's pools
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// Environment of a client process.
const (
	EnvRole    = "DL_TORTURE_ROLE"    // "client" or "final"
	envMode    = "DL_TORTURE_MODE"    // "lease" or "pool"
	envStore   = "DL_TORTURE_STORE"   // store directory
	envPool    = "DL_TORTURE_POOL"    // pool file (pool mode)
	envKind    = "DL_TORTURE_KIND"    // the lease kind (lease mode)
	envJournal = "DL_TORTURE_JOURNAL" // this client's journal file
	envRes     = "DL_TORTURE_RES"     // directory of the fenced resource files
	envClient  = "DL_TORTURE_CLIENT"  // the client's name, also its owner
	envOps     = "DL_TORTURE_OPS"     // how many lease operations to make
	envTTL     = "DL_TORTURE_TTL"     // TTL in minutes
	envSeed    = "DL_TORTURE_SEED"    // random seed
	envKinds   = "DL_TORTURE_KINDS"   // final: comma-separated kinds to acquire
	envWait    = "DL_TORTURE_WAIT_MS" // the longest wait of an acquire (0: mostly no wait)
)

// clientLife bounds a client process, so a wedged client fails the run
// instead of hanging it.
const clientLife = 5 * time.Minute

type client struct {
	j     *journal
	st    *lease.Store
	p     *pool.Pool
	name  string
	ttl   float64
	ttlMs int64
	res   string
	rng   *rand.Rand
	ops   int
	done  int
	wait  time.Duration // Profile.Wait
	log   io.Writer
}

// RunClientFromEnv runs the client role named by DL_TORTURE_ROLE and exits
// the process. It returns only when the variable is unset.
func RunClientFromEnv() {
	role := os.Getenv(EnvRole)
	if role == "" {
		return
	}
	go func() {
		time.Sleep(clientLife)
		fmt.Fprintln(os.Stderr, "torture client: lived too long")
		os.Exit(3)
	}()
	if err := clientMain(role); err != nil {
		fmt.Fprintln(os.Stderr, "torture client:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func clientMain(role string) error {
	c := &client{name: os.Getenv(envClient), res: os.Getenv(envRes), log: os.Stderr}
	var err error
	if c.ttl, err = strconv.ParseFloat(os.Getenv(envTTL), 64); err != nil {
		return fmt.Errorf("%s: %w", envTTL, err)
	}
	c.ttlMs = int64(c.ttl * 60_000)
	seed, _ := strconv.ParseUint(os.Getenv(envSeed), 10, 64)
	c.rng = rand.New(rand.NewPCG(seed, 0x746f7274757265))
	c.ops, _ = strconv.Atoi(os.Getenv(envOps))
	if ms, err := strconv.ParseInt(os.Getenv(envWait), 10, 64); err == nil {
		c.wait = time.Duration(ms) * time.Millisecond
	}
	if c.st, err = dirstore.Open(os.Getenv(envStore)); err != nil {
		return err
	}
	if c.j, err = openJournal(os.Getenv(envJournal), c.name); err != nil {
		return err
	}
	c.j.write(Entry{Phase: "end", Op: "start", Pid: os.Getpid(), TB: time.Now().UnixNano(), TTLms: c.ttlMs})
	ctx, cancel := context.WithTimeout(context.Background(), clientLife*9/10)
	defer cancel()
	switch {
	case role == "final":
		err = c.final(ctx, strings.Split(os.Getenv(envKinds), ","))
	case os.Getenv(envMode) == "pool":
		cfg, lerr := pool.LoadFile(os.Getenv(envPool))
		if lerr != nil {
			return lerr
		}
		if c.p, err = pool.Open(c.st, cfg, pool.Options{Poll: 50 * time.Millisecond, Log: io.Discard}); err != nil {
			return err
		}
		err = c.loop(ctx, c.poolAcquire)
	default:
		kind := os.Getenv(envKind)
		err = c.loop(ctx, func(ctx context.Context) (*holding, error) { return c.leaseAcquire(ctx, kind) })
	}
	c.j.write(Entry{Phase: "end", Op: "exit", Out: fmt.Sprint(c.done), TB: time.Now().UnixNano()})
	return err
}

// holding is a lease the client believes it holds.
type holding struct {
	kind, slot, tok string
	stamp           int64 // last heartbeat stamp known, ms
}

// loop makes c.ops lease operations: acquire; when won, the fenced
// critical section, a few heartbeats and a release (sometimes instead a
// deliberately late heartbeat, or nothing, leaving the lease to expire).
func (c *client) loop(ctx context.Context, acquire func(context.Context) (*holding, error)) error {
	for c.done < c.ops {
		h, err := acquire(ctx)
		c.done++
		if err != nil {
			return err
		}
		if h == nil {
			time.Sleep(time.Duration(c.rng.IntN(5000)) * time.Microsecond)
			continue
		}
		c.critical(h)
		r := c.rng.IntN(100)
		switch {
		case r < 3: // abandon: the lease must expire and be taken over
			continue
		case r < 6: // a heartbeat after the TTL must fail
			time.Sleep(time.Until(time.UnixMilli(h.stamp + c.ttlMs + 20)))
			c.heartbeat(ctx, h, true)
			c.done++
			c.release(ctx, h)
			c.done++
			continue
		}
		beats := c.rng.IntN(3)
		ok := true
		for i := 0; i < beats && ok && c.done < c.ops; i++ {
			time.Sleep(time.Duration(c.rng.IntN(int(c.ttlMs/32)+1)) * time.Millisecond)
			ok = c.heartbeat(ctx, h, false)
			c.done++
		}
		c.release(ctx, h)
		c.done++
	}
	return nil
}

func (c *client) leaseAcquire(ctx context.Context, kind string) (*holding, error) {
	tb := c.j.begin("acquire", kind)
	req := lease.Request{Kind: kind, Owner: c.name, TTLMinutes: c.ttl}
	var acq *lease.Acquisition
	var err error
	if c.wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, c.wait/2+time.Duration(c.rng.Int64N(int64(c.wait/2)+1)))
		acq, err = c.st.AcquireWait(wctx, req)
		cancel()
	} else {
		acq, err = c.st.Acquire(ctx, req)
	}
	ta := time.Now().UnixNano()
	e := Entry{Phase: "end", Op: "acquire", Kind: kind, TB: tb, TA: ta, TTLms: c.ttlMs}
	var h *holding
	switch {
	case err == nil:
		e.Out, e.Tok, e.Stamp = "won", acq.Record.Token, acq.Record.Heartbeat.UnixMilli()
		if acq.TookOverExpired {
			e.Out = "tookover"
			if p := acq.Previous; p != nil {
				e.PrevTok, e.PrevOwner, e.PrevCorrupt = p.Token, p.Owner, p.Corrupt
			}
		}
		h = &holding{kind: kind, tok: e.Tok, stamp: e.Stamp}
	case errors.Is(err, lease.ErrHeld):
		e.Out = "refused"
		if rec := lease.LiveRecord(err); rec != nil && rec.Corrupt {
			e.PrevCorrupt = true
		}
	default:
		e.Out, e.Code, e.Err = "error", code(err), err.Error()
	}
	c.j.write(e)
	return h, nil
}

func (c *client) poolAcquire(ctx context.Context) (*holding, error) {
	tb := c.j.begin("acquire", "")
	req := pool.AcquireRequest{Owner: c.name, NoWait: c.rng.IntN(2) == 0}
	if !req.NoWait {
		req.Wait = time.Duration(50+c.rng.IntN(250)) * time.Millisecond
	}
	if c.wait > 0 {
		req.NoWait, req.Wait = false, c.wait/2+time.Duration(c.rng.Int64N(int64(c.wait/2)+1))
	}
	g, err := c.p.Acquire(ctx, req)
	e := Entry{Phase: "end", Op: "acquire", TB: tb, TTLms: c.ttlMs}
	var h *holding
	switch {
	case err == nil:
		e.Out, e.Kind, e.Slot, e.Tok = "won", g.Kind, fmt.Sprint(g.Slot), g.Token
		// The grant does not carry the record's stamps: read them, and
		// trust them only if the record is still this grant's.
		if s, serr := c.st.Status(ctx, g.Kind); serr == nil && s.Record != nil && !s.Record.Corrupt && s.Record.Token == g.Token {
			e.Stamp = s.Record.Heartbeat.UnixMilli()
			h = &holding{kind: g.Kind, slot: e.Slot, tok: g.Token, stamp: e.Stamp}
		} else {
			e.Out = "lost"
		}
	case errors.Is(err, pool.ErrSaturated), errors.Is(err, pool.ErrTimeout):
		e.Out, e.Code = "refused", code(err)
	default:
		e.Out, e.Code, e.Err = "error", code(err), err.Error()
	}
	e.TA = time.Now().UnixNano()
	c.j.write(e)
	return h, nil
}

// critical is the fenced critical section: append an enter line to the
// kind's resource file, pause, check that the last line is still ours,
// append an exit line. The resource is protected by nothing but the lease.
func (c *client) critical(h *holding) {
	path := filepath.Join(c.res, h.kind+".res")
	tb := c.j.begin("cs", h.kind)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		c.j.write(Entry{Phase: "end", Op: "cs", Kind: h.kind, Out: "error", Err: err.Error(), TB: tb, TA: time.Now().UnixNano()})
		return
	}
	defer f.Close()
	enter := fmt.Sprintf("enter %s %s %d", c.name, h.tok, time.Now().UnixNano())
	_, _ = f.WriteString(enter + "\n")
	time.Sleep(time.Duration(c.rng.IntN(2000)) * time.Microsecond)
	last := lastLine(f)
	out := "ok"
	if last != enter {
		out = "interleaved"
	}
	_, _ = fmt.Fprintf(f, "exit %s %s %d\n", c.name, h.tok, time.Now().UnixNano())
	e := Entry{Phase: "end", Op: "cs", Kind: h.kind, Out: out, Tok: h.tok, TB: tb, TA: time.Now().UnixNano()}
	if out != "ok" {
		e.Err = "last line: " + last
	}
	c.j.write(e)
}

// lastLine returns the last line of f (without its newline).
func lastLine(f *os.File) string {
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-512, 0)
	buf := make([]byte, fi.Size()-off)
	n, _ := f.ReadAt(buf, off)
	s := strings.TrimSuffix(string(buf[:n]), "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

func (c *client) heartbeat(ctx context.Context, h *holding, late bool) bool {
	tb := c.j.begin("heartbeat", h.kind)
	var rec *lease.Record
	var err error
	if c.p != nil {
		_, rec, err = c.p.Heartbeat(ctx, h.slot, c.name, h.tok)
	} else {
		rec, err = c.st.Heartbeat(ctx, lease.Ref{Kind: h.kind, Owner: c.name, Token: h.tok})
	}
	e := Entry{Phase: "end", Op: "heartbeat", Kind: h.kind, Tok: h.tok, Late: late, TB: tb, TA: time.Now().UnixNano(), TTLms: c.ttlMs}
	if err == nil {
		e.Out, e.Stamp = "ok", rec.Heartbeat.UnixMilli()
		h.stamp = e.Stamp
	} else {
		e.Out, e.Code, e.Err = "failed", code(err), err.Error()
	}
	c.j.write(e)
	return err == nil
}

func (c *client) release(ctx context.Context, h *holding) {
	tb := c.j.begin("release", h.kind)
	released, err := false, error(nil)
	if c.p != nil {
		var r *pool.Released
		if r, err = c.p.Release(ctx, h.slot, c.name, h.tok, false); err == nil {
			released = r.Released
		}
	} else {
		var r *lease.Released
		if r, err = c.st.Release(ctx, lease.Ref{Kind: h.kind, Owner: c.name, Token: h.tok}); err == nil {
			released = r.Released
		}
	}
	e := Entry{Phase: "end", Op: "release", Kind: h.kind, Tok: h.tok, TB: tb, TA: time.Now().UnixNano()}
	switch {
	case err != nil:
		e.Out, e.Code, e.Err = "failed", code(err), err.Error()
	case released:
		e.Out = "ok"
	default:
		e.Out, e.Code = "failed", "not_held"
	}
	c.j.write(e)
}

// final acquires every kind, waiting out dead holders, then releases it:
// the end-of-run proof that nothing is wedged.
func (c *client) final(ctx context.Context, kinds []string) error {
	var failed []string
	for _, kind := range kinds {
		deadline := time.Now().Add(time.Duration(c.ttlMs)*time.Millisecond + 10*time.Second)
		var h *holding
		for h == nil && time.Now().Before(deadline) {
			h, _ = c.leaseAcquire(ctx, kind)
			if h == nil {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if h == nil {
			failed = append(failed, kind)
			continue
		}
		c.critical(h)
		c.release(ctx, h)
	}
	if len(failed) > 0 {
		return fmt.Errorf("final: could not acquire %v", failed)
	}
	return nil
}

// code names an error by its sentinel, as the CLIs do.
func code(err error) string {
	for _, s := range []struct {
		err  error
		name string
	}{
		{lease.ErrHeld, "held"}, {lease.ErrNotHeld, "not_held"}, {lease.ErrExpired, "expired"},
		{lease.ErrNotOwner, "not_owner"}, {lease.ErrGuardBusy, "guard_busy"}, {lease.ErrInvalid, "invalid"},
		{pool.ErrSaturated, "saturated"}, {pool.ErrTimeout, "timeout"}, {pool.ErrQueueBusy, "queue_busy"},
		{pool.ErrQueueEntryLost, "queue_entry_lost"}, {pool.ErrLeaseLost, "lease_lost"},
		{pool.ErrProvisionFailed, "reset_failed"}, {pool.ErrHealthFailed, "health_failed"},
		{context.DeadlineExceeded, "deadline"},
	} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return "internal"
}
