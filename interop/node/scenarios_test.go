package node

// Direct CLI-to-CLI scenarios: our lease and pool binaries (release
// builds) and the Node tool's lease-cli.mjs and pool-cli.mjs work on one
// store, each scenario run both ways (ours writes and the Node tool reads,
// renews and releases, then the reverse). They use the wall clock, as real
// processes on one host do; the suite run by run.sh covers the same ground
// on an injected clock.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
)

// bins holds our binaries, built once by TestMain ("" when the Node side
// is missing and the tests skip).
var bins string

// nodeLib is the Node tool's lease directory (lease-cli.mjs, pool-cli.mjs,
// fixtures/). Where the scenarios cannot run, one of the reasons says why:
// notHere, no suite is expected on this machine (nothing to run); missing,
// a program is (node); broken, a suite is expected and is not there (a
// mistake: DL_NODE_SUITE naming a missing directory, say).
var nodeLib, notHere, missing, broken string

func TestMain(m *testing.M) {
	findNodeTool()
	if nodeLib != "" {
		// Our binaries, as the README installs them, built once for the
		// whole go test run.
		dir, err := testrun.BuildCommands("")
		if err != nil {
			fmt.Fprintf(os.Stderr, "building our binaries: %v\n", err)
			os.Exit(1)
		}
		bins = dir
		// The scenarios wait on leases' expiry far more than they
		// compute: more of them at once than there are cores.
		os.Exit(testrun.Run(m, testrun.Parallel(8)))
	}
	testrun.Main(m)
}

// findNodeTool locates the Node tool where run.sh does (locate.sh says
// where: DL_NODE_SUITE, else ../shared/reference/node beside this checkout
// or beside the one it was cloned from), and node.
func findNodeTool() {
	out, err := exec.Command("sh", "locate.sh").Output()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == 3:
		notHere = strings.TrimSpace(string(exit.Stderr))
	case errors.As(err, &exit):
		broken = strings.TrimSpace(string(exit.Stderr))
	case err != nil:
		broken = "locate.sh: " + err.Error()
	default:
		if _, err := exec.LookPath("node"); err != nil {
			missing = "no node on PATH"
			return
		}
		nodeLib = strings.TrimSpace(string(out))
	}
}

// requireNode lets t run where the scenarios can. Elsewhere it fails t
// for a suite expected and not there; for node missing it fails t under
// CI=true and skips it otherwise; where no suite is expected it skips t.
func requireNode(t *testing.T) {
	t.Helper()
	switch {
	case broken != "":
		t.Fatalf("the Node scenarios cannot run: %s", broken)
	case missing != "":
		testrun.Missing(t, "the Node scenarios cannot run: %s", missing)
	case notHere != "":
		testrun.Skip(t, "the Node scenarios: %s", notHere)
	}
}

// side is one implementation's pair of CLIs.
type side struct {
	name        string
	lease, pool []string // argv prefixes
	// notDead is the code of a refused reap of a live lease (docs/PROTOCOL.md §4.3).
	notDead string
}

func ours() side {
	return side{name: "ours", lease: []string{filepath.Join(bins, "lease")}, pool: []string{filepath.Join(bins, "pool")}, notDead: "not_dead"}
}

func theirs() side {
	return side{name: "node", lease: []string{"node", filepath.Join(nodeLib, "lease-cli.mjs")},
		pool: []string{"node", filepath.Join(nodeLib, "pool-cli.mjs")}, notDead: "held"}
}

// bothWays runs f with (writer, reader) = (ours, node) and (node, ours).
func bothWays(t *testing.T, f func(t *testing.T, a, b side, w *world)) {
	requireNode(t)
	t.Parallel()
	for _, pair := range [][2]side{{ours(), theirs()}, {theirs(), ours()}} {
		a, b := pair[0], pair[1]
		t.Run(a.name+"-then-"+b.name, func(t *testing.T) {
			t.Parallel()
			f(t, a, b, newWorld(t))
		})
	}
}

// world is one store and the environment both sides run in.
type world struct {
	t     *testing.T
	store string
	env   []string
}

func newWorld(t *testing.T) *world {
	env := []string{}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "LEASE_") || strings.HasPrefix(name, "POOL_") || strings.HasPrefix(name, "E2E_LEASE_") || name == "DL_TEST_NOW_MS" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		testrun.HostRegistryEnv(),
		"LEASE_POOL_FILE="+filepath.Join(nodeLib, "fixtures", "acme-pool.json"),
		"POOL_PROVISION_CMD=true", // both run it on every grant; the scenarios are about the protocol
		"POOL_POLL_MS=200",
		"POOL_WAITER_TIMEOUT_MS=30000", // bounds the detached waiters of async requests
	)
	return &world{t: t, store: storeDir(t), env: env}
}

