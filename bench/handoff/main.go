//go:build ignore

// Run it with `go run bench/handoff/main.go`: the build tag keeps this
// benchmark out of `go install ./...`, which pre-commit runs to install the
// repository's commands.

// Command handoff measures how long a freed lease takes to reach a blocked
// waiter on a directory store: from the holder's release to the waiter
// holding it, against a kernel flock(2) hand-off timed the same way in the
// same run. Run it from the repository root:
//
//	go run bench/handoff/main.go -rounds 40
//	go run bench/handoff/main.go -rounds 40 -base /tmp/basebin   # before and after
//
// Each round, in a random order, hands off once to each of:
//
//   - flock: `flock FILE echo held`, blocked in flock(2) while this process
//     holds the lock; the yardstick;
//   - lease: `lease acquire --wait-ms`, the waiter of a held lease;
//   - pool-run: `pool-run --kind K -- echo held`, waiting for the same;
//   - pool: `pool acquire` on a pool of one slot.
//
// This process holds the lock or the lease (through the library, as the
// waiter's peer would), starts the waiter, lets it settle into its wait for
// -settle plus a random part of the same length, takes the time, releases,
// and stops the clock when the waiter prints its grant (lease, pool) or its
// work prints (flock, pool-run): it holds. It also times the waiter's exit,
// which is what a script running `lease acquire` or `pool acquire` waits
// for. It prints, per waiter, the median and p90 of both, the ratio of the
// median and p90 of holding to flock's, the medians of the release's own
// return and of the time from it to the line ("after"): the release's
// steps, and the wake-up with the waiter's acquire; and the median and
// p90 of the time from the release's return to the waiter's exit
// ("ret->exit": with -release cli, a `lease release` in a script returning
// to the waiter's exit, as issue 35 first timed it from Python).
//
// With -base DIR the waiters of a base build (its lease, pool and
// pool-run) are measured in the same rounds, named "<waiter>@base", with
// the ratio of this build's medians over theirs. The release is this
// tree's library either way (with -release cli, each build's own CLI).
//
// With -release cli the holder releases through `lease release` or `pool
// release` (a process of its own, as a hook would), timed from its start;
// flock's holder is then `flock FILE cat`, released by closing its input.
// -poll-n N adds N hand-offs to a waiter that polls `pool acquire --no-wait`
// at the pool's default interval, for the comparison of PERFORMANCE-LOG.md.
//
// It builds the CLIs (CGO_ENABLED=0, as the README installs them) into a
// temporary directory, or uses those in -bin, and works in another under
// -dir (default the system temporary directory).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	_ "github.com/durable-lease/durable-lease/dirstore/dirpool" // a directory store's pools

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

func main() {
	rounds := flag.Int("rounds", 40, "hand-offs to each waiter")
	only := flag.String("only", "flock,lease,pool-run,pool", "which waiters to measure (flock is the yardstick)")
	settle := flag.Duration("settle", 60*time.Millisecond, "pause before each release (plus a random part of the same length)")
	release := flag.String("release", "inproc", "how the holder releases: inproc (the library, from this process) or cli (a process of its own, timed from its start)")
	bin := flag.String("bin", "", "directory holding prebuilt lease, pool and pool-run (default: build them)")
	base := flag.String("base", "", "directory holding the lease, pool and pool-run of a base build, whose waiters are measured in the same rounds")
	dir := flag.String("dir", "", "parent of the working directory (default: the system temporary directory)")
	pollN := flag.Int("poll-n", 0, "hand-offs to a waiter polling `pool acquire --no-wait` (each takes about half the poll interval)")
	flag.BoolVar(&check, "check", false, "fail (exit 1) when a gated waiter's median over flock's, to hold or to exit, is more than 50 % over its target (CI's quick form: -rounds 15 -only flock,lease -check)")
	flag.Parse()
	if *release != "inproc" && *release != "cli" {
		fmt.Fprintln(os.Stderr, "handoff: -release must be inproc or cli")
		os.Exit(2)
	}
	if err := run(*rounds, strings.Split(*only, ","), *settle, *release == "cli", *bin, *base, *dir, *pollN); err != nil {
		fmt.Fprintln(os.Stderr, "handoff:", err)
		os.Exit(1)
	}
}

// check: judge the gated waiters' ratios (-check).
var check bool

// targets are the gated waiters' targets: the median over flock's, to
// hold and to exit, in the same rounds (docs/PERFORMANCE.md; issue 35's 3
// ms is 2.5 times a flock hand-off here). pool and pool-run miss theirs
// still and are not gated.
var targets = map[string]float64{"lease": 2.5}

type bench struct {
	work, bin, store, poolFile string
	env                        []string
	st                         *lease.Store
	p                          *pool.Pool
	cli                        bool
	settle                     time.Duration
	parts                      []parts // of the hand-offs of the waiter measured now
}

