//go:build ignore

// Run it with `go run bench/herd/main.go`: the build tag keeps this
// benchmark out of `go install ./...`, which pre-commit runs to install the
// repository's commands.

// Command herd measures the release-to-next-holder hand-off with many
// blocking waiters: N real `lease acquire --wait-ms` processes on one
// lease, and N real `pool acquire` processes on a one-slot pool. It lets
// them settle, then repeatedly releases the current holder (through the
// library, from this process) and stops the clock when the next holder
// prints its output. After each hand-off it starts one more waiter, so N
// processes are waiting at every release. Run it from the repository root:
//
//	go run bench/herd/main.go -n 1,50 -rounds 30
//
// It builds the CLIs (CGO_ENABLED=0) into a temporary directory, or uses
// the ones in -bin, and works in another temporary directory (-dir picks
// its parent, for example /dev/shm for tmpfs). With -etcd URL each
// measurement gets a store of its own under that etcd:// URL.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	_ "github.com/durable-lease/durable-lease/dirstore/dirpool" // a directory store's pools
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

func main() {
	ns := flag.String("n", "1,50", "comma-separated waiter counts")
	rounds := flag.Int("rounds", 30, "hand-offs per waiter count and kind of waiter")
	settle := flag.Duration("settle", 200*time.Millisecond, "pause before each release (plus a random part of the same length)")
	bin := flag.String("bin", "", "directory holding prebuilt lease and pool binaries (default: build them)")
	dir := flag.String("dir", "", "parent of the working directory (default: the system temporary directory)")
	only := flag.String("only", "lease,pool", "which waiters to measure: lease, pool or both")
	release := flag.String("release", "inproc", "how the holder releases: inproc (the library, from this process) or cli (lease release / pool release, a process of its own; timed from its start)")
	etcd := flag.String("etcd", "", "an etcd:// store URL under which each measurement gets a prefix of its own (default: directory stores)")
	flag.Parse()
	etcdBase = *etcd
	if *release != "inproc" && *release != "cli" {
		fmt.Fprintln(os.Stderr, "herd: -release must be inproc or cli")
		os.Exit(2)
	}
	releaseByCLI = *release == "cli"
	if err := run(*ns, *rounds, *settle, *bin, *dir, *only); err != nil {
		fmt.Fprintln(os.Stderr, "herd:", err)
		os.Exit(1)
	}
}

// releaseByCLI: release with the CLI in a process of its own, as a user's
// hook or script does, instead of through the library in this process.
var releaseByCLI bool

// etcdBase, when set, is the etcd:// URL under which each measurement
// gets a store of its own.
var etcdBase string

// storeFor is the store of one measurement: a directory under work, or a
// prefix of its own under etcdBase.
func storeFor(work string) string {
	if etcdBase == "" {
		return filepath.Join(work, "store")
	}
	return fmt.Sprintf("%s/herd-%d-%s", etcdBase, os.Getpid(), filepath.Base(work))
}

// openStore opens the store of one measurement in this process.
func openStore(store string) (*lease.Store, error) {
	if etcdBase == "" {
		return dirstore.Open(store)
	}
	st, _, err := etcdstore.Open(context.Background(), store)
	return st, err
}

// cliRelease runs bin/prog with args and fails unless it exits 0.
func cliRelease(bin string, env []string, prog string, args ...string) error {
	cmd := exec.Command(filepath.Join(bin, prog), args...)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %v: %v\n%s", prog, args, err, out)
	}
	return nil
}

