package faults_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	"github.com/durable-lease/durable-lease/lease"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The fault tests wait on clusters, leases and processes, so several run
// at once on two cores; four, not all eight, since each is three etcd
// processes, six pool-runs and their guardians, and a holder at the floor
// starved of CPU for seconds loses its lease (by its own clock), which
// the matrix would report as the fault's.
func TestMain(m *testing.M) { testrun.Main(m, testrun.Parallel(4)) }

// envLong names the variable that asks for the long profile: five trials
// of each fault, and the median figures.
const envLong = "FAULTS"

func trials() int {
	if os.Getenv(envLong) == "long" {
		return 5
	}
	return 1
}

// A fault is done to the cluster while every role holds or waits.
type fault struct {
	name string
	// process: the fault needs a member that is a process of its own
	// (SIGSTOP), which the embedded server is not.
	process bool
	// lost: the cluster does not survive it for the clients (quorum lost,
	// partitioned): the holders at the floor must end their work before
	// their leases could lapse, and the others wait until it heals.
	lost bool
	// partition: the holders reach the cluster through proxies, which
	// the fault cuts; waiters and the test reach it directly.
	partition bool
	// inject starts the fault and returns its moment and the member the
	// watcher must not use; it may block while the fault lasts (a hang)
	// and end it.
	inject func(fx *fixture) time.Time
	// spare picks the member whose client watches renewals: one the fault
	// leaves alone.
	spare func(fx *fixture) int
	// heal ends a fault that the cluster does not survive.
	heal func(fx *fixture)
}

// hangFor is how long a member is hung: several seconds, most of a TTL at
// the floor (6 s), and longer than the cluster's election timeout (1 s).
const hangFor = 5 * time.Second

var faultList = []fault{
	{name: "leader-killed", spare: follower, inject: func(fx *fixture) time.Time {
		at := time.Now()
		fx.c.Members[fx.leader].Stop()
		return at
	}},
	{name: "follower-killed", spare: leader, inject: func(fx *fixture) time.Time {
		at := time.Now()
		fx.c.Members[fx.follower()].Stop()
		return at
	}},
	{name: "leader-hung", process: true, spare: follower, inject: func(fx *fixture) time.Time {
		return fx.hang(fx.leader)
	}},
	{name: "follower-hung", process: true, spare: leader, inject: func(fx *fixture) time.Time {
		return fx.hang(fx.follower())
	}},
	{name: "leader-restarted", spare: follower, inject: func(fx *fixture) time.Time {
		at := time.Now()
		m := fx.c.Members[fx.leader]
		m.Stop()
		time.Sleep(2 * time.Second)
		if err := m.Restart(); err != nil {
			fx.t.Fatal(err)
		}
		return at
	}},
	{name: "compacted-and-defragmented", spare: leader, inject: func(fx *fixture) time.Time {
		return fx.compactAndDefragment()
	}},
	{name: "quorum-lost", lost: true, spare: follower, inject: func(fx *fixture) time.Time {
		at := time.Now()
		fx.c.Members[fx.leader].Stop()
		fx.c.Members[fx.follower()].Stop()
		return at
	}, heal: func(fx *fixture) {
		for _, m := range fx.c.Members {
			if m.Stopped() {
				if err := m.Restart(); err != nil {
					fx.t.Fatal(err)
				}
			}
		}
	}},
	{name: "partitioned", lost: true, partition: true, spare: leader, inject: func(fx *fixture) time.Time {
		at := time.Now()
		for _, p := range fx.proxies {
			p.Cut()
			p.Drop() // a partition the clients see begin: their connections fail, reconnects go nowhere
		}
		return at
	}, heal: func(fx *fixture) {
		for _, p := range fx.proxies {
			p.Restore()
		}
	}},
}

func leader(fx *fixture) int   { return fx.leader }
func follower(fx *fixture) int { return fx.follower() }

// fixture is one trial's cluster, executables and clients.
type fixture struct {
	t       *testing.T
	c       *etcdtest.Cluster
	leader  int
	bin     string
	dir     string
	prefix  string // P, "/" first
	proxies []*etcdtest.Proxy
	watcher *clientv3.Client
	held    string // the holders' store URL
}