// parts of one hand-off besides its time: how long the release took to
// return, and the waiter's exit after its line.
type parts struct{ release, exit time.Duration }

// sample is one waiter's hand-offs: to its line (it holds), to its exit
// (a script running it goes on), and the release's own return.
type sample struct{ holds, exits, release, after, afterExit []time.Duration }

func run(rounds int, only []string, settle time.Duration, cli bool, bin, base, dir string, pollN int) error {
	work, err := os.MkdirTemp(dir, "handoff-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if bin == "" {
		bin = filepath.Join(work, "bin")
		for _, c := range []string{"lease", "pool", "pool-run"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(bin, c), "./cmd/"+c)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("building %s (run from the repository root): %v\n%s", c, err, out)
			}
		}
	}
	b := &bench{work: work, bin: bin, store: filepath.Join(work, "store"), poolFile: filepath.Join(work, "pool.json"), cli: cli, settle: settle}
	if err := os.WriteFile(b.poolFile, []byte(`{"slots":[{"id":1}]}`), 0o666); err != nil {
		return err
	}
	if b.st, err = dirstore.Open(b.store); err != nil {
		return err
	}
	cfg, err := pool.LoadFile(b.poolFile)
	if err != nil {
		return err
	}
	if b.p, err = pool.Open(b.st, cfg, pool.Options{}); err != nil {
		return err
	}
	b.env = append(os.Environ(), "LEASE_STORE="+b.store, "LEASE_POOL_FILE="+b.poolFile)
	if err := os.WriteFile(filepath.Join(work, "flock"), nil, 0o666); err != nil {
		return err
	}
	kinds := map[string]func(string) (time.Duration, error){
		"flock": b.flock, "lease": b.lease, "pool-run": b.poolRun, "pool": b.pool,
	}
	type waiter struct{ name, kind, bin string }
	var waiters []waiter
	for _, k := range only {
		if kinds[k] == nil {
			return fmt.Errorf("-only: no waiter %q", k)
		}
		waiters = append(waiters, waiter{k, k, bin})
		if base != "" && k != "flock" {
			waiters = append(waiters, waiter{k + "@base", k, base})
		}
	}
	got := map[string]*sample{}
	load0 := loadavg()
	start := time.Now()
	for i := 0; i < rounds; i++ {
		order := slices.Clone(waiters)
		rand.Shuffle(len(order), func(a, c int) { order[a], order[c] = order[c], order[a] })
		for _, w := range order {
			b.parts = nil
			d, err := kinds[w.kind](w.bin)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", i, w.name, err)
			}
			smp := got[w.name]
			if smp == nil {
				smp = &sample{}
				got[w.name] = smp
			}
			smp.holds = append(smp.holds, d)
			for _, p := range b.parts {
				smp.release = append(smp.release, p.release)
				smp.after = append(smp.after, d-p.release)
				smp.afterExit = append(smp.afterExit, d+p.exit-p.release)
				smp.exits = append(smp.exits, d+p.exit)
			}
		}
	}
	load1 := loadavg()
	how := "the library, in process"
	if cli {
		how = "the CLI, timed from its start"
	}
	fmt.Printf("hand-off on a directory store, from the release (%s) to the waiter holding (its line) and exiting;\n", how)
	fmt.Printf("%d rounds in %.1f s, load %.2f then %.2f; medians and p90 in ms\n", rounds, time.Since(start).Seconds(), load0[0], load1[0])
	fmt.Printf("%-14s %5s %7s %7s %7s %7s %9s %9s %8s %8s %10s %7s\n", "waiter", "n", "holds", "p90", "exits", "p90", "/flock", "p90/flock", "release", "after", "ret->exit", "p90")
	ref := got["flock"]
	for _, w := range waiters {
		d := got[w.name]
		line := fmt.Sprintf("%-14s %5d %7.2f %7.2f %7.2f %7.2f", w.name, len(d.holds),
			ms(percentile(d.holds, 50)), ms(percentile(d.holds, 90)), ms(percentile(d.exits, 50)), ms(percentile(d.exits, 90)))
		if w.kind != "flock" && ref != nil {
			line += fmt.Sprintf(" %8.2fx %8.2fx", ratio(d.holds, ref.holds, 50), ratio(d.holds, ref.holds, 90))
		} else {
			line += fmt.Sprintf(" %9s %9s", "", "")
		}
		line += fmt.Sprintf(" %8.2f %8.2f %10.2f %7.2f", ms(percentile(d.release, 50)), ms(percentile(d.after, 50)),
			ms(percentile(d.afterExit, 50)), ms(percentile(d.afterExit, 90)))
		fmt.Println(line)
	}
	if base != "" {
		for _, k := range only {
			if k != "flock" {
				fmt.Printf("%s over %s@base, medians: holds %.2fx, exits %.2fx\n", k, k,
					ratio(got[k].holds, got[k+"@base"].holds, 50), ratio(got[k].exits, got[k+"@base"].exits, 50))
			}
		}
	}
	if check {
		if ref == nil {
			return fmt.Errorf("-check needs flock among -only")
		}
		failed := false
		for _, w := range waiters {
			target, gated := targets[w.name]
			if !gated {
				continue
			}
			d := got[w.name]
			for _, r := range []struct {
				what string
				got  float64
			}{{"holds", ratio(d.holds, ref.holds, 50)}, {"exits", ratio(d.exits, ref.exits, 50)}} {
				verdict := "ok"
				if r.got > 1.5*target {
					verdict, failed = "FAIL", true
				}
				fmt.Printf("check: %s %s %.2fx flock, target %.2fx, limit %.2fx: %s\n", w.name, r.what, r.got, target, 1.5*target, verdict)
			}
		}
		if failed {
			return fmt.Errorf("a hand-off is more than 50 %% over its target")
		}
	}
	if pollN > 0 {
		return b.polling(pollN)
	}
	return nil
}

