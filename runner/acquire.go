package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// session is a lease held for one run.
type session struct {
	o        *Options
	renewals *renewals      // the Hold's confirmed deadlines
	tstp     chan os.Signal // SIGTSTP, with Options.JobControl
	held     Held
	hold     *lease.Hold
	cont     *contained // the work's cgroup, or the tree
	env      []string   // the work's environment
	start    time.Time
}

// signalWatch cancels a context on the first signal of o.Signals, until
// stopped; it is how a wait or a provision is interrupted.
type signalWatch struct {
	mu   sync.Mutex
	sig  os.Signal
	stop chan struct{}
	done chan struct{}
}

func watchSignals(ch <-chan os.Signal, cancel context.CancelFunc) *signalWatch {
	w := &signalWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		select {
		case s := <-ch:
			w.mu.Lock()
			w.sig = s
			w.mu.Unlock()
			cancel()
		case <-w.stop:
		}
	}()
	return w
}

// end stops watching and returns the signal received, if any.
func (w *signalWatch) end() os.Signal {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sig
}

// acquire takes what o names and starts keeping it. A signal from
// o.Signals while it waits or provisions cancels cleanly: the queue entry
// is removed, a slot being provisioned is given back, and the result says
// which signal. On failure the Result is returned and the session is nil.
func acquire(ctx context.Context, o *Options) (*session, *Result) {
	label := o.Kind
	if o.Pool != nil {
		label = o.Pool.Config().Name
	}
	cont, err := contain(o, label)
	if err != nil {
		if errors.Is(err, ErrInvalid) {
			return nil, &Result{Exit: ExitUsage, Code: CodeUsage, Err: err}
		}
		return nil, &Result{Exit: ExitInternal, Code: CodeInternal, Err: err}
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := watchSignals(o.Signals, cancel)
	s, err := take(actx, o, cont)
	if sig := w.end(); sig != nil {
		cont.close(logf(o.Log))
		if s != nil {
			_, _ = s.release()
		}
		return nil, &Result{Exit: signalStatus(sig), Code: CodeInterrupted, Signal: sig,
			Err: fmt.Errorf("while acquiring: %w", &interruption{sig})}
	}
	if err != nil {
		cont.close(logf(o.Log))
		return nil, &Result{Exit: ExitRefused, Code: CodeNotAcquired, Err: &AcquireError{Err: err}}
	}
	return s, nil
}

// take acquires the slot or the baton and starts its Hold. The lease's
// record names the run's cgroup, and the slot's provision and health
// commands run in it.
func take(ctx context.Context, o *Options, cont *contained) (*session, error) {
	rn := newRenewals()
	hopts := lease.HoldOptions{Interval: o.Heartbeat, Renewed: rn.note}
	if o.Pool != nil {
		pctx, done := cont.withCgroup(ctx)
		defer done()
		ctx = pctx
		req := pool.AcquireRequest{Owner: o.Owner, NoWait: o.NoWait, Wait: o.Wait, Work: cont.work(),
			Acquired: func(rec *lease.Record) { cont.bind(rec, logf(o.Log)) }}
		if o.Queue != nil {
			req.OnWait = o.Queue.Show
		}
		g, err := o.Pool.Acquire(ctx, req)
		if o.Queue != nil {
			o.Queue.Done()
		}
		if err != nil {
			return nil, err
		}
		s := &session{o: o, renewals: rn, start: time.Now(), cont: cont, held: Held{Kind: g.Kind, Slot: fmt.Sprint(g.Slot), Pool: o.Pool.Config().Name, Owner: g.Owner, Token: g.Token}}
		s.hold, err = o.Pool.Keep(context.WithoutCancel(ctx), g, hopts)
		if err != nil {
			if !errors.Is(err, pool.ErrLeaseLost) {
				_, _ = o.Pool.Release(context.WithoutCancel(ctx), s.held.Slot, g.Owner, g.Token, false)
			}
			return nil, err
		}
		grantEnv, err := slotWorkEnv(o.Pool.Config(), g)
		if err != nil {
			_, _ = s.release()
			return nil, err
		}
		s.env = workEnv(o.Env, grantEnv, storeEnv(o, HeldLease{Kind: g.Kind, Pool: s.held.Pool, Slot: s.held.Slot}, withFence(map[string]string{
			"POOL_RUN_SLOT": s.held.Slot, "POOL_RUN_TOKEN": g.Token, "POOL_RUN_OWNER": g.Owner,
		}, g.Fence)))
		return s, nil
	}
	acq, err := acquireBaton(ctx, o, cont.work())
	if err != nil {
		return nil, err
	}
	rec := acq.Record
	cont.bind(rec, logf(o.Log))
	if acq.TookOverExpired {
		fmt.Fprintf(o.Log, "pool-run: took over the dead lease %s of %q (journaled in %s)\n", o.Kind, acq.Previous.Owner, o.Store.JournalWhere())
	}
	s := &session{o: o, renewals: rn, start: time.Now(), cont: cont, held: Held{Kind: o.Kind, Owner: o.Owner, Token: rec.Token}}
	hopts.Acquired = rec
	s.hold, err = o.Store.Keep(context.WithoutCancel(ctx), o.Kind, o.Owner, rec.Token, hopts)
	if err != nil {
		if !errors.Is(err, lease.ErrLost) {
			_, _ = o.Store.Release(context.WithoutCancel(ctx), lease.Ref{Kind: o.Kind, Owner: o.Owner, Token: rec.Token})
		}
		return nil, err
	}
	s.env = workEnv(o.Env, nil, storeEnv(o, HeldLease{Kind: o.Kind}, withFence(map[string]string{
		"POOL_RUN_KIND": o.Kind, "POOL_RUN_TOKEN": rec.Token, "POOL_RUN_OWNER": o.Owner,
	}, rec.Fence)))
	return s, nil
}

// slotWorkEnv is the grant's env for the work: the slot's POOL_SLOT_*
// variables with g.Env on top ([pool.Config.WorkEnv]), so a command or a
// gate's env can name the slot's attributes whatever grantEnv says.
func slotWorkEnv(cfg *pool.Config, g *pool.Grant) (map[string]string, error) {
	slot, err := cfg.SlotByID(fmt.Sprint(g.Slot))
	if err != nil {
		return nil, err
	}
	env, err := cfg.WorkEnv(slot)
	if err != nil {
		return nil, err
	}
	for k, v := range g.Env {
		env[k] = v
	}
	return env, nil
}

// withFence adds POOL_RUN_FENCE when the lease has a fence, so the work can
// hand it to the resource it protects (which refuses fences lower than the
// highest it has seen).
func withFence(env map[string]string, fence int64) map[string]string {
	if fence > 0 {
		env["POOL_RUN_FENCE"] = strconv.FormatInt(fence, 10)
	}
	return env
}

// acquireBaton takes the baton, telling whoever has to wait who holds it
// and until when.
func acquireBaton(ctx context.Context, o *Options, work *lease.Work) (*lease.Acquisition, error) {
	req := lease.Request{Kind: o.Kind, Owner: o.Owner, TTLMinutes: o.TTLMinutes, Payload: o.Payload, Work: work}
	acq, err := o.Store.Acquire(ctx, req)
	var held *lease.HeldError
	if o.NoWait || !errors.As(err, &held) {
		return acq, err
	}
	bound := "as long as it takes"
	if o.Wait > 0 {
		bound = "up to " + o.Wait.String()
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Wait)
		defer cancel()
	}
	fmt.Fprintf(o.Log, "pool-run: %s is held by %q until %s; waiting %s\n", o.Kind, held.Record.Owner, lease.FormatTime(held.ExpiresAt), bound)
	return o.Store.AcquireWait(ctx, req)
}

