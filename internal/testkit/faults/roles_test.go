package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/internal/sys/procgroup"
	"github.com/durable-lease/durable-lease/lease"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The roles of the matrix, each at the TTL floor and at the default:
//
//   - a holder: a lease.Hold in this process, on a client of its own;
//   - pool-run: a baton (--kind) and a pool's one slot (--pool), each a
//     process of the installed CLIs whose work runs until the test ends it;
//   - waiters: two `lease acquire --wait-ms` in line behind each holder,
//     and a `pool acquire` queued behind each pool-run --pool.

// ttls of the two columns: the floor is the shortest TTL pool-run keeps on
// etcd, in whole seconds as etcd grants it (0.0905 minutes, granted as
// 6 s; see runner/floor.go); the default is pool-run's baton default, with
// a heartbeat of half a second so that renewals happen within the test.
const (
	floorTTL   = 0.1 // minutes
	defaultTTL = 15
	defaultHB  = 500 * time.Millisecond
)

type column struct {
	name string
	ttl  float64 // minutes
	hb   time.Duration
}

var columns = []column{{"floor", floorTTL, 0}, {"default", defaultTTL, defaultHB}}

// renewals is a role's confirmed renewals, in order: when each was seen,
// and until when it keeps the lease on the cluster at least.
type renewals struct {
	mu    sync.Mutex
	times []time.Time
	lasts []time.Time
}

func (r *renewals) add(at, lasts time.Time) {
	r.mu.Lock()
	r.times = append(r.times, at)
	r.lasts = append(r.lasts, lasts)
	r.mu.Unlock()
}

// after is the first renewal after at, and whether there was one.
func (r *renewals) after(at time.Time) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.times {
		if t.After(at) {
			return t, true
		}
	}
	return time.Time{}, false
}

// lastsUntil is how long the last renewal seen before at keeps the lease
// on the cluster at least: nobody else can have it before then.
func (r *renewals) lastsUntil(at time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var l time.Time
	for i, t := range r.times {
		if t.Before(at) {
			l = r.lasts[i]
		}
	}
	return l
}

// holder is a lease.Hold on a store of its own.
type holder struct {
	kind  string
	col   column
	store *lease.Store
	hold  *lease.Hold
	rec   *lease.Record
	ren   renewals
	lost  chan time.Time
	// lostAt is when the hold declared its lease lost (set by lose).
	lostAt time.Time
}

func (fx *fixture) startHolder(kind string, col column) *holder {
	t := fx.t
	b, err := etcdstore.NewBackend(context.Background(), fx.holdersURL(), etcdstore.Options{})
	if err != nil {
		t.Fatalf("holder %s: %v", kind, err)
	}
	t.Cleanup(func() { b.Close() })
	s, err := lease.New(b)
	if err != nil {
		t.Fatal(err)
	}
	h := &holder{kind: kind, col: col, store: s, lost: make(chan time.Time, 1)}
	acq, err := s.Acquire(context.Background(), lease.Request{Kind: kind, Owner: "holder", TTLMinutes: col.ttl})
	if err != nil {
		t.Fatalf("holder %s: %v", kind, err)
	}
	h.rec = acq.Record
	// Renewed gets the time the lease is safely the holder's until: its
	// confirmed expiry (which the cluster keeps at least) less the margin.
	margin := b.ExpiryMargin(acq.Record.TTL())
	h.hold, err = s.Keep(context.Background(), kind, "holder", acq.Record.Token, lease.HoldOptions{
		Acquired: acq.Record, Interval: col.hb,
		Renewed: func(until time.Time) { h.ren.add(time.Now(), until.Add(margin)) },
	})
	if err != nil {
		t.Fatalf("holder %s: %v", kind, err)
	}
	go func() {
		<-h.hold.Done()
		h.lost <- time.Now()
	}()
	t.Cleanup(h.hold.Stop)
	return h
}

// run is a process of the installed CLIs.
type run struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	exited         chan struct{}
	exitedAt       time.Time
	code           int
}

func (fx *fixture) start(name string, env []string, exe string, args ...string) *run {
	t := fx.t
	r := &run{name: name, exited: make(chan struct{})}
	r.cmd = exec.Command(filepath.Join(fx.bin, exe), args...)
	r.cmd.Env = append(os.Environ(), append([]string{"PATH=/usr/bin:/bin"}, env...)...)
	r.cmd.Dir = fx.dir
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() {
		err := r.cmd.Wait()
		r.exitedAt = time.Now()
		r.code = r.cmd.ProcessState.ExitCode()
		if err != nil && r.code < 0 {
			r.code = -1
		}
		close(r.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-r.exited:
		default:
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
	})
	return r
}

// wait waits for r to exit, at most within.
func (r *run) wait(t *testing.T, within time.Duration) bool {
	t.Helper()
	select {
	case <-r.exited:
		return true
	case <-time.After(within):
		return false
	}
}

func (r *run) done() bool {
	select {
	case <-r.exited:
		return true
	default:
		return false
	}
}

func (r *run) json() map[string]any {
	var out map[string]any
	_ = json.Unmarshal(r.stdout.Bytes(), &out)
	return out
}

// poolRun is pool-run holding a baton or a pool's slot while its work
// runs: a shell that writes its process group and then waits for the
// test's word (a file).
type poolRun struct {
	*run
	kind     string // the lease kind it holds (the slot's for a pool)
	col      column
	workFile string
	doneFile string
	ren      renewals
	pg       int            // the work's process group
	gone     chan time.Time // when the work's process group was seen empty
}