func ratio(a, b []time.Duration, q float64) float64 {
	return float64(percentile(a, q)) / float64(percentile(b, q))
}

// waiter starts a waiter and returns a channel of its first line of output.
func (b *bench) waiter(name string, args ...string) (*exec.Cmd, <-chan string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = b.env
	cmd.Stderr = io.Discard
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
		_, _ = io.Copy(io.Discard, stdout)
	}()
	return cmd, line, nil
}

// pause lets the waiter settle into its wait; a waiter that printed
// before the release is an error.
func (b *bench) pause(line <-chan string) error {
	select {
	case s := <-line:
		return fmt.Errorf("the waiter printed %q before the release", s)
	case <-time.After(b.settle + rand.N(b.settle)):
		return nil
	}
}

func (b *bench) flock(string) (time.Duration, error) {
	path := filepath.Join(b.work, "flock")
	var release func() error
	if b.cli {
		holder := exec.Command("flock", path, "cat")
		in, err := holder.StdinPipe()
		if err != nil {
			return 0, err
		}
		if err := holder.Start(); err != nil {
			return 0, err
		}
		defer holder.Wait()
		if err := waitLocked(path); err != nil {
			in.Close()
			return 0, err
		}
		release = func() error { in.Close(); return holder.Wait() }
	} else {
		f, err := os.Open(path)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			return 0, err
		}
		release = func() error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
	}
	cmd, line, err := b.waiter("flock", path, "echo", "held")
	if err != nil {
		return 0, err
	}
	return b.handoff(cmd, line, release, func(s string) error {
		if s != "held\n" {
			return fmt.Errorf("flock printed %q", s)
		}
		return nil
	})
}

// waitLocked waits until path's flock is taken by another process.
func waitLocked(path string) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		f.Close()
		if err != nil {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("the flock holder never locked")
}

// handoff releases, times until the waiter's first line, checks it, and
// waits for the waiter to end.
func (b *bench) handoff(cmd *exec.Cmd, line <-chan string, release func() error, check func(string) error) (time.Duration, error) {
	if err := b.pause(line); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return 0, err
	}
	start := time.Now()
	if err := release(); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return 0, fmt.Errorf("release: %w", err)
	}
	released := time.Since(start)
	s := <-line
	elapsed := time.Since(start)
	if err := check(s); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return 0, err
	}
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("waiter: %w (%q)", err, s)
	}
	b.parts = append(b.parts, parts{released, time.Since(start) - elapsed})
	return elapsed, nil
}

func (b *bench) holdLease(bin, kind string) (func() error, error) {
	ctx := context.Background()
	acq, err := b.st.Acquire(ctx, lease.Request{Kind: kind, Owner: "holder", TTLMinutes: 10})
	if err != nil {
		return nil, fmt.Errorf("holder acquire: %w", err)
	}
	ref := acq.Record.Ref()
	if b.cli {
		return func() error {
			return b.run(bin+"/lease", "release", "--kind", kind, "--owner", ref.Owner, "--token", ref.Token)
		}, nil
	}
	return func() error { _, err := b.st.Release(ctx, ref); return err }, nil
}

func (b *bench) run(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Env = b.env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", filepath.Base(name), err, out)
	}
	return nil
}