// storeEnv adds to env the variables that tell the work where its lease
// is: LEASE_STORE, the store this run used as it resolved it (an absolute
// directory, as a gate phase runs in the gate file's directory and a
// relative one would name another store there; or the URL), and
// [EnvHeld], base's list of what the ancestors hold with h added.
func storeEnv(o *Options, h HeldLease, env map[string]string) map[string]string {
	if where := o.Store.Where(); where != "" {
		env["LEASE_STORE"] = where
	}
	h.Store = StoreID(o.Store)
	if v := heldEnv(o.Env, h); v != "" {
		env[EnvHeld] = v
	}
	return env
}

// hiddenEnv are the variables of pool-run's environment that never reach
// the work: the etcd credentials (etcdstore's LEASE_ETCD_USER and
// LEASE_ETCD_PASSWORD, and the client certificate and its key, which
// authenticate as well). The work gets the store in LEASE_STORE, not the
// right to use it as pool-run: a nested pool-run on a cluster that
// authenticates needs credentials of its own. LEASE_ETCD_CACERT, the
// authorities that sign the servers' certificates, is no secret and stays,
// so the work can still verify the cluster.
var hiddenEnv = []string{"LEASE_ETCD_USER", "LEASE_ETCD_PASSWORD", "LEASE_ETCD_CERT", "LEASE_ETCD_KEY"}