func (fx *fixture) startPoolRun(name, kind string, col column, what ...string) *poolRun {
	t := fx.t
	p := &poolRun{kind: kind, col: col, workFile: filepath.Join(fx.dir, name+".work"), doneFile: filepath.Join(fx.dir, name+".done"),
		gone: make(chan time.Time, 1)}
	args := append([]string{"--owner", name, "--store", fx.holdersURL()}, what...)
	if col.hb > 0 {
		args = append(args, "--heartbeat", col.hb.String())
	}
	args = append(args, "--", "sh", "-c", `echo $$ >"$0.tmp" && mv "$0.tmp" "$0"; while [ ! -e "$1" ]; do sleep 0.05; done`, p.workFile, p.doneFile)
	fx.watchRenewals(kind, &p.ren)
	p.run = fx.start(name, nil, "pool-run", args...)
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(p.workFile); err == nil {
			break
		}
		if p.done() || time.Since(start) > 20*time.Second {
			t.Fatalf("%s: the work did not start: exit %d %s", name, p.code, p.stderr.String())
		}
	}
	pgid := p.pgid()
	p.pg = pgid
	stopGroup(t, pgid)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		// Signal(0), not procgroup.Alive, which reads every process's
		// stat: the group counts as alive a moment longer (while a
		// zombie of it waits for its reaper), never shorter.
		for ctx.Err() == nil && procgroup.New(pgid).Signal(0) == nil {
			time.Sleep(10 * time.Millisecond)
		}
		p.gone <- time.Now()
	}()
	return p
}

// pgid is the work's process group.
func (p *poolRun) pgid() int {
	data, _ := os.ReadFile(p.workFile)
	n, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return n
}

// finish ends the work and waits for pool-run.
func (p *poolRun) finish(t *testing.T) {
	_ = os.WriteFile(p.doneFile, nil, 0o644)
	if !p.wait(t, 20*time.Second) {
		t.Errorf("%s did not exit after its work ended", p.name)
	}
}

// watchRenewals notes every renewal of kind (a put of its record) as the
// watcher's member applies it: the watcher is a client of a member the
// fault spares, without WithRequireLeader, so that an election delays
// what it sees by no more than it delays the cluster.
func (fx *fixture) watchRenewals(kind string, ren *renewals) {
	key := fx.prefix + "/lease/" + kind + "/record"
	ctx, cancel := context.WithCancel(context.Background())
	fx.t.Cleanup(cancel)
	wch := fx.watcher.Watch(ctx, key, clientv3.WithFilterDelete())
	go func() {
		for resp := range wch {
			for _, ev := range resp.Events {
				// The heartbeat is stamped before the keep-alive that
				// renews the etcd lease, so the cluster keeps the lease
				// at least a TTL after it.
				var rec struct {
					Heartbeat  string  `json:"heartbeat"`
					TTLMinutes float64 `json:"ttlMinutes"`
				}
				_ = json.Unmarshal(ev.Kv.Value, &rec)
				stamp, _ := lease.ParseTime(rec.Heartbeat)
				ren.add(time.Now(), stamp.Add(time.Duration(rec.TTLMinutes*float64(time.Minute))))
			}
		}
	}()
}

// lineUp starts `lease acquire --wait-ms` for kind as owner and returns
// once its place is in the line (the places under P/wait/<kind>/ number
// ahead+1), so that waiters started one after another are in line in
// that order.
func (fx *fixture) lineUp(kind, owner string, ahead int) *run {
	t := fx.t
	r := fx.start(owner, nil, "lease", "acquire", "--kind", kind, "--owner", owner, "--ttl", fmt.Sprint(floorTTL),
		"--wait-ms", "60000", "--store", fx.waitersURL())
	dir := fx.prefix + "/wait/" + kind + "/"
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := fx.watcher.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithCountOnly())
		cancel()
		if err == nil && resp.Count == int64(ahead+1) {
			return r
		}
		if r.done() || time.Since(start) > 15*time.Second {
			t.Fatalf("%s did not line up for %s: exit %d %s %s", owner, kind, r.code, r.stdout.String(), r.stderr.String())
		}
	}
}

// queue starts `pool acquire` on poolFile, which waits in the pool's queue.
func (fx *fixture) queue(poolFile, owner string) *run {
	r := fx.start(owner, []string{"POOL_POLL_MS=200"}, "pool", "acquire", "--pool", poolFile, "--owner", owner,
		"--wait-ms", "60000", "--store", fx.waitersURL())
	q := fx.prefix + "/pool/" + strings.TrimSuffix(filepath.Base(poolFile), ".json") + "/queue/"
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := fx.watcher.Get(ctx, q, clientv3.WithPrefix(), clientv3.WithCountOnly())
		cancel()
		if err == nil && resp.Count == 1 {
			return r
		}
		if r.done() || time.Since(start) > 15*time.Second {
			fx.t.Fatalf("%s did not queue: exit %d %s %s", owner, r.code, r.stdout.String(), r.stderr.String())
		}
	}
}

// workGone reports whether the process group pgid has no process left.
func workGone(pgid int) bool {
	return pgid > 0 && !procgroup.Alive(pgid)
}

// stopGroup kills what is left of a work at the test's end.
func stopGroup(t *testing.T, pgid int) {
	if pgid > 0 {
		t.Cleanup(func() { _ = procgroup.New(pgid).Signal(syscall.SIGKILL) })
	}
}
