package gitstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/gitstore/gittest"
	"github.com/durable-lease/durable-lease/internal/testkit/storetest"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/lease/leasetest"
)

// The tests wait on git processes and servers more than they compute:
// more of them at once than there are cores.
func TestMain(m *testing.M) { testrun.Main(m, testrun.Parallel(8)) }

var bg = context.Background()

const ttlMinutes = 1.0

func bareRepo(t *testing.T) string { return gittest.BareRepo(t) }

type harness struct {
	clock *storetest.FakeClock
}

func (h *harness) backend(t *testing.T, url string) *Backend {
	t.Helper()
	b, err := NewBackend(url, Options{}, lease.WithClock(h.clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func (h *harness) store(t *testing.T, b *Backend) *lease.Store {
	t.Helper()
	s, err := lease.New(b, lease.WithClock(h.clock), lease.WithOwnerPattern(`^conf-[a-z0-9]+$`), lease.WithPollInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run runs the conformance suite on stores newStore makes: it returns the
// URL of a fresh store whose server (if it has a clock) reads clock. Each
// case has a clock of its own, so the cases run at once.
func run(t *testing.T, newStore func(t *testing.T, clock *storetest.FakeClock) string) {
	type opened struct {
		b     *Backend
		clock *storetest.FakeClock
	}
	stores := map[*lease.Store]opened{}
	var mu sync.Mutex
	of := func(s *lease.Store) opened {
		mu.Lock()
		defer mu.Unlock()
		return stores[s]
	}
	ttl := time.Duration(ttlMinutes * float64(time.Minute))
	leasetest.Run(t, leasetest.Harness{
		TTLMinutes: ttlMinutes,
		Parallel:   true,
		New: func(t *testing.T) *lease.Store {
			h := &harness{clock: storetest.NewFakeClock(storetest.T0)}
			b := h.backend(t, newStore(t, h.clock))
			s := h.store(t, b)
			mu.Lock()
			stores[s] = opened{b, h.clock}
			mu.Unlock()
			return s
		},
		Lapse: func(t *testing.T, s *lease.Store) { of(s).clock.Advance(ttl + Margin(ttl) + time.Second) },
		Journal: func(t *testing.T, s *lease.Store) []lease.Event {
			ev, err := of(s).b.Events(bg)
			if err != nil {
				t.Fatal(err)
			}
			return ev
		},
	})
}

func TestConformanceFile(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, _ *storetest.FakeClock) string { return "git+file://" + bareRepo(t) })
}

func TestConformanceDaemon(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	if out, err := exec.Command("git", "init", "--quiet", "--bare", filepath.Join(base, "leases.git")).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	prefix, _ := gittest.Daemon(t, base)
	// One daemon and repository, a namespace per store.
	var n atomic.Int64
	run(t, func(*testing.T, *storetest.FakeClock) string {
		return "git+" + prefix + "/leases.git" + fmt.Sprintf("#s%d", n.Add(1))
	})
}

func TestConformanceHTTP(t *testing.T) {
	t.Parallel()
	// A server per store: its Date decides, so it runs on the store's
	// clock (the suite's lapses advance both).
	run(t, func(t *testing.T, clock *storetest.FakeClock) string {
		srv, url, _ := httpStore(t)
		srv.SetClock(clock.Now)
		return url
	})
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, ok := range []struct{ in, remote, ns string }{
		{"git+file:///srv/leases.git", "file:///srv/leases.git", "default"},
		{"git+git://host/repo.git#ci", "git://host/repo.git", "ci"},
		{"git+ssh://git@host/org/repo.git#merge-baton", "ssh://git@host/org/repo.git", "merge-baton"},
		{"git+https://github.com/org/repo.git", "https://github.com/org/repo.git", "default"},
		{"git+git@host:org/repo.git", "git@host:org/repo.git", "default"},
	} {
		loc, err := ParseURL(ok.in)
		if err != nil || loc.Remote != ok.remote || loc.Namespace != ok.ns {
			t.Errorf("ParseURL(%q) = %+v, %v", ok.in, loc, err)
		}
	}
	for _, bad := range []string{
		"file:///srv/leases.git", "git+", "git+file:///x#", "git+file:///x#../a", "git+file:///x#A", "git+-upload-pack=evil",
		"git+ftp://host/x", "git+/srv/leases.git", "git+./leases.git", "git+leases.git", "git+dir/x:y",
		"git+ext::sh -c touch% /tmp/pwned", "git+fd::7", "git+https://h/r%zz.git?token=s3cret",
	} {
		if _, err := ParseURL(bad); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("ParseURL(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	for _, cred := range []string{
		"git+https://user:s3cret@github.com/org/repo.git",
		"git+https://ghp_s3cret@github.com/org/repo.git",
		"git+ssh://git:s3cret@host/repo.git",
		"git+https://host/repo.git?access_token=s3cret",
		"git+https://host/repo.git?sig=s3cret",
		"git+https://host/repo.git?X-Amz-Signature=s3cret",
		"git+user:s3cret@host:repo.git",
	} {
		_, err := ParseURL(cred)
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "credential helper") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseURL(%q) = %v, want a refusal naming the credential helper and not the secret", cred, err)
		}
	}
}

// TestRaceAcquire: backends of their own (as separate processes would
// be) race for one kind; exactly one wins.
func TestRaceAcquire(t *testing.T) {
	t.Parallel()
	url := "git+file://" + bareRepo(t)
	h := &harness{clock: storetest.NewFakeClock(storetest.T0)}
	const n = 8
	stores := make([]*lease.Store, n)
	for i := range stores {
		stores[i] = h.store(t, h.backend(t, url))
	}
	var wg sync.WaitGroup
	var won atomic.Int64
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Acquire(bg, lease.Request{Kind: "race", Owner: fmt.Sprintf("conf-r%d", i), TTLMinutes: ttlMinutes})
			switch {
			case err == nil:
				won.Add(1)
			case !errors.Is(err, lease.ErrHeld):
				t.Errorf("racer %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d winners, want 1", won.Load())
	}
}

// TestPatience: a record another process wrote is held when first seen,
// and expired only after this process watched it unchanged for TTL+margin.
func TestPatience(t *testing.T) {
	t.Parallel()
	url := "git+file://" + bareRepo(t)
	h := &harness{clock: storetest.NewFakeClock(storetest.T0)}
	sa, sb := h.store(t, h.backend(t, url)), h.store(t, h.backend(t, url))
	a, err := sa.Acquire(bg, lease.Request{Kind: "k", Owner: "conf-a", TTLMinutes: ttlMinutes})
	if err != nil {
		t.Fatal(err)
	}
	ttl := time.Minute
	h.clock.Advance(2 * ttl) // b has not looked yet: its watch starts now
	if st, err := sb.Status(bg, "k"); err != nil || st.State != lease.Held {
		t.Fatalf("first sight: %+v %v, want held", st, err)
	}
	if st, _ := sa.Status(bg, "k"); st.State != lease.Unknown {
		t.Fatalf("the holder's own view after 2 TTLs: %s, want unknown", st.State)
	}
	h.clock.Advance(ttl)
	if st, _ := sb.Status(bg, "k"); st.State != lease.Held {
		t.Fatalf("watched for the TTL only: %s, want held", st.State)
	}
	h.clock.Advance(Margin(ttl) + time.Second)
	if st, _ := sb.Status(bg, "k"); st.State != lease.Unknown {
		t.Fatalf("watched past TTL+margin: %s, want unknown", st.State)
	}
	got, err := sb.Acquire(bg, lease.Request{Kind: "k", Owner: "conf-b", TTLMinutes: ttlMinutes})
	if err != nil || !got.TookOverExpired || got.Previous == nil || got.Previous.Token != a.Record.Token || got.Record.Fence != a.Record.Fence+1 {
		t.Fatalf("takeover: %+v %v", got, err)
	}
	if _, err := sa.Heartbeat(bg, a.Record.Ref()); err == nil {
		t.Fatal("the displaced holder's heartbeat succeeded (revival)")
	}
	ev, err := h.backend(t, url).Events(bg)
	if err != nil || len(ev) == 0 || ev[len(ev)-1].Event != lease.EventTakeover || ev[len(ev)-1].Previous == nil || ev[len(ev)-1].Previous.Token != a.Record.Token {
		t.Fatalf("journal %+v %v: want the takeover with the previous record", ev, err)
	}
}

// TestLostReply: a push whose reply is lost is settled by reading the ref
// again: the write that landed is a win, not an error nor a resend.
func TestLostReply(t *testing.T) {
	t.Parallel()
	url := "git+file://" + bareRepo(t)
	h := &harness{clock: storetest.NewFakeClock(storetest.T0)}
	b := h.backend(t, url)
	var lost atomic.Int64
	b.pushHook = func(ps []push, push func([]push) error) error {
		err := push(ps)
		if err == nil && lost.Add(1) == 1 {
			return errors.New("connection reset after sending")
		}
		return err
	}
	s := h.store(t, b)
	a, err := s.Acquire(bg, lease.Request{Kind: "k", Owner: "conf-a", TTLMinutes: ttlMinutes})
	if err != nil || a.Record.Fence != 1 {
		t.Fatalf("acquire with a lost reply: %+v %v", a, err)
	}
	if lost.Load() != 1 {
		t.Fatalf("%d pushes, want 1 (no resend)", lost.Load())
	}
	if st, err := s.Status(bg, "k"); err != nil || st.State != lease.Held || st.Record.Token != a.Record.Token {
		t.Fatalf("after: %+v %v", st, err)
	}
}

// TestTombstoneKeepsFence: a release leaves a tombstone commit; the kind
// reads as free and is not listed, and the next fence is larger.
func TestTombstoneKeepsFence(t *testing.T) {
	t.Parallel()
	url := "git+file://" + bareRepo(t)
	h := &harness{clock: storetest.NewFakeClock(storetest.T0)}
	s := h.store(t, h.backend(t, url))
	a, err := s.Acquire(bg, lease.Request{Kind: "k", Owner: "conf-a", TTLMinutes: ttlMinutes})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(bg, a.Record.Ref()); err != nil {
		t.Fatal(err)
	}
	b2 := h.backend(t, url)
	if names, err := b2.Names(bg); err != nil || len(names) != 0 {
		t.Fatalf("names after release: %v %v", names, err)
	}
	s2 := h.store(t, b2)
	c, err := s2.Acquire(bg, lease.Request{Kind: "k", Owner: "conf-c", TTLMinutes: ttlMinutes})
	if err != nil || c.Record.Fence != a.Record.Fence+1 {
		t.Fatalf("reacquire: %+v %v", c, err)
	}
	dir := strings.TrimPrefix(url, "git+file://")
	out, err := exec.Command("git", "--git-dir="+dir, "rev-list", "--count", "refs/durable-lease/default/leases/k").Output()
	if err != nil || strings.TrimSpace(string(out)) != "3" {
		t.Fatalf("history of the ref: %q %v, want 3 commits", out, err)
	}
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	gittest.NeedGit(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	start := time.Now()
	s, done, err := Open(bg, "git+git://"+addr+"/none.git")
	if err != nil {
		t.Fatalf("open does not contact the remote: %v", err)
	}
	defer done()
	if _, err := s.Status(bg, "k"); !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("status on a closed port: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > CallTimeout {
		t.Fatalf("took %s", d)
	}
}

// TestMalformedIsUnknown: a tip whose record cannot be read is unknown,
// never free, and is listed.
func TestMalformedIsUnknown(t *testing.T) {
	t.Parallel()
	dir := bareRepo(t)
	git := func(stdin string, args ...string) string {
		cmd := exec.Command("git", append([]string{"--git-dir=" + dir}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	good := `{"v":1,"kind":"k","owner":"conf-a","token":"t","pid":1,"host":"h","acquiredAt":"2026-01-01T00:00:00.000Z","heartbeatAt":"2026-01-01T00:00:00.000Z","ttlMs":60000}`
	tips := map[string][][2]string{
		"notjson":   {{"fence", "1\n"}, {"record.json", "{not json"}},
		"nofence":   {{"record.json", good}},
		"badfence":  {{"fence", "x\n"}, {"released", "\n"}},
		"zerofence": {{"fence", "0\n"}, {"released", "\n"}},
		"huge":      {{"fence", "1\n"}, {"record.json", good[:len(good)-1] + `,"pad":"` + strings.Repeat("x", lease.MaxRecordBytes) + `"}`}},
	}
	for kind, files := range tips {
		tree := ""
		for _, f := range files {
			tree += "100644 blob " + git(f[1], "hash-object", "-w", "--stdin") + "\t" + f[0] + "\n"
		}
		c := git("bad\n", "commit-tree", git(tree, "mktree"), "-F", "-")
		git("", "update-ref", "refs/durable-lease/default/leases/"+kind, c)
	}
	h := &harness{clock: storetest.NewFakeClock(storetest.T0)}
	b := h.backend(t, "git+file://"+dir)
	s := h.store(t, b)
	for kind := range tips {
		if st, err := s.Status(bg, kind); err != nil || st.State != lease.Unknown {
			t.Errorf("status of %s: %+v %v, want unknown", kind, st, err)
		}
	}
	if names, err := b.Names(bg); err != nil || len(names) != len(tips) {
		t.Fatalf("names: %v %v, want all %d planted kinds", names, err, len(tips))
	}
}

// TestSilentRemote: a remote that accepts the connection and never
// answers is unavailable once the call's bound is up, and git is killed;
// a call the caller's deadline cuts shorter says so.
func TestSilentRemote(t *testing.T) {
	t.Parallel()
	gittest.NeedGit(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	h := &harness{clock: storetest.NewFakeClock(storetest.T0)}
	b := h.backend(t, "git+git://"+l.Addr().String()+"/x.git")
	b.timeout = 300 * time.Millisecond
	start := time.Now()
	_, err = b.Names(bg)
	if !errors.Is(err, lease.ErrUnavailable) || !strings.Contains(err.Error(), "no answer within") {
		t.Fatalf("names on a silent remote: %v, want ErrUnavailable after the bound", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %s", d)
	}
	// Cut short by the caller's deadline (a holder's, whose lease is
	// running out), the call is not said to have had its own bound: the
	// message said "no answer within 20s" after a few seconds.
	b.timeout = CallTimeout
	ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancel()
	_, err = b.Names(ctx)
	if !errors.Is(err, lease.ErrUnavailable) || !strings.Contains(err.Error(), "cut short by the caller's deadline") || strings.Contains(err.Error(), "within") {
		t.Fatalf("names cut short by the caller: %v", err)
	}
}

// TestReadFetchesTheTipOnly: a lease's ref is a chain of commits, one per
// write; a reader in a new process fetches its tip, not the chain, so a
// lease heartbeated for weeks costs what a new one costs.
func TestReadFetchesTheTipOnly(t *testing.T) {
	t.Parallel()
	url := "git+file://" + bareRepo(t)
	h := &harness{clock: storetest.NewFakeClock(storetest.T0)}
	writer := h.backend(t, url)
	s := h.store(t, writer)
	a, err := s.Acquire(bg, lease.Request{Kind: "k", Owner: "conf-a", TTLMinutes: ttlMinutes})
	if err != nil {
		t.Fatal(err)
	}
	for range 12 {
		if _, err := s.Heartbeat(bg, a.Record.Ref()); err != nil {
			t.Fatal(err)
		}
	}
	fresh := h.backend(t, url)
	if st, err := h.store(t, fresh).Status(bg, "k"); err != nil || st.State != lease.Held {
		t.Fatalf("status: %+v %v", st, err)
	}
	// One commit, its tree and two blobs (fence, record.json).
	if n := objects(t, fresh.scratch); n > 4 {
		t.Fatalf("a read of a ref with 13 commits fetched %d objects, want the tip's 4 at most", n)
	}
	// The journal is read whole, also by a process whose writes fetched
	// its tip alone.
	for i := range 3 {
		if _, err := s.ForceRelease(bg, "k", "conf-admin"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Acquire(bg, lease.Request{Kind: "k", Owner: fmt.Sprintf("conf-n%d", i), TTLMinutes: ttlMinutes}); err != nil {
			t.Fatal(err)
		}
	}
	ev, err := writer.Events(bg)
	if err != nil || len(ev) != 3 {
		t.Fatalf("events read by the writer: %+v %v, want its 3 forced releases", ev, err)
	}
}

// objects counts the objects in the repository at dir, loose and packed.
func objects(t *testing.T, dir string) int {
	t.Helper()
	out, err := exec.Command("git", "--git-dir="+dir, "count-objects", "-v").Output()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		if k == "count" || k == "in-pack" {
			c, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("count-objects: %q", line)
			}
			n += c
		}
	}
	return n
}

// TestRoundTrips: acquire, heartbeat, release and a forced release (with
// its journal event) each cost one fetch and one push, the least a
// compare-and-swap needs; a refused acquire costs one fetch. (Until a
// kind's ref and the journal exist, which is once per kind and store,
// a fetch of a ref the remote lacks costs one more: git stops at it.)
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	url := "git+file://" + bareRepo(t)
	h := &harness{clock: storetest.NewFakeClock(storetest.T0)}
	b := h.backend(t, url)
	var mu sync.Mutex
	calls := map[string]int{}
	b.onGit = func(args []string) {
		mu.Lock()
		defer mu.Unlock()
		switch args[0] {
		case "fetch", "push", "ls-remote":
			calls[args[0]]++
		}
	}
	s := h.store(t, b)
	other := h.store(t, h.backend(t, url))
	if _, err := other.Acquire(bg, lease.Request{Kind: "k", Owner: "conf-b", TTLMinutes: ttlMinutes}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.ForceRelease(bg, "k", "conf-admin"); err != nil {
		t.Fatal(err)
	}
	step := func(what string, want map[string]int, f func() error) {
		t.Helper()
		mu.Lock()
		clear(calls)
		mu.Unlock()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if !maps.Equal(calls, want) {
			t.Errorf("%s: %v, want %v", what, calls, want)
		}
	}
	one := map[string]int{"fetch": 1, "push": 1}
	var a *lease.Acquisition
	step("acquire", one, func() (err error) {
		a, err = s.Acquire(bg, lease.Request{Kind: "k", Owner: "conf-a", TTLMinutes: ttlMinutes})
		return err
	})
	step("heartbeat", one, func() error { _, err := s.Heartbeat(bg, a.Record.Ref()); return err })
	step("release", one, func() error { _, err := s.Release(bg, a.Record.Ref()); return err })
	if _, err := other.Acquire(bg, lease.Request{Kind: "k", Owner: "conf-b", TTLMinutes: ttlMinutes}); err != nil {
		t.Fatal(err)
	}
	step("refused acquire", map[string]int{"fetch": 1}, func() error {
		_, err := s.Acquire(bg, lease.Request{Kind: "k", Owner: "conf-a", TTLMinutes: ttlMinutes})
		if errors.Is(err, lease.ErrHeld) {
			return nil
		}
		return fmt.Errorf("%v, want held", err)
	})
	step("forced release", one, func() error { _, err := s.ForceRelease(bg, "k", "conf-admin"); return err })
}

// TestNoRemoteHelpers: git never runs a remote helper for a store, even
// one the user's configuration allows (ParseURL refuses such URLs; this
// is the second wall).
func TestNoRemoteHelpers(t *testing.T) {
	gittest.NeedGit(t)
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[protocol \"ext\"]\n\tallow = always\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	marker := filepath.Join(home, "ran")
	h := &harness{clock: storetest.NewFakeClock(storetest.T0)}
	b := h.backend(t, "git+file://"+bareRepo(t))
	b.loc = Location{Remote: "ext::sh -c touch% " + marker + " %S", Namespace: DefaultNamespace}
	if _, err := b.Names(bg); err == nil {
		t.Fatal("names through an ext:: remote succeeded")
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("git ran the ext:: remote helper's command")
	}
}

// TestServerDate: over smart HTTP a record is judged by the server's Date,
// not by any client's clock and without the patience rule's watch: a
// contender that first looks after the TTL takes over at once, a client
// clock an hour off changes nothing, a holder whose own clock stood still
// cannot renew a lease the server's clock has let lapse, and without a
// Date the patience rule decides.
func TestServerDate(t *testing.T) {
	t.Parallel()
	srv, url, _ := httpStore(t)
	server := storetest.NewFakeClock(storetest.T0.Add(-10 * time.Hour)) // the server's clock is not the clients'
	srv.SetClock(server.Now)
	ha := &harness{clock: storetest.NewFakeClock(storetest.T0)}
	hb := &harness{clock: storetest.NewFakeClock(storetest.T0.Add(time.Hour))} // an hour ahead of a
	sa, sb := ha.store(t, ha.backend(t, url)), hb.store(t, hb.backend(t, url))
	ttl := time.Minute

	before := ha.clock.Now()
	a, err := sa.Acquire(bg, lease.Request{Kind: "k", Owner: "conf-a", TTLMinutes: ttlMinutes})
	if err != nil {
		t.Fatal(err)
	}
	if a.Record.Seen.Rule != RuleServerDate || a.Record.Seen.ExpiresAt.After(before.Add(ttl-time.Second)) {
		t.Fatalf("the holder's view: %+v, want the server-date rule and an expiry a second inside the TTL", a.Record.Seen)
	}
	if !a.Record.Heartbeat.Equal(server.Now().Truncate(time.Second)) {
		t.Fatalf("heartbeat %s, want the server's Date %s", a.Record.Heartbeat, server.Now().Truncate(time.Second))
	}
	if st, err := sb.Status(bg, "k"); err != nil || st.State != lease.Held || st.Record.Seen.Rule != RuleServerDate {
		t.Fatalf("b, an hour ahead: %+v %v, want held by the server-date rule", st, err)
	}

	// The server's clock moves past the TTL and the margin; a's stands
	// still (a suspended host). b looks for the first time since.
	server.Advance(ttl + Margin(ttl) + 2*time.Second)
	hb.clock.Advance(time.Second)
	if _, err := sa.Heartbeat(bg, a.Record.Ref()); !errors.Is(err, lease.ErrExpired) {
		t.Fatalf("a's heartbeat after the server's TTL: %v, want ErrExpired (never revived)", err)
	}
	fresh := &harness{clock: storetest.NewFakeClock(storetest.T0.Add(-3 * time.Hour))} // behind, and never saw it
	sc := fresh.store(t, fresh.backend(t, url))
	got, err := sc.Acquire(bg, lease.Request{Kind: "k", Owner: "conf-c", TTLMinutes: ttlMinutes})
	if err != nil || !got.TookOverExpired || got.Previous == nil || got.Previous.Token != a.Record.Token || got.Record.Fence != a.Record.Fence+1 {
		t.Fatalf("takeover on first sight: %+v %v", got, err)
	}

	// Without a Date (a proxy that drops it) the patience rule decides:
	// a first sighting is held, however old the record.
	srv.SetClock(nil)
	server.Advance(10 * ttl)
	if st, err := sb.Status(bg, "k"); err != nil || st.State != lease.Held || st.Record.Seen.Rule != RulePatience {
		t.Fatalf("without a Date: %+v %v, want held by the patience rule", st, err)
	}
}

func TestLatestDate(t *testing.T) {
	t.Parallel()
	trace := strings.Join([]string{
		"11:58:00.000001 http.c:700 => Send header: GET /leases.git/info/refs?service=git-upload-pack HTTP/1.1",
		"11:58:00.000002 http.c:700 => Send header: Authorization: Basic <redacted>",
		"11:58:00.000003 http.c:700 <= Recv header: Date: Thu, 03 Dec 2026 11:58:00 GMT",
		"11:58:00.000004 http.c:700 <= Recv header: date: Thu, 03 Dec 2026 11:58:02 GMT",
		"11:58:00.000005 http.c:700 <= Recv header: Date: not a date",
		"11:58:00.000006 http.c:700 <= Recv header: X-Date: Thu, 03 Dec 2027 11:58:02 GMT",
		"11:58:00.000007 http.c:700 <= Recv header: Date: Thu, 03 Dec 2026 11:57:00 GMT",
	}, "\n")
	want := time.Date(2026, 12, 3, 11, 58, 2, 0, time.UTC)
	if got := latestDate(strings.NewReader(trace)); !got.Equal(want) {
		t.Fatalf("latestDate = %s, want %s", got, want)
	}
	if got := latestDate(strings.NewReader("=> Send header: Date: Thu, 03 Dec 2026 11:58:00 GMT\n")); !got.IsZero() {
		t.Fatalf("a sent header counted: %s", got)
	}
	// Through a proxy: its reply to CONNECT (a day ahead here) is not the
	// server's.
	proxied := strings.Join([]string{
		"12:00:00.000001 http.c:700 => Send header: CONNECT github.com:443 HTTP/1.1",
		"12:00:00.000002 http.c:700 => Send header: Host: github.com:443",
		"12:00:00.000003 http.c:700 <= Recv header: HTTP/1.1 200 Connection established",
		"12:00:00.000004 http.c:700 <= Recv header: Date: Fri, 04 Dec 2026 12:00:00 GMT",
		"12:00:00.000005 http.c:700 => Send header: GET /o/r.git/info/refs?service=git-upload-pack HTTP/1.1",
		"12:00:00.000006 http.c:700 <= Recv header: HTTP/1.1 200 OK",
		"12:00:00.000007 http.c:700 <= Recv header: Date: Thu, 03 Dec 2026 12:00:00 GMT",
	}, "\n")
	if got, want := latestDate(strings.NewReader(proxied)), time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("through a proxy: %s, want the server's %s", got, want)
	}
}

// httpStore is a bare repository served over smart HTTP, and its URL.
func httpStore(t *testing.T) (*gittest.HTTPServer, string, string) {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "leases.git")
	if out, err := exec.Command("git", "init", "--quiet", "--bare", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	srv := gittest.HTTP(t, base)
	return srv, "git+" + srv.URL + "/leases.git", dir
}

// commits is the number of commits on ref in the repository at dir.
func commits(t *testing.T, dir, ref string) int {
	t.Helper()
	out, err := exec.Command("git", "--git-dir="+dir, "rev-list", "--count", ref).Output()
	if err != nil {
		t.Fatalf("rev-list %s: %v", ref, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}

// TestServerAsksToWait: a read the server refuses for now (503, 429) is
// made again after a backoff; a push refused so is read again before
// anything else, then decided again; a server that keeps refusing is
// unavailable, after a bounded time.
func TestServerAsksToWait(t *testing.T) {
	t.Parallel()
	srv, url, dir := httpStore(t)
	h := &harness{clock: storetest.NewFakeClock(storetest.T0)}
	srv.SetClock(h.clock.Now)
	s := h.store(t, h.backend(t, url))
	var mu sync.Mutex
	refused := map[string]int{}
	refuse := func(what string, status, times int) gittest.Fault {
		return func(r *http.Request) (int, bool) {
			mu.Lock()
			defer mu.Unlock()
			if strings.Contains(r.URL.String(), what) && refused[what] < times {
				refused[what]++
				return status, false
			}
			return 0, false
		}
	}
	srv.SetFault(refuse("service=git-upload-pack", http.StatusServiceUnavailable, 2))
	if st, err := s.Status(bg, "k"); err != nil || st.State != lease.Free {
		t.Fatalf("status after two 503s: %+v %v", st, err)
	}
	srv.SetFault(refuse("git-receive-pack", http.StatusTooManyRequests, 1))
	a, err := s.Acquire(bg, lease.Request{Kind: "k", Owner: "conf-a", TTLMinutes: ttlMinutes})
	if err != nil || a.Record.Fence != 1 {
		t.Fatalf("acquire after a 429 on the push: %+v %v", a, err)
	}
	mu.Lock()
	if refused["service=git-upload-pack"] != 2 || refused["git-receive-pack"] != 1 {
		t.Fatalf("refusals served: %v", refused)
	}
	mu.Unlock()
	if n := commits(t, dir, "refs/durable-lease/default/leases/k"); n != 1 {
		t.Fatalf("%d commits on the ref, want the one push that landed", n)
	}
	srv.SetFault(func(*http.Request) (int, bool) { return http.StatusBadGateway, false })
	start := time.Now()
	if _, err := s.Status(bg, "k"); !errors.Is(err, lease.ErrUnavailable) || !strings.Contains(err.Error(), "502") {
		t.Fatalf("status while the server always refuses: %v, want unavailable naming the 502", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("gave up after %s", d)
	}
}

// TestLostReplyOverHTTP: a push the server made and whose reply never
// came is a success, pushed once by the store. (git's HTTP transport
// resends the request itself when the connection it reused closes
// without a reply; the copy loses the compare-and-swap to the first,
// which read as a lost race, and the store took its own lease for a
// stranger's.)
func TestLostReplyOverHTTP(t *testing.T) {
	t.Parallel()
	srv, url, dir := httpStore(t)
	h := &harness{clock: storetest.NewFakeClock(storetest.T0)}
	srv.SetClock(h.clock.Now)
	var posts atomic.Int64
	srv.SetFault(func(r *http.Request) (int, bool) {
		return 0, r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") && posts.Add(1) == 1
	})
	b := h.backend(t, url)
	var pushes atomic.Int64
	b.onGit = func(args []string) {
		if args[0] == "push" {
			pushes.Add(1)
		}
	}
	s := h.store(t, b)
	a, err := s.Acquire(bg, lease.Request{Kind: "k", Owner: "conf-a", TTLMinutes: ttlMinutes})
	if err != nil || a.Record.Fence != 1 {
		t.Fatalf("acquire whose reply was lost: %+v %v", a, err)
	}
	if pushes.Load() != 1 {
		t.Fatalf("%d pushes, want 1 (no resend)", pushes.Load())
	}
	t.Logf("the server saw %d receive-pack requests", posts.Load())
	if n := commits(t, dir, "refs/durable-lease/default/leases/k"); n != 1 {
		t.Fatalf("%d commits on the ref, want 1", n)
	}
}

// TestLateLanding: a push whose outcome was unknown and whose ref then
// read unchanged may still land (it was on its way); when a later round
// finds it on the tip, it is that update's success, not a lease held by
// a stranger with the caller's own token.
func TestLateLanding(t *testing.T) {
	t.Parallel()
	url := "git+file://" + bareRepo(t)
	h := &harness{clock: storetest.NewFakeClock(storetest.T0)}
	b := h.backend(t, url)
	var late []push
	var calls atomic.Int64
	b.pushHook = func(ps []push, push func([]push) error) error {
		switch calls.Add(1) {
		case 1: // sent, no reply, not arrived yet
			late = ps
			return errors.New("connection reset after sending")
		case 2: // the first one arrives just before the second
			if err := push(late); err != nil {
				t.Errorf("the late push: %v", err)
			}
		}
		return push(ps)
	}
	s := h.store(t, b)
	a, err := s.Acquire(bg, lease.Request{Kind: "k", Owner: "conf-a", TTLMinutes: ttlMinutes})
	if err != nil || a.Record.Fence != 1 {
		t.Fatalf("acquire whose first push landed late: %+v %v", a, err)
	}
	st, err := h.store(t, h.backend(t, url)).Status(bg, "k")
	if err != nil || st.State != lease.Held || st.Record.Token != a.Record.Token {
		t.Fatalf("status: %+v %v, want held with the acquisition's token", st, err)
	}
	if _, err := s.Heartbeat(bg, a.Record.Ref()); err != nil {
		t.Fatalf("heartbeat of the late-landed lease: %v", err)
	}
}

// TestPushesThatNeverAnswer: a remote that answers reads but no push is
// unavailable after a few unknown outcomes, each settled by a read, not
// after 64 rounds of them.
func TestPushesThatNeverAnswer(t *testing.T) {
	t.Parallel()
	url := "git+file://" + bareRepo(t)
	h := &harness{clock: storetest.NewFakeClock(storetest.T0)}
	b := h.backend(t, url)
	var pushes atomic.Int64
	b.pushHook = func(ps []push, push func([]push) error) error {
		pushes.Add(1)
		return errors.New("no answer")
	}
	_, err := h.store(t, b).Acquire(bg, lease.Request{Kind: "k", Owner: "conf-a", TTLMinutes: ttlMinutes})
	if !errors.Is(err, lease.ErrUnavailable) || !strings.Contains(err.Error(), "unknown") {
		t.Fatalf("acquire: %v, want unavailable with an unknown outcome", err)
	}
	if n := pushes.Load(); n != maxUnknown {
		t.Fatalf("%d pushes, want %d", n, maxUnknown)
	}
}

// TestRefsThatAreNotCommits: a lease ref that points to a tag is neither
// free nor held but an error (a tag peeled to its commit read as held,
// and every write then lost its compare-and-swap), and is listed; a
// journal that is not a commit stops only the changes that journal.
func TestRefsThatAreNotCommits(t *testing.T) {
	t.Parallel()
	dir := bareRepo(t)
	url := "git+file://" + dir
	h := &harness{clock: storetest.NewFakeClock(storetest.T0)}
	s := h.store(t, h.backend(t, url))
	a, err := s.Acquire(bg, lease.Request{Kind: "k", Owner: "conf-a", TTLMinutes: ttlMinutes})
	if err != nil {
		t.Fatal(err)
	}
	git := func(stdin string, args ...string) string {
		cmd := exec.Command("git", append([]string{"--git-dir=" + dir}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Env = append(os.Environ(), "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	tip := git("", "rev-parse", "refs/durable-lease/default/leases/k")
	git("", "tag", "-a", "-m", "planted", "planted", tip)
	git("", "update-ref", "refs/durable-lease/default/leases/tagged", git("", "rev-parse", "refs/tags/planted"))
	if st, err := s.Status(bg, "tagged"); err == nil || !strings.Contains(err.Error(), "not a commit") {
		t.Fatalf("status of a tag: %+v %v, want an error", st, err)
	}
	if names, err := s.List(bg); err != nil || !slices.ContainsFunc(names, func(st lease.Status) bool { return st.Kind == "tagged" }) {
		t.Fatalf("list: %+v %v, want the tagged kind listed", names, err)
	}
	git("", "update-ref", "refs/durable-lease/default/journal", git("junk\n", "hash-object", "-w", "--stdin"))
	if _, err := s.Heartbeat(bg, a.Record.Ref()); err != nil {
		t.Fatalf("a heartbeat beside a journal that is not a commit: %v", err)
	}
	if _, err := s.ForceRelease(bg, "k", "conf-admin"); err == nil || !strings.Contains(err.Error(), "journal") {
		t.Fatalf("a forced release, which journals: %v, want an error naming the journal", err)
	}
}

// TestNoHooksOfAFileRemote: the receiving side of a push to a git+file
// remote runs as the user; hooks planted in that repository never run.
func TestNoHooksOfAFileRemote(t *testing.T) {
	t.Parallel()
	dir := bareRepo(t)
	marker := filepath.Join(t.TempDir(), "ran")
	for _, hook := range []string{"pre-receive", "update", "post-receive", "reference-transaction"} {
		script := "#!/bin/sh\ntouch '" + marker + "'\n"
		if err := os.WriteFile(filepath.Join(dir, "hooks", hook), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h := &harness{clock: storetest.NewFakeClock(storetest.T0)}
	if _, err := h.store(t, h.backend(t, "git+file://"+dir)).Acquire(bg, lease.Request{Kind: "k", Owner: "conf-a", TTLMinutes: ttlMinutes}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a hook of the file remote ran")
	}
}
