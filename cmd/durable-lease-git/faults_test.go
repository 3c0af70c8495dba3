package main_test

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/gitstore"
	"github.com/durable-lease/durable-lease/gitstore/gittest"
)

// envLong names the variable that asks for five trials of each fault and
// the median figures (as in internal/testkit/faults).
const envLong = "FAULTS"

func trials() int {
	if os.Getenv(envLong) == "long" {
		return 5
	}
	return 1
}

// watchRef reports every change of ref in the bare repository dir, as the
// remote applies it (read from the repository, not through the server),
// with its time, until stop is closed.
func watchRef(t *testing.T, dir, ref string, stop <-chan struct{}) <-chan time.Time {
	changes := make(chan time.Time, 1024)
	go func() {
		defer close(changes)
		last := ""
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			tip := readRef(dir, ref)
			if tip != last && tip != "" {
				last = tip
				changes <- time.Now()
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	return changes
}

// readRef is ref's tip in the bare repository dir: its loose file (which
// receive-pack writes), else what git says (a packed ref).
func readRef(dir, ref string) string {
	if data, err := os.ReadFile(filepath.Join(dir, ref)); err == nil {
		return strings.TrimSpace(string(data))
	}
	out, err := exec.Command("git", "--git-dir="+dir, "rev-parse", "--verify", "--quiet", ref).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// A remoteFault is done to the remote while pool-run holds a baton on it;
// it lasts outage, then end undoes it.
type remoteFault struct {
	name       string
	http, slow bool
	begin, end func(t *testing.T, r *gittest.Remote)
	outage     time.Duration
}

// faultOutage is how long a restart or a burst of 503s lasts: longer than
// the store's own Outage, inside the room the renewal gap's round trips
// leave on loopback, and long enough that pool-run's guardian before the
// git store had a renewal gap stopped the work at these TTLs.
const faultOutage = 4 * time.Second

// slowPush is how long each push waits in the slow-push fault: within
// what the renewal gap leaves a push when nothing else is late, and long
// enough that the guardian before the gap stopped the work at the
// floor's TTL.
const slowPush = 2500 * time.Millisecond

var remoteFaults = []remoteFault{
	{name: "daemon-restarted", begin: func(_ *testing.T, r *gittest.Remote) { r.Down() }, end: upAgain, outage: faultOutage},
	{name: "http-restarted", http: true, begin: func(_ *testing.T, r *gittest.Remote) { r.Down() }, end: upAgain, outage: faultOutage},
	{name: "http-503s", http: true, begin: func(_ *testing.T, r *gittest.Remote) {
		r.HTTP.SetFault(func(*http.Request) (int, bool) { return http.StatusServiceUnavailable, false })
	}, end: heal, outage: faultOutage},
	{name: "http-slow-pushes", http: true, slow: true, begin: func(_ *testing.T, r *gittest.Remote) {
		r.HTTP.SetFault(func(r *http.Request) (int, bool) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
				time.Sleep(slowPush)
			}
			return 0, false
		})
	}, end: heal, outage: 2 * slowPush},
}

func heal(_ *testing.T, r *gittest.Remote)    { r.HTTP.SetFault(nil) }
func upAgain(t *testing.T, r *gittest.Remote) { r.Up(t) }

func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond)
}

// floorTTL is the shortest TTL pool-run keeps on the transport (7.71 s,
// over smart HTTP 10.3 s), rounded up, in minutes.
func floorTTL(http bool) string {
	if http {
		return "0.172" // 10.32 s
	}
	return "0.13" // 7.8 s
}

// TestPoolRunThroughFaults: pool-run holding a baton on a real git daemon
// or smart HTTP server, at the floor and at the default TTL, rides out a
// restart of the remote (down for 4 s, up again on the same port), a
// burst of 503s as long and pushes that take 2.5 s each: the work is not
// ended, and pool-run exits 0 when it ends by itself. Before the git store
// had a renewal gap, the guardian stopped the work at the floor's TTL in
// every one (exit 75, "not renewed in time"), with the lease safe on the
// remote. FAULTS=long runs five trials and logs the median renewal gap
// (the longest interval between the renewals the remote applied, across
// the fault) and the time from the fault's end to the first renewal.
func TestPoolRunThroughFaults(t *testing.T) {
	bin := installed(t)
	for _, f := range remoteFaults {
		for _, col := range []struct{ name, ttl, heartbeat string }{
			{"floor", floorTTL(f.http), ""},
			{"default", "15", "500ms"},
		} {
			t.Run(f.name+"/"+col.name, func(t *testing.T) {
				t.Parallel()
				var gaps, after []time.Duration
				for range trials() {
					g, a := poolRunThrough(t, bin, f, col.ttl, col.heartbeat)
					gaps, after = append(gaps, g), append(after, a)
				}
				t.Logf("%s at the %s: renewal gap %s median (%s), first renewal %s after the fault ended, median (%s)",
					f.name, col.name, medianOf(gaps), gaps, medianOf(after), after)
			})
		}
	}
}

// startPoolRun starts pool-run on url holding kind for a work that writes
// its pid to started and runs until finish exists; done gets its result.
func startPoolRun(t *testing.T, h *host, url, kind string, args ...string) (started, finish string, done <-chan result) {
	dir := t.TempDir()
	started, finish = filepath.Join(dir, "started"), filepath.Join(dir, "finish")
	ch := make(chan result, 1)
	argv := append([]string{"--store", url, "--kind", kind, "--owner", "ci-fault"}, args...)
	argv = append(argv, "--", "sh", "-c", `echo $$ >"$1.tmp" && mv "$1.tmp" "$1"; while [ ! -e "$2" ]; do sleep 0.05; done`, "sh", started, finish)
	go func() { ch <- h.run("pool-run", argv...) }()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(started); err == nil {
			break
		}
		select {
		case r := <-ch:
			t.Fatalf("pool-run ended before its work started: exit %d %s", r.code, r.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the work did not start")
		}
	}
	return started, finish, ch
}