// storeDir is a new store directory for one scenario: under
// DL_NODE_STORE_TMP when set (to run the scenarios on a filesystem of
// your own), else under the test's temporary directory.
func storeDir(t *testing.T) string {
	parent := os.Getenv("DL_NODE_STORE_TMP")
	if parent == "" {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp(parent, "dl-scenario-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// result is one run: exit status, the JSON object printed, stderr.
type result struct {
	exit   int
	out    map[string]any
	stderr string
}

func (w *world) cmd(prog []string, args ...string) *exec.Cmd {
	cmd := exec.Command(prog[0], append(append(append([]string{}, prog[1:]...), args...), "--store", w.store)...)
	cmd.Env = w.env
	return cmd
}

func (w *world) finish(cmd *exec.Cmd, stdout, stderr *bytes.Buffer, err error) result {
	w.t.Helper()
	r := result{stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.exit = exit.ExitCode()
	case err != nil:
		w.t.Fatalf("%v: %v", cmd.Args, err)
	}
	if err := json.Unmarshal(stdout.Bytes(), &r.out); err != nil {
		w.t.Fatalf("%v printed no JSON object (exit %d): %v\n%s%s", cmd.Args, r.exit, err, stdout, stderr)
	}
	return r
}

// run runs prog with args and --store, and wants the exit status want.
func (w *world) run(want int, prog []string, args ...string) result {
	w.t.Helper()
	cmd := w.cmd(prog, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	r := w.finish(cmd, &stdout, &stderr, cmd.Run())
	if r.exit != want {
		w.t.Fatalf("%s %s: exit %d, want %d: %v\n%s", filepath.Base(prog[len(prog)-1]), strings.Join(args, " "), r.exit, want, r.out, r.stderr)
	}
	return r
}

// background is a command running while the scenario goes on.
type background struct {
	done   chan struct{}
	result result
	at     time.Time
}

func (w *world) start(prog []string, args ...string) *background {
	w.t.Helper()
	cmd := w.cmd(prog, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	bg := &background{done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		bg.at = time.Now()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			bg.result.exit = exit.ExitCode()
		} else if err != nil {
			bg.result.exit = -1
		}
		bg.result.stderr = stderr.String()
		_ = json.Unmarshal(stdout.Bytes(), &bg.result.out)
		close(bg.done)
	}()
	w.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-bg.done
	})
	return bg
}

// wait waits up to d for bg to end.
func (bg *background) wait(t *testing.T, d time.Duration, what string) result {
	t.Helper()
	select {
	case <-bg.done:
		return bg.result
	case <-time.After(d):
		t.Fatalf("%s did not finish within %s", what, d)
	}
	return result{}
}

func (bg *background) running() bool {
	select {
	case <-bg.done:
		return false
	default:
		return true
	}
}

// eventually retries f (which reports whether it is satisfied) until it is
// or d passes.
func eventually(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// get reads a dotted path ("record.token", "slots.0.holder") in decoded JSON.
func get(v any, path string) any {
	for _, part := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[part]
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func str(v any, path string) string { s, _ := get(v, path).(string); return s }

// want checks that path in r's output is value (compared as JSON).
func want(t *testing.T, r result, path string, value any) {
	t.Helper()
	got, _ := json.Marshal(get(r.out, path))
	exp, _ := json.Marshal(value)
	if !bytes.Equal(got, exp) {
		t.Errorf(".%s = %s, want %s (in %v)", path, got, exp, r.out)
	}
}

// kinds lists the "kind" of each element of the array at path.
func kinds(r result, path string) []string {
	var out []string
	arr, _ := get(r.out, path).([]any)
	for _, e := range arr {
		out = append(out, str(e, "kind"))
	}
	return out
}

func TestLeaseRoundTrip(t *testing.T) {
	bothWays(t, func(t *testing.T, a, b side, w *world) {
		acq := w.run(0, a.lease, "acquire", "--kind", "shared", "--owner", "alpha", "--ttl", "5", "--payload", `{"n":1}`)
		tok := str(acq.out, "record.token")
		st := w.run(0, b.lease, "status", "--kind", "shared")
		want(t, st, "state", "held")
		want(t, st, "holder", "alpha")
		want(t, st, "record.payload", map[string]any{"n": 1})
		want(t, st, "expiresAt", str(w.run(0, a.lease, "status", "--kind", "shared").out, "expiresAt"))

		want(t, w.run(1, b.lease, "heartbeat", "--kind", "shared", "--owner", "alpha", "--token", "nope"), "code", "not_owner")
		want(t, w.run(1, b.lease, "release", "--kind", "shared", "--owner", "alpha", "--token", "nope"), "code", "token_mismatch")
		want(t, w.run(1, b.lease, "release", "--kind", "shared", "--owner", "beta", "--token", tok), "code", "not_owner")
		want(t, w.run(1, b.lease, "acquire", "--kind", "shared", "--owner", "beta", "--ttl", "5"), "code", "held")

		time.Sleep(5 * time.Millisecond) // a later heartbeat stamp
		beat := w.run(0, b.lease, "heartbeat", "--kind", "shared", "--owner", "alpha", "--token", tok)
		want(t, w.run(0, a.lease, "status", "--kind", "shared"), "record.heartbeat", str(beat.out, "record.heartbeat"))
		want(t, w.run(0, a.lease, "status", "--kind", "shared"), "record.payload", map[string]any{"n": 1})

		rel := w.run(0, b.lease, "release", "--kind", "shared", "--owner", "alpha", "--token", tok)
		want(t, rel, "released", true)
		want(t, w.run(0, a.lease, "status", "--kind", "shared"), "state", "free")
	})
}

func TestLeaseWait(t *testing.T) {
	bothWays(t, func(t *testing.T, a, b side, w *world) {
		tok := str(w.run(0, a.lease, "acquire", "--kind", "baton", "--owner", "alpha", "--ttl", "5").out, "record.token")
		waiter := w.start(b.lease, "acquire", "--kind", "baton", "--owner", "beta", "--ttl", "5", "--wait-ms", "20000")
		time.Sleep(400 * time.Millisecond)
		if !waiter.running() {
			t.Fatalf("the waiter did not wait for a held lease: %+v", waiter.result)
		}
		w.run(0, a.lease, "release", "--kind", "baton", "--owner", "alpha", "--token", tok)
		released := time.Now()
		r := waiter.wait(t, 5*time.Second, "the waiter, after the release")
		if r.exit != 0 {
			t.Fatalf("waiter exit %d: %v %s", r.exit, r.out, r.stderr)
		}
		want(t, r, "record.owner", "beta")
		if d := waiter.at.Sub(released); d > 3*time.Second {
			t.Errorf("the waiter took %s after the release", d)
		}
		want(t, w.run(0, a.lease, "status", "--kind", "baton"), "holder", "beta")

		// A bounded wait on a lease that stays held ends in a timeout.
		w.run(0, a.lease, "acquire", "--kind", "held", "--owner", "alpha", "--ttl", "5")
		want(t, w.run(1, b.lease, "acquire", "--kind", "held", "--owner", "beta", "--ttl", "5", "--wait-ms", "300"), "code", "timeout")
	})
}

func TestLeaseTakeover(t *testing.T) {
	bothWays(t, func(t *testing.T, a, b side, w *world) {
		old := str(w.run(0, a.lease, "acquire", "--kind", "tko", "--owner", "alpha", "--ttl", "0.005").out, "record.token") // 300 ms
		time.Sleep(500 * time.Millisecond)
		st := w.run(0, b.lease, "status", "--kind", "tko")
		want(t, st, "state", "unknown")
		if ms, _ := get(st.out, "expiredForMs").(float64); ms <= 0 {
			t.Errorf("expiredForMs = %v, want > 0", get(st.out, "expiredForMs"))
		}
		want(t, w.run(1, b.lease, "heartbeat", "--kind", "tko", "--owner", "alpha", "--token", old), "code", "expired")

		took := w.run(0, b.lease, "acquire", "--kind", "tko", "--owner", "beta", "--ttl", "5")
		want(t, took, "tookOverExpired", true)
		want(t, took, "previous.owner", "alpha")
		tok := str(took.out, "record.token")
		want(t, w.run(1, a.lease, "heartbeat", "--kind", "tko", "--owner", "alpha", "--token", old), "code", "not_owner")

		journal, err := os.ReadFile(filepath.Join(w.store, "reaped.log"))
		if err != nil {
			t.Fatal(err)
		}
		var line map[string]any
		if err := json.Unmarshal(bytes.TrimSpace(journal), &line); err != nil {
			t.Fatalf("reaped.log: %v\n%s", err, journal)
		}
		if line["event"] != "takeover" || line["by"] != "beta" || str(line, "previous.owner") != "alpha" {
			t.Errorf("reaped.log = %s", journal)
		}
		w.run(0, a.lease, "heartbeat", "--kind", "tko", "--owner", "beta", "--token", tok)
		want(t, w.run(0, a.lease, "release", "--kind", "tko", "--owner", "beta", "--token", tok), "released", true)
	})
}

func TestLeaseReapAndReconcile(t *testing.T) {
	bothWays(t, func(t *testing.T, a, b side, w *world) {
		w.run(0, a.lease, "acquire", "--kind", "dead", "--owner", "alpha", "--ttl", "0.005")
		w.run(0, a.lease, "acquire", "--kind", "live", "--owner", "alpha", "--ttl", "5")
		time.Sleep(500 * time.Millisecond)
		rec := w.run(0, b.lease, "reconcile")
		if got := kinds(rec, "held"); strings.Join(got, ",") != "live" {
			t.Errorf("%s reconcile held = %v, want [live]", b.name, got)
		}
		if got := kinds(rec, "reaped"); strings.Join(got, ",") != "dead" {
			t.Errorf("%s reconcile reaped = %v, want [dead]", b.name, got)
		}
		again := w.run(0, a.lease, "reconcile")
		if got := kinds(again, "reaped"); len(got) != 0 {
			t.Errorf("%s reconcile after %s's reaped %v again", a.name, b.name, got)
		}
		// A live lease is not reaped; each tool answers with its own code.
		want(t, w.run(1, b.lease, "reap", "--kind", "live"), "code", b.notDead)
		want(t, w.run(0, a.lease, "status", "--kind", "live"), "state", "held")
	})
}

func TestPoolRoundTrip(t *testing.T) {
	bothWays(t, func(t *testing.T, a, b side, w *world) {
		g := w.run(0, a.pool, "acquire", "--owner", "acme-alpha", "--no-wait")
		slot := fmt.Sprint(get(g.out, "slot_id"))
		tok := str(g.out, "token")
		st := w.run(0, b.pool, "status")
		for _, s := range get(st.out, "slots").([]any) {
			if fmt.Sprint(get(s, "slot_id")) == slot && get(s, "holder") != "acme-alpha" {
				t.Errorf("%s status: slot %s held by %v, want acme-alpha", b.name, slot, get(s, "holder"))
			}
		}
		w.run(0, b.pool, "heartbeat", "--slot", slot, "--owner", "acme-alpha", "--token", tok)
		want(t, w.run(1, b.pool, "release", "--slot", slot, "--owner", "acme-alpha", "--token", "nope"), "code", "token_mismatch")
		time.Sleep(20 * time.Millisecond) // a hold time to record
		rel := w.run(0, b.pool, "release", "--slot", slot, "--owner", "acme-alpha", "--token", tok)
		want(t, rel, "released", true)
		after := w.run(0, a.pool, "status")
		for _, s := range get(after.out, "slots").([]any) {
			if get(s, "state") != "free" {
				t.Errorf("%s status after the release: %v", a.name, s)
			}
		}
		// One stats.json, one moving average.
		avg := get(after.out, "movingAvgMs")
		if f, _ := avg.(float64); f <= 0 || f >= 480000 {
			t.Errorf("movingAvgMs = %v, want the recorded hold time", avg)
		}
		want(t, w.run(0, b.pool, "status"), "movingAvgMs", avg)
	})
}

// The moving average of one stats.json, rounded alike: [1000, 1001]
// averages 1001 ms in both.
func TestPoolMovingAverageRounding(t *testing.T) {
	bothWays(t, func(t *testing.T, a, b side, w *world) {
		dir := filepath.Join(w.store, "e2e-pool")
		if err := os.MkdirAll(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "stats.json"), []byte(`{"durationsMs":[1000,1001]}`+"\n"), 0o666); err != nil {
			t.Fatal(err)
		}
		want(t, w.run(0, a.pool, "status"), "movingAvgMs", 1001)
		want(t, w.run(0, b.pool, "status"), "movingAvgMs", 1001)
	})
}

// Blocking waiters of both tools in one queue are granted in arrival
// order, whichever tool queued them and whichever frees the slot.
func TestPoolMixedFIFO(t *testing.T) {
	bothWays(t, func(t *testing.T, a, b side, w *world) {
		h1 := w.run(0, a.pool, "acquire", "--owner", "acme-h1", "--no-wait")
		w.run(0, b.pool, "acquire", "--owner", "acme-h2", "--no-wait")
		queued := func(n int) {
			eventually(t, 10*time.Second, fmt.Sprintf("%d waiters queued", n), func() bool {
				q, _ := get(w.run(0, a.pool, "status").out, "queue").([]any)
				return len(q) == n
			})
		}
		var waiters []*background
		for i, s := range []side{a, b, a} {
			waiters = append(waiters, w.start(s.pool, "acquire", "--owner", fmt.Sprintf("acme-w%d", i+1), "--wait-ms", "30000"))
			queued(i + 1)
		}
		owners := []string{}
		for _, e := range get(w.run(0, b.pool, "status").out, "queue").([]any) {
			owners = append(owners, str(e, "owner"))
		}
		if strings.Join(owners, ",") != "acme-w1,acme-w2,acme-w3" {
			t.Fatalf("%s status queue = %v", b.name, owners)
		}

		// Each release grants the head of the queue and no one behind it.
		release := []side{b, a, b}
		slot, owner, tok := fmt.Sprint(get(h1.out, "slot_id")), "acme-h1", str(h1.out, "token")
		for i, wt := range waiters {
			w.run(0, release[i].pool, "release", "--slot", slot, "--owner", owner, "--token", tok)
			r := wt.wait(t, 10*time.Second, fmt.Sprintf("waiter %d", i+1))
			if r.exit != 0 {
				t.Fatalf("waiter %d: exit %d %v %s", i+1, r.exit, r.out, r.stderr)
			}
			want(t, r, "owner", fmt.Sprintf("acme-w%d", i+1))
			want(t, r, "slot_id", get(h1.out, "slot_id"))
			time.Sleep(300 * time.Millisecond) // the others poll every 200 ms: give one a chance to jump
			for j := i + 1; j < len(waiters); j++ {
				if !waiters[j].running() {
					t.Fatalf("waiter %d was granted before waiter %d's turn: %v", j+1, i+1, waiters[j].result.out)
				}
			}
			owner, tok = str(r.out, "owner"), str(r.out, "token")
		}
	})
}

// An async request of one tool is claimed through the other: its position
// while it waits (to anyone who asks), then the grant its detached waiter
// made, which the other tool renews; once the lease is gone both refuse it.
func TestPoolAsyncClaim(t *testing.T) {
	bothWays(t, func(t *testing.T, a, b side, w *world) {
		h1 := w.run(0, a.pool, "acquire", "--owner", "acme-h1", "--no-wait")
		w.run(0, b.pool, "acquire", "--owner", "acme-h2", "--no-wait")
		req := w.run(0, a.pool, "request", "--owner", "acme-gamma")
		want(t, req, "queued", true)
		want(t, req, "position", 1)
		id := str(req.out, "request_id")

		cl := w.run(0, b.pool, "claim", "--request", id, "--owner", "acme-gamma")
		want(t, cl, "queued", true)
		want(t, cl, "position", 1)
		want(t, w.run(0, b.pool, "claim", "--request", id, "--owner", "acme-other"), "position", 1)

		w.run(0, b.pool, "release", "--slot", fmt.Sprint(get(h1.out, "slot_id")), "--owner", "acme-h1", "--token", str(h1.out, "token"))
		var grant result
		eventually(t, 15*time.Second, "the detached waiter's grant", func() bool {
			grant = w.run(0, b.pool, "claim", "--request", id, "--owner", "acme-gamma")
			return get(grant.out, "state") == "ready"
		})
		want(t, grant, "owner", "acme-gamma")
		want(t, grant, "mode", "async")
		want(t, grant, "slot_id", get(h1.out, "slot_id"))
		tok := str(grant.out, "token")
		want(t, w.run(0, a.pool, "claim", "--request", id, "--owner", "acme-gamma"), "token", tok)
		slot := fmt.Sprint(get(grant.out, "slot_id"))
		w.run(0, b.pool, "heartbeat", "--slot", slot, "--owner", "acme-gamma", "--token", tok)
		w.run(0, a.pool, "release", "--slot", slot, "--owner", "acme-gamma", "--token", tok)
		want(t, w.run(1, b.pool, "claim", "--request", id, "--owner", "acme-gamma"), "state", "lease_lost")
		want(t, w.run(1, a.pool, "claim", "--request", id, "--owner", "acme-gamma"), "state", "lease_lost")
	})
}