func run(nsFlag string, rounds int, settle time.Duration, bin, dir, only string) error {
	var ns []int
	for _, f := range strings.Split(nsFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-n: bad count %q", f)
		}
		ns = append(ns, n)
	}
	tmp, err := os.MkdirTemp(dir, "herd-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if bin == "" {
		bin = filepath.Join(tmp, "bin")
		cmd := exec.Command("go", "build", "-o", bin+"/", "./cmd/lease", "./cmd/pool", "./cmd/durable-lease-etcd")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building the CLIs (run from the repository root): %v\n%s", err, out)
		}
	}
	type row struct {
		what string
		n    int
		d    []time.Duration
		note string
	}
	var rows []row
	for _, what := range strings.Split(only, ",") {
		for _, n := range ns {
			work := filepath.Join(tmp, fmt.Sprintf("%s-%d", what, n))
			var d []time.Duration
			var note string
			switch what {
			case "lease":
				d, err = leaseHerd(bin, work, n, rounds, settle)
			case "pool":
				var unfair int
				d, unfair, err = poolHerd(bin, work, n, rounds, settle)
				note = fmt.Sprintf("out of FIFO order: %d", unfair)
			default:
				return fmt.Errorf("-only: unknown %q", what)
			}
			if err != nil {
				return fmt.Errorf("%s, %d waiters: %w", what, n, err)
			}
			r := row{what, n, d, note}
			rows = append(rows, r)
			report(r.what, r.n, r.d, r.note)
		}
	}
	fmt.Println()
	fmt.Println("| waiters on | N | rounds | median | p90 | max |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %d | %d | %.2f ms | %.2f ms | %.2f ms |\n", r.what, r.n, len(r.d),
			ms(percentile(r.d, 50)), ms(percentile(r.d, 90)), ms(percentile(r.d, 100)))
	}
	return nil
}

// herd is a set of waiter processes whose first output lines arrive on one
// channel.
type herd struct {
	bin, work string
	env       []string
	args      func(owner string) []string
	procs     map[string]*exec.Cmd
	order     []string // owners in the order they were started
	lines     chan line
	next      int
}

type line struct {
	owner, text string
	err         error
}

func newHerd(bin, work string, env []string, args func(string) []string) *herd {
	return &herd{bin: bin, work: work, env: env, args: args, procs: map[string]*exec.Cmd{}, lines: make(chan line, 1024)}
}

func (h *herd) spawn() error {
	h.next++
	owner := fmt.Sprintf("w%d", h.next)
	a := h.args(owner)
	cmd := exec.Command(filepath.Join(h.bin, a[0]), a[1:]...)
	cmd.Env = h.env
	cmd.Dir = h.work
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	h.procs[owner] = cmd
	h.order = append(h.order, owner)
	go func() {
		s, err := bufio.NewReader(stdout).ReadString('\n')
		h.lines <- line{owner, s, err}
	}()
	return nil
}

// next waits for the next holder's output and reaps its process.
func (h *herd) holder(timeout time.Duration) (line, error) {
	select {
	case l := <-h.lines:
		if cmd := h.procs[l.owner]; cmd != nil {
			_ = cmd.Wait()
			delete(h.procs, l.owner)
		}
		h.order = slices.DeleteFunc(h.order, func(o string) bool { return o == l.owner })
		if l.err != nil {
			return l, fmt.Errorf("waiter %s: %v (%q)", l.owner, l.err, l.text)
		}
		return l, nil
	case <-time.After(timeout):
		return line{}, fmt.Errorf("no waiter took over within %s", timeout)
	}
}