// poolRunThrough runs pool-run on a new remote through f and returns the
// renewal gap across it and the time from its end to the first renewal
// after it.
func poolRunThrough(t *testing.T, bin string, f remoteFault, ttl, heartbeat string) (gap, after time.Duration) {
	r := gittest.Serve(t, f.http)
	h := newHost(t, bin)
	const kind = "deploy"
	args := []string{"--ttl", ttl}
	if heartbeat != "" {
		args = append(args, "--heartbeat", heartbeat)
	}
	stop := make(chan struct{})
	defer close(stop)
	changes := watchRef(t, r.Dir, "refs/durable-lease/"+gitstore.DefaultNamespace+"/leases/"+kind, stop)
	_, finish, done := startPoolRun(t, h, r.URL, kind, args...)
	bound := 60 * time.Second
	var began, ended time.Time
	var seen []time.Time
	next := func(what string) time.Time {
		t.Helper()
		select {
		case at := <-changes:
			return at
		case res := <-done:
			var ago []string
			for _, at := range seen {
				ago = append(ago, time.Since(at).Round(time.Millisecond).String())
			}
			t.Fatalf("%s: pool-run exited %d (the renewals seen before the fault came %s ago; the fault began %s ago and ended %s ago): %s",
				what, res.code, ago, since(began), since(ended), res.stderr)
		case <-time.After(bound):
			t.Fatalf("%s: no renewal within %s", what, bound)
		}
		panic("unreachable")
	}
	// Past the acquisition, a renewal has just landed: the fault comes
	// at once.
	// The fault comes at once after a renewal that took no longer than
	// the round trips the floor assumes: one that landed within the
	// heartbeat interval and a second of the renewal before it. On a
	// host so loaded that a renewal takes seconds (the acquisition
	// often does, while the run starts), the floor itself is not kept,
	// whatever the remote does.
	interval := ttlOf(t, ttl) / 8
	if heartbeat != "" {
		interval, _ = time.ParseDuration(heartbeat)
	}
	last := next("the acquisition")
	seen = append(seen, last)
	for {
		at := next("before the fault")
		seen = append(seen, at)
		steady := at.Sub(last) <= interval+time.Second
		last = at
		if steady && len(changes) == 0 {
			break
		}
	}
	f.begin(t, r)
	began = time.Now()
	time.Sleep(f.outage) // the fault's length is the test's choice: nothing to wait for
	f.end(t, r)
	ended = time.Now()
	seq := []time.Time{last}
	for len(changes) > 0 {
		seq = append(seq, <-changes)
	}
	if len(seq) > 1 && !f.slow {
		t.Fatalf("a renewal %s into a fault that lets none through: the fault did not bite", seq[1].Sub(began))
	}
	first := next("after the fault")
	seq = append(seq, first)
	for i := 1; i < len(seq); i++ {
		gap = max(gap, seq[i].Sub(seq[i-1]))
	}
	if f.slow && gap < slowPush {
		t.Fatalf("the longest interval between renewals was %s with pushes that each wait %s: the fault did not bite", gap, slowPush)
	}
	if err := os.WriteFile(finish, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.code != 0 || strings.Contains(res.stderr, "lease_lost") {
		t.Fatalf("pool-run after the fault: exit %d %s", res.code, res.stderr)
	}
	return gap, first.Sub(ended)
}

// TestPoolRunOutagePastTTL: a remote down for longer than the TTL (at the
// floor) ends pool-run with 75 and a message that says the lease was not
// renewed in time, its work gone, inside the TTL it last confirmed and
// so before another host could count the lease as expired; the remote
// then comes back and finds the work already ended.
func TestPoolRunOutagePastTTL(t *testing.T) {
	bin := installed(t)
	for name, http := range map[string]bool{"daemon": false, "http": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := gittest.Serve(t, http)
			h := newHost(t, bin)
			started, _, done := startPoolRun(t, h, r.URL, "deploy", "--ttl", floorTTL(http))
			data, err := os.ReadFile(started)
			if err != nil {
				t.Fatal(err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				t.Fatalf("the work wrote %q", data)
			}
			cut := time.Now()
			r.Down()
			res := <-done
			since := time.Since(cut)
			r.Up(t)
			ttl := ttlOf(t, floorTTL(http))
			if res.code != 75 || !strings.Contains(res.stderr, "lease_lost (exit 75)") || !strings.Contains(res.stderr, "was not renewed in time") {
				t.Fatalf("a remote down past the TTL: exit %d %s", res.code, res.stderr)
			}
			if err := syscall.Kill(pid, 0); err == nil {
				t.Errorf("the work (pid %d) still runs after pool-run exited", pid)
			}
			if bound := ttl + gitstore.Margin(ttl); since > bound {
				t.Errorf("pool-run exited %s after the remote went down, when another host could already take over (%s)", since, bound)
			}
			t.Logf("down for %s: %s", since.Round(time.Millisecond), strings.TrimSpace(res.stderr))
		})
	}
}

// since is the time since at, "-" for none.
func since(at time.Time) string {
	if at.IsZero() {
		return "-"
	}
	return time.Since(at).Round(time.Millisecond).String()
}

func ttlOf(t *testing.T, minutes string) time.Duration {
	m, err := strconv.ParseFloat(minutes, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(m * float64(time.Minute))
}