// workEnv is base without the variables the work must not see (every
// POOL_RUN_*, which describe an outer run's lease when pool-run is
// nested, and hiddenEnv), with the grant's variables and extra added,
// later ones replacing earlier ones of the same name, sorted after the
// base.
func workEnv(base []string, grant, extra map[string]string) []string {
	add := make(map[string]string, len(grant)+len(extra))
	for k, v := range grant {
		add[k] = v
	}
	for k, v := range extra {
		add[k] = v
	}
	out := make([]string, 0, len(base)+len(add))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if _, replaced := add[name]; replaced || strings.HasPrefix(name, "POOL_RUN_") || slices.Contains(hiddenEnv, name) {
			continue
		}
		out = append(out, kv)
	}
	names := make([]string, 0, len(add))
	for k := range add {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		out = append(out, k+"="+add[k])
	}
	return out
}

// release gives the lease back once. It returns the loss when the release
// shows that the lease had been lost while the work ran (no record left,
// another holder, or past its TTL) although no heartbeat had noticed yet.
// A release that fails otherwise is a warning: the TTL frees it later. A
// signal that arrives meanwhile cuts the release short (a store that does
// not answer must not make pool-run deaf to Ctrl-C) and is returned.
func (s *session) release() (sig os.Signal, lost error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case sig = <-s.o.Signals:
			cancel()
		case <-stop:
		}
	}()
	err := s.hold.Release(ctx)
	close(stop)
	<-watched
	switch {
	case err == nil, errors.Is(err, lease.ErrLost):
		return sig, nil // a loss the hold saw is already in the result
	case errors.Is(err, lease.ErrNotHeld), errors.Is(err, lease.ErrNotOwner), errors.Is(err, lease.ErrExpired):
		return sig, fmt.Errorf("%w: found at release: %w", lease.ErrLost, err)
	}
	fmt.Fprintf(s.o.Log, "pool-run: warning: the release of %s was not confirmed (%v); it frees itself after the TTL\n", s.held, err)
	return sig, nil
}

// finish releases and turns a loss found at release into the result: a
// loss never looks like success, nor like the work's own failure. A
// signal during the release makes a run that would have ended with the
// work's own status an interrupted one.
func (s *session) finish(r *Result) *Result {
	// Nothing of the work outlives its lease: what is left in its cgroup
	// is ended, and the cgroup removed, before the lease goes back. A
	// cgroup already removed was ended by whoever took the lease.
	endedByOther := s.cont.close(logf(s.o.Log))
	sig, lost := s.release()
	if endedByOther && (r.Code == CodeOK || r.Code == CodeFailed) {
		lost = endedError(s.held, lost)
	}
	switch {
	case lost != nil && (r.Code == CodeOK || r.Code == CodeFailed):
		fmt.Fprintf(s.o.Log, "pool-run: lost %s while the work ran: %v\n", s.held, lost)
		r = &Result{Exit: ExitLost, Code: CodeLost, Err: lost, Phases: r.Phases}
	case sig != nil && (r.Code == CodeOK || r.Code == CodeFailed):
		r = &Result{Exit: signalStatus(sig), Code: CodeInterrupted, Signal: sig, Phases: r.Phases,
			Err: fmt.Errorf("during the release: %w", &interruption{sig})}
	}
	return s.result(r)
}

// endedError is the loss of a run whose work was ended by whoever took
// its lease (the cgroup killed and removed before the lease changed
// hands), with what the release found, if anything.
func endedError(held Held, found error) error {
	err := fmt.Errorf("%w: its work was ended by whoever took %s (its cgroup killed and removed first; the store's journal says who)", lease.ErrLost, held)
	if found != nil {
		err = fmt.Errorf("%w; %v", err, found)
	}
	return err
}

// lost reports the hold's loss, if any.
func (s *session) lost() error {
	select {
	case <-s.hold.Done():
		return s.hold.Err()
	default:
		return nil
	}
}