func (b *bench) lease(bin string) (time.Duration, error) {
	release, err := b.holdLease(bin, "baton")
	if err != nil {
		return 0, err
	}
	cmd, line, err := b.waiter(bin+"/lease", "acquire", "--kind", "baton", "--owner", "waiter", "--ttl", "10", "--wait-ms", "600000")
	if err != nil {
		return 0, err
	}
	var token string
	d, err := b.handoff(cmd, line, release, func(s string) error {
		var got struct{ Record struct{ Token string } }
		if err := json.Unmarshal([]byte(s), &got); err != nil || got.Record.Token == "" {
			return fmt.Errorf("lease acquire printed %q", s)
		}
		token = got.Record.Token
		return nil
	})
	if err != nil {
		return 0, err
	}
	_, err = b.st.Release(context.Background(), lease.Ref{Kind: "baton", Owner: "waiter", Token: token})
	return d, err
}

func (b *bench) poolRun(bin string) (time.Duration, error) {
	release, err := b.holdLease(bin, "gate")
	if err != nil {
		return 0, err
	}
	cmd, line, err := b.waiter(bin+"/pool-run", "--kind", "gate", "--owner", "waiter", "--ttl", "10", "--", "echo", "held")
	if err != nil {
		return 0, err
	}
	return b.handoff(cmd, line, release, func(s string) error {
		if s != "held\n" {
			return fmt.Errorf("pool-run's work printed %q", s)
		}
		return nil
	})
}

func (b *bench) pool(bin string) (time.Duration, error) {
	ctx := context.Background()
	g, err := b.p.Acquire(ctx, pool.AcquireRequest{Owner: "holder", NoWait: true})
	if err != nil {
		return 0, fmt.Errorf("holder acquire: %w", err)
	}
	release := func() error {
		_, err := b.p.Release(ctx, fmt.Sprint(g.Slot), g.Owner, g.Token, false)
		return err
	}
	if b.cli {
		release = func() error {
			return b.run(bin+"/pool", "release", "--slot", fmt.Sprint(g.Slot), "--owner", g.Owner, "--token", g.Token)
		}
	}
	cmd, line, err := b.waiter(bin+"/pool", "acquire", "--owner", "waiter")
	if err != nil {
		return 0, err
	}
	if err := waitQueued(b.p); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return 0, err
	}
	var token string
	d, err := b.handoff(cmd, line, release, func(s string) error {
		var grant struct{ Token string }
		if err := json.Unmarshal([]byte(s), &grant); err != nil || grant.Token == "" {
			return fmt.Errorf("pool acquire printed %q", s)
		}
		token = grant.Token
		return nil
	})
	if err != nil {
		return 0, err
	}
	_, err = b.p.Release(ctx, "1", "waiter", token, false)
	return d, err
}

// polling measures a waiter that polls `pool acquire --no-wait` at the
// pool's default interval, released at a random phase of it.
func (b *bench) polling(n int) error {
	pollMs := int(pool.DefaultPoll / time.Millisecond)
	script := fmt.Sprintf(`until out=$("%s" acquire --no-wait --owner waiter 2>/dev/null); do sleep %s; done; printf '%%s\n' "$out"`,
		b.bin+"/pool", strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", float64(pollMs)/1000), "0"), "."))
	ctx := context.Background()
	var out []time.Duration
	for i := 0; i < n; i++ {
		g, err := b.p.Acquire(ctx, pool.AcquireRequest{Owner: "holder", NoWait: true})
		if err != nil {
			return err
		}
		cmd, line, err := b.waiter("sh", "-c", script)
		if err != nil {
			return err
		}
		time.Sleep(50*time.Millisecond + rand.N(time.Duration(pollMs)*time.Millisecond))
		var token string
		d, err := b.handoff(cmd, line, func() error {
			_, err := b.p.Release(ctx, fmt.Sprint(g.Slot), g.Owner, g.Token, false)
			return err
		}, func(s string) error {
			var grant struct{ Token string }
			if err := json.Unmarshal([]byte(s), &grant); err != nil || grant.Token == "" {
				return fmt.Errorf("the poller printed %q", s)
			}
			token = grant.Token
			return nil
		})
		if err != nil {
			return err
		}
		if _, err := b.p.Release(ctx, "1", "waiter", token, false); err != nil {
			return err
		}
		out = append(out, d)
	}
	fmt.Printf("%-9s n=%-3d median %6.2f ms  p90 %6.2f ms  (polling --no-wait every %d ms)\n", "polling", len(out),
		ms(percentile(out, 50)), ms(percentile(out, 90)), pollMs)
	return nil
}

// waitQueued waits until the pool's queue has an entry.
func waitQueued(p *pool.Pool) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		st, err := p.Status(context.Background())
		if err != nil {
			return err
		}
		if len(st.Queue) > 0 {
			return nil
		}
		time.Sleep(2 * time.Millisecond)
	}
	return fmt.Errorf("the waiter never queued")
}

func loadavg() [3]float64 {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err == nil {
		fmt.Sscan(string(b), &l[0], &l[1], &l[2])
	}
	return l
}

func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q / 100 * float64(len(s)-1))
	return s[i]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