func (h *herd) stop() {
	for _, cmd := range h.procs {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, cmd := range h.procs {
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
}

func pause(settle time.Duration) {
	time.Sleep(settle + rand.N(settle))
}

// leaseHerd: n `lease acquire --wait-ms` processes on one kind.
func leaseHerd(bin, work string, n, rounds int, settle time.Duration) ([]time.Duration, error) {
	store := storeFor(work)
	if err := os.MkdirAll(work, 0o777); err != nil {
		return nil, err
	}
	st, err := openStore(store)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	const kind = "herd"
	acq, err := st.Acquire(ctx, lease.Request{Kind: kind, Owner: "holder", TTLMinutes: 30})
	if err != nil {
		return nil, err
	}
	owner, token := "holder", acq.Record.Token
	env := append(os.Environ(), "LEASE_STORE="+store)
	h := newHerd(bin, work, env, func(o string) []string {
		return []string{"lease", "acquire", "--kind", kind, "--owner", o, "--ttl", "30", "--wait-ms", "600000"}
	})
	defer h.stop()
	for i := 0; i < n; i++ {
		if err := h.spawn(); err != nil {
			return nil, err
		}
	}
	time.Sleep(time.Second + time.Duration(n)*20*time.Millisecond) // every waiter started and waiting
	var out []time.Duration
	for i := 0; i < rounds; i++ {
		pause(settle)
		start := time.Now()
		if releaseByCLI {
			err = cliRelease(bin, env, "lease", "release", "--kind", kind, "--owner", owner, "--token", token)
		} else {
			_, err = st.Release(ctx, lease.Ref{Kind: kind, Owner: owner, Token: token})
		}
		if err != nil {
			return nil, fmt.Errorf("round %d: release: %w", i, err)
		}
		l, err := h.holder(30 * time.Second)
		elapsed := time.Since(start)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", i, err)
		}
		var got struct {
			Record struct{ Owner, Token string }
		}
		if json.Unmarshal([]byte(l.text), &got) != nil || got.Record.Token == "" {
			return nil, fmt.Errorf("round %d: waiter %s printed %q", i, l.owner, l.text)
		}
		owner, token = got.Record.Owner, got.Record.Token
		out = append(out, elapsed)
		if err := h.spawn(); err != nil {
			return nil, err
		}
		time.Sleep(50 * time.Millisecond) // the new waiter starts and is refused
	}
	return out, nil
}

// poolHerd: n `pool acquire` processes on a one-slot pool. It also counts
// hand-offs that did not go to the longest-waiting process.
func poolHerd(bin, work string, n, rounds int, settle time.Duration) ([]time.Duration, int, error) {
	store := storeFor(work)
	if err := os.MkdirAll(work, 0o777); err != nil {
		return nil, 0, err
	}
	poolFile := filepath.Join(work, "pool.json")
	if err := os.WriteFile(poolFile, []byte(`{"slots":[{"id":1}]}`), 0o666); err != nil {
		return nil, 0, err
	}
	st, err := openStore(store)
	if err != nil {
		return nil, 0, err
	}
	cfg, err := pool.LoadFile(poolFile)
	if err != nil {
		return nil, 0, err
	}
	p, err := pool.Open(st, cfg, pool.Options{})
	if err != nil {
		return nil, 0, err
	}
	ctx := context.Background()
	g, err := p.Acquire(ctx, pool.AcquireRequest{Owner: "holder", NoWait: true})
	if err != nil {
		return nil, 0, err
	}
	owner, token := g.Owner, g.Token
	env := append(os.Environ(), "LEASE_STORE="+store, "LEASE_POOL_FILE="+poolFile)
	h := newHerd(bin, work, env, func(o string) []string { return []string{"pool", "acquire", "--owner", o} })
	defer h.stop()
	// Start them one at a time, so that the queue order is the start order.
	for i := 0; i < n; i++ {
		if err := h.spawn(); err != nil {
			return nil, 0, err
		}
		if err := waitQueued(p, i+1); err != nil {
			return nil, 0, err
		}
	}
	var out []time.Duration
	unfair := 0
	for i := 0; i < rounds; i++ {
		pause(settle)
		first := h.order[0]
		start := time.Now()
		if releaseByCLI {
			err = cliRelease(bin, env, "pool", "release", "--slot", "1", "--owner", owner, "--token", token)
		} else {
			_, err = p.Release(ctx, "1", owner, token, false)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("round %d: release: %w", i, err)
		}
		l, err := h.holder(30 * time.Second)
		elapsed := time.Since(start)
		if err != nil {
			return nil, 0, fmt.Errorf("round %d: %w", i, err)
		}
		var got struct{ Owner, Token string }
		if json.Unmarshal([]byte(l.text), &got) != nil || got.Token == "" {
			return nil, 0, fmt.Errorf("round %d: waiter %s printed %q", i, l.owner, l.text)
		}
		if got.Owner != first {
			unfair++
		}
		owner, token = got.Owner, got.Token
		out = append(out, elapsed)
		if err := h.spawn(); err != nil {
			return nil, 0, err
		}
		if err := waitQueued(p, n); err != nil {
			return nil, 0, err
		}
	}
	return out, unfair, nil
}

// waitQueued waits until the pool's queue has n entries.
func waitQueued(p *pool.Pool, n int) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		st, err := p.Status(context.Background())
		if err != nil {
			return err
		}
		if len(st.Queue) >= n {
			return nil
		}
		time.Sleep(2 * time.Millisecond)
	}
	return fmt.Errorf("the queue never reached %d entries", n)
}

func percentile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q / 100 * float64(len(s)-1))
	return s[i]
}

func report(what string, n int, d []time.Duration, note string) {
	fmt.Printf("%-6s N=%-3d rounds=%-3d median %8.2f ms   p90 %8.2f ms   max %8.2f ms   %s\n", what, n, len(d),
		ms(percentile(d, 50)), ms(percentile(d, 90)), ms(percentile(d, 100)), note)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