// follower is the member after the leader.
func (fx *fixture) follower() int { return (fx.leader + 1) % len(fx.c.Members) }

func (fx *fixture) waitersURL() string { return fx.c.URL(strings.TrimPrefix(fx.prefix, "/")) }
func (fx *fixture) holdersURL() string { return fx.held }

// hang stops member i for hangFor and continues it.
func (fx *fixture) hang(i int) time.Time {
	m := fx.c.Members[i]
	at := time.Now()
	if err := m.Pause(); err != nil {
		fx.t.Fatal(err)
	}
	time.Sleep(hangFor)
	if err := m.Resume(); err != nil {
		fx.t.Fatal(err)
	}
	return at
}

// compactAndDefragment writes and deletes 4 MiB of keys (so that the
// database has something to give back), compacts the cluster's history
// to now, physically, and defragments each member in turn, which stops
// it serving anything while it rewrites its database.
func (fx *fixture) compactAndDefragment() time.Time {
	t := fx.t
	ctx := context.Background()
	junk := fx.prefix + "-junk/"
	val := strings.Repeat("x", 4096)
	for i := range 1024 {
		if _, err := fx.watcher.Put(ctx, fmt.Sprintf("%s%04d", junk, i), val); err != nil {
			t.Fatal(err)
		}
	}
	del, err := fx.watcher.Delete(ctx, junk, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	if _, err := fx.watcher.Compact(ctx, del.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	for _, m := range fx.c.Members {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := fx.watcher.Defragment(dctx, m.Endpoint)
		cancel()
		if err != nil {
			t.Errorf("defragment %s: %v", m.Name, err)
		}
	}
	return at
}

// binary is the etcd the matrix runs: $ETCDTEST_BINARY, else the
// distribution's, else "" (the embedded server).
func binary() string {
	if b := os.Getenv(etcdtest.EnvBinary); b != "" {
		return b
	}
	return etcdtest.DistributionBinary()
}

func newFixture(t *testing.T, f fault) *fixture {
	bin := binary()
	if f.process && bin == "" {
		testrun.Missing(t, "%s needs a member that is a process of its own (SIGSTOP): install etcd-server (/usr/bin/etcd) or set %s", f.name, etcdtest.EnvBinary)
	}
	fx := &fixture{t: t, bin: testrun.Commands(t, ""), dir: t.TempDir()}
	fx.c = etcdtest.StartClusterWith(t, 3, etcdtest.Options{Timing: etcdtest.Default, Binary: bin})
	fx.leader = fx.c.Leader()
	fx.prefix = "/" + regexp.MustCompile(`[^A-Za-z0-9._-]+`).ReplaceAllString(t.Name(), "-")
	spare := fx.c.Members[f.spare(fx)]
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{spare.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	fx.watcher = cli
	fx.held = fx.waitersURL()
	if f.partition {
		var eps []string
		for _, m := range fx.c.Members {
			p := etcdtest.NewProxy(t, m.Endpoint)
			fx.proxies = append(fx.proxies, p)
			eps = append(eps, p.Endpoint())
		}
		fx.held = "etcd://" + strings.Join(eps, ",") + fx.prefix
	}
	return fx
}

// figures are the renewal gaps of every trial, by fault, role and column.
var figures = struct {
	sync.Mutex
	gaps map[string][]time.Duration // "fault|role|column"
	note map[string]string
}{gaps: map[string][]time.Duration{}, note: map[string]string{}}

func record(f, role, col string, gap time.Duration) {
	figures.Lock()
	defer figures.Unlock()
	k := f + "|" + role + "|" + col
	figures.gaps[k] = append(figures.gaps[k], gap)
}

// TestFaults is the fault matrix: each fault once (five times with
// FAULTS=long), on a three-member cluster of etcd with its default
// timing (a 1 s election timeout), against every role at the floor TTL
// and the default. It logs the time from each fault to each role's first
// renewal after it (the median over the trials).
func TestFaults(t *testing.T) {
	if testing.Short() {
		testrun.Skip(t, "-short (starts etcd clusters and builds the CLIs)")
	}
	t.Cleanup(func() { logFigures(t) })
	for _, f := range faultList {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			for i := range trials() {
				if trials() == 1 {
					trial(t, f)
					continue
				}
				t.Run(fmt.Sprintf("trial-%d", i+1), func(t *testing.T) { trial(t, f) })
			}
		})
	}
}

// trial runs every role through f once.
func trial(t *testing.T, f fault) {
	fx := newFixture(t, f)
	pools := map[string]string{}
	for _, col := range columns {
		body := fmt.Sprintf(`{"name":"pool-%s","kindPrefix":"pool-%s-slot-","slots":[{"id":"1"}]`, col.name, col.name)
		if col.name == "floor" {
			body += fmt.Sprintf(`,"ttlMinutes":%g,"waiterStaleMs":2000`, floorTTL)
		}
		pools[col.name] = filepath.Join(fx.dir, "pool-"+col.name+".json")
		if err := os.WriteFile(pools[col.name], []byte(body+"}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Every role starts holding or waiting.
	type roles struct {
		holder        *holder
		baton, slot   *poolRun
		first, second *run // lease waiters behind the holder
		poolWaiter    *run // behind the slot's pool-run
	}
	by := map[string]*roles{}
	for _, col := range columns {
		r := &roles{}
		r.holder = fx.startHolder("hold-"+col.name, col)
		r.baton = fx.startPoolRun("baton-"+col.name, "baton-"+col.name, col, "--kind", "baton-"+col.name, "--ttl", fmt.Sprint(col.ttl))
		r.slot = fx.startPoolRun("slot-"+col.name, "pool-"+col.name+"-slot-1", col, "--pool", pools[col.name])
		r.first = fx.lineUp("hold-"+col.name, "first-"+col.name, 0)
		r.second = fx.lineUp("hold-"+col.name, "second-"+col.name, 1)
		r.poolWaiter = fx.queue(pools[col.name], "queued-"+col.name)
		by[col.name] = r
	}
	time.Sleep(time.Second) // renewals on schedule before the fault

	at := f.inject(fx)
	t.Logf("%s at %s", f.name, at.Format("15:04:05.000"))
	// Long enough that a lease at the floor (6 s) not renewed since the
	// fault would have lapsed: past the end of a hang, by the TTL.
	observe := time.Until(at.Add(7 * time.Second))
	if f.name == "leader-hung" || f.name == "follower-hung" {
		observe = time.Until(at.Add(hangFor + 3*time.Second))
	}
	if f.lost {
		fx.lose(f, at, by["floor"].holder, by["floor"].baton, by["floor"].slot)
		f.heal(fx)
	} else {
		time.Sleep(observe)
	}

	// What each role went through.
	for _, col := range columns {
		r := by[col.name]
		if f.lost && col.name == "floor" {
			continue // judged by lose
		}
		select {
		case lostAt := <-r.holder.lost:
			t.Errorf("%s: the holder (%s TTL) lost its lease %s after the fault: %v", f.name, col.name, lostAt.Sub(at).Round(time.Millisecond), r.holder.hold.Err())
		default:
		}
		for _, p := range []*poolRun{r.baton, r.slot} {
			if p.done() {
				t.Errorf("%s: %s (%s TTL) exited %d during the fault: %s", f.name, p.name, col.name, p.code, p.stderr.String())
			}
		}
		if !f.lost {
			gap := func(role string, ren *renewals) {
				next, ok := ren.after(at)
				if !ok {
					t.Errorf("%s: %s (%s TTL): no renewal after the fault", f.name, role, col.name)
					return
				}
				record(f.name, role, col.name, next.Sub(at))
			}
			gap("holder", &r.holder.ren)
			gap("pool-run baton", &r.baton.ren)
			gap("pool-run slot", &r.slot.ren)
		}
	}
	fx.handOff(f, at, by["floor"].holder, by["floor"].first, by["floor"].second, by["floor"].slot, by["floor"].poolWaiter, "floor")
	fx.handOff(f, at, by["default"].holder, by["default"].first, by["default"].second, by["default"].slot, by["default"].poolWaiter, "default")
	for _, col := range columns {
		if f.lost && col.name == "floor" {
			continue // exited 75 already
		}
		p := by[col.name].baton
		p.finish(t)
		if p.code != 0 {
			t.Errorf("%s: %s (%s TTL) exit %d, want 0 (its work ran through): %s", f.name, p.name, col.name, p.code, p.stderr.String())
		}
	}
}

// lose checks a fault the clients do not survive: at the floor TTL, the
// holder declares its lease lost, and both pool-runs end their work and
// exit 75, the work gone before the leases could lapse on the cluster.
func (fx *fixture) lose(f fault, at time.Time, h *holder, baton, slot *poolRun) {
	t := fx.t
	deadline := time.After(30 * time.Second)
	var lostAt, batonGone, slotGone time.Time
	aliveAtExit := map[*poolRun]bool{}
	batonExit, slotExit := baton.exited, slot.exited
	for lostAt.IsZero() || batonGone.IsZero() || slotGone.IsZero() || batonExit != nil || slotExit != nil {
		select {
		case lostAt = <-h.lost:
		case batonGone = <-baton.gone:
		case slotGone = <-slot.gone:
		case <-batonExit:
			batonExit, aliveAtExit[baton] = nil, !workGone(baton.pg)
		case <-slotExit:
			slotExit, aliveAtExit[slot] = nil, !workGone(slot.pg)
		case <-deadline:
			t.Fatalf("%s: 30 s after the fault: holder lost %v, baton's work gone %v, exited %v, slot's work gone %v, exited %v",
				f.name, !lostAt.IsZero(), !batonGone.IsZero(), baton.done(), !slotGone.IsZero(), slot.done())
		}
	}
	h.lostAt = lostAt
	if lasts := h.ren.lastsUntil(at); !lostAt.Before(lasts) {
		t.Errorf("%s: the holder declared its loss %s after its lease could lapse", f.name, lostAt.Sub(lasts))
	} else {
		record(f.name, "holder: loss before the lease could lapse", "floor", lasts.Sub(lostAt))
	}
	if !errors.Is(h.hold.Err(), lease.ErrLost) {
		t.Errorf("%s: the holder's error %v, want ErrLost", f.name, h.hold.Err())
	}
	for _, p := range []struct {
		run  *poolRun
		gone time.Time
	}{{baton, batonGone}, {slot, slotGone}} {
		lasts := p.run.ren.lastsUntil(at)
		switch {
		case p.run.code != 75:
			t.Errorf("%s: %s exit %d, want 75: %s", f.name, p.run.name, p.run.code, p.run.stderr.String())
		case !strings.Contains(p.run.stderr.String(), "lease_lost") || !strings.Contains(p.run.stderr.String(), "not renewed in time"):
			t.Errorf("%s: %s: stderr %q, want lease_lost and why the renewals were late", f.name, p.run.name, p.run.stderr.String())
		case aliveAtExit[p.run]:
			t.Errorf("%s: %s exited with its work still running", f.name, p.run.name)
		case !p.gone.Before(lasts):
			t.Errorf("%s: %s's work was gone %s after its lease could lapse", f.name, p.run.name, p.gone.Sub(lasts))
		default:
			record(f.name, p.run.name+": work gone before the lease could lapse", "floor", lasts.Sub(p.gone))
		}
	}
	t.Logf("%s: the holder lost its lease %s after the fault; the baton's work was gone after %s (pool-run exited after %s), the slot's after %s (%s)", f.name,
		lostAt.Sub(at).Round(time.Millisecond), batonGone.Sub(at).Round(time.Millisecond), baton.exitedAt.Sub(at).Round(time.Millisecond),
		slotGone.Sub(at).Round(time.Millisecond), slot.exitedAt.Sub(at).Round(time.Millisecond))
}

// handOff releases what the holder and the slot's pool-run hold and
// checks that the waiters get it in their order: the first lease waiter,
// then (once the first gives it back) the second; the pool waiter the
// slot. After a fault the clients did not survive, the floor's holders
// gave up on their own and the waiters take their leases over once the
// cluster has expired them.
func (fx *fixture) handOff(f fault, at time.Time, h *holder, first, second *run, slot *poolRun, queued *run, col string) {
	t := fx.t
	ctx := context.Background()
	lostAlready := f.lost && col == "floor"
	if !lostAlready {
		if err := h.hold.Release(ctx); err != nil {
			t.Errorf("%s: the holder (%s TTL) could not release: %v", f.name, col, err)
		}
		slot.finish(t)
		if slot.code != 0 {
			t.Errorf("%s: %s exit %d, want 0: %s", f.name, slot.name, slot.code, slot.stderr.String())
		}
	}
	within := 10 * time.Second
	if lostAlready {
		within = 30 * time.Second // the cluster expires the leases first
	}
	if !first.wait(t, within) {
		t.Errorf("%s: the first waiter (%s TTL) did not acquire within %s", f.name, col, within)
		return
	}
	out := first.json()
	rec, _ := out["record"].(map[string]any)
	token, _ := rec["token"].(string)
	if first.code != 0 || token == "" {
		t.Errorf("%s: the first waiter (%s TTL): exit %d %s %s", f.name, col, first.code, first.stdout.String(), first.stderr.String())
		return
	}
	lapsed := false
	if second.done() {
		// The first's lease is not heartbeated (lease acquire has
		// exited): on a starved host the test may look after it has
		// lapsed, and then the second's acquire is its due. Before that,
		// the second holding is two holders.
		firstEnds, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(out["expiresAt"]))
		srec, _ := second.json()["record"].(map[string]any)
		secondAt, err := time.Parse(time.RFC3339Nano, fmt.Sprint(srec["acquiredAt"]))
		if second.code != 0 || err != nil || !secondAt.After(firstEnds) {
			t.Errorf("%s: the second waiter (%s TTL) exited (%d) before the first's lease (until %s) was given back or lapsed: %s", f.name, col, second.code, out["expiresAt"], second.stdout.String())
			return
		}
		t.Logf("%s: the second waiter (%s TTL) acquired at %s, after the first's lease lapsed unrenewed (%s) before the test looked", f.name, col, srec["acquiredAt"], out["expiresAt"])
		lapsed = true
	}
	if lostAlready && out["tookOverExpired"] != true {
		t.Errorf("%s: the first waiter (%s TTL) got the lease without a takeover of the lost one: %s", f.name, col, first.stdout.String())
	}
	if lostAlready && !first.exitedAt.After(h.lostAt) {
		t.Errorf("%s: the first waiter (%s TTL) had the lease before its holder gave it up", f.name, col)
	}
	if fence, _ := out["fence"].(float64); int64(fence) <= h.rec.Fence {
		t.Errorf("%s: the first waiter's fence %v, want more than the holder's %d", f.name, out["fence"], h.rec.Fence)
	}
	if _, err := h.store.Release(ctx, lease.Ref{Kind: h.kind, Owner: rec["owner"].(string), Token: token}); err != nil && !lapsed {
		t.Errorf("%s: release the first waiter's lease: %v", f.name, err)
	}
	if !second.wait(t, 10*time.Second) || second.code != 0 {
		t.Errorf("%s: the second waiter (%s TTL): exit %d %s %s", f.name, col, second.code, second.stdout.String(), second.stderr.String())
	}
	if !queued.wait(t, within) || queued.code != 0 {
		t.Errorf("%s: the pool waiter (%s TTL): exit %d %s %s", f.name, col, queued.code, queued.stdout.String(), queued.stderr.String())
	}
	if lostAlready && queued.exitedAt.Before(slot.exitedAt) {
		t.Errorf("%s: the pool waiter (%s TTL) had the slot before its pool-run gave it up", f.name, col)
	}
}

// logFigures logs the matrix's figures: per fault, role and column, the
// median time from the fault to the first renewal after it (or, for a
// loss, how long before the lease could lapse the work was gone), over
// the trials.
func logFigures(t *testing.T) {
	figures.Lock()
	defer figures.Unlock()
	if len(figures.gaps) == 0 {
		return
	}
	keys := make([]string, 0, len(figures.gaps))
	for k := range figures.gaps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "fault matrix, %d trial(s): fault | role | TTL | median (all)\n", trials())
	for _, k := range keys {
		g := slices.Clone(figures.gaps[k])
		slices.Sort(g)
		var all []string
		for _, d := range figures.gaps[k] {
			all = append(all, d.Round(10*time.Millisecond).String())
		}
		fmt.Fprintf(&b, "%s | %s (%s)\n", strings.ReplaceAll(k, "|", " | "), g[len(g)/2].Round(10*time.Millisecond), strings.Join(all, " "))
	}
	t.Log(b.String())
}
