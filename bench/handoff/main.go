//go:build ignore

// Run it with `go run bench/handoff/main.go`: the build tag keeps this
// benchmark out of `go install ./...`, which pre-commit runs to install the
// repository's commands.

// Command handoff measures how long a freed pool slot takes to reach the
// next waiter: from the holder's release to the waiter's grant on stdout.
//
// It compares, in one run on one machine, a blocking `pool acquire` waiter
// (which wakes on file events) with a pure polling waiter that retries
// `pool acquire --no-wait` at the pool's default poll interval. Run it from
// the repository root:
//
//	go run ./bench/handoff -n 100 -poll-n 20
//
// It builds the pool CLI into a temporary directory and works in another.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	_ "github.com/durable-lease/durable-lease/dirstore/dirpool" // a directory store's pools
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/pool"
)

func main() {
	n := flag.Int("n", 100, "hand-offs to a blocking waiter")
	pollN := flag.Int("poll-n", 20, "hand-offs to a polling waiter (each takes about half the poll interval)")
	pollMs := flag.Int("poll-ms", int(pool.DefaultPoll/time.Millisecond), "the polling waiter's interval")
	flag.Parse()
	if err := run(*n, *pollN, *pollMs); err != nil {
		fmt.Fprintln(os.Stderr, "handoff:", err)
		os.Exit(1)
	}
}

func run(n, pollN, pollMs int) error {
	tmp, err := os.MkdirTemp("", "handoff-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "pool")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/pool").CombinedOutput(); err != nil {
		return fmt.Errorf("building the pool CLI (run from the repository root): %v\n%s", err, out)
	}
	poolFile := filepath.Join(tmp, "pool.json")
	if err := os.WriteFile(poolFile, []byte(`{"slots":[{"id":1}]}`), 0o666); err != nil {
		return err
	}
	store := filepath.Join(tmp, "store")
	st, err := dirstore.Open(store)
	if err != nil {
		return err
	}
	cfg, err := pool.LoadFile(poolFile)
	if err != nil {
		return err
	}
	p, err := pool.Open(st, cfg, pool.Options{})
	if err != nil {
		return err
	}
	env := append(os.Environ(), "LEASE_STORE="+store, "LEASE_POOL_FILE="+poolFile)

	blocking, err := measure(p, n, func() *exec.Cmd {
		return exec.Command(bin, "acquire", "--owner", "waiter")
	}, env, true, 100*time.Millisecond)
	if err != nil {
		return fmt.Errorf("blocking waiter: %w", err)
	}
	report("blocking acquire (file events)", blocking)
	if pollN > 0 {
		script := fmt.Sprintf(`until out=$("%s" acquire --no-wait --owner waiter 2>/dev/null); do sleep %s; done; printf '%%s\n' "$out"`,
			bin, strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", float64(pollMs)/1000), "0"), "."))
		polling, err := measure(p, pollN, func() *exec.Cmd { return exec.Command("sh", "-c", script) }, env, false,
			time.Duration(pollMs)*time.Millisecond)
		if err != nil {
			return fmt.Errorf("polling waiter: %w", err)
		}
		report(fmt.Sprintf("polling --no-wait every %d ms", pollMs), polling)
		fmt.Printf("ratio of medians (polling / blocking): %.0fx\n",
			float64(percentile(polling, 50))/float64(percentile(blocking, 50)))
	}
	return nil
}

// measure runs rounds hand-offs: the bench holds the slot, starts a waiter,
// lets it settle into its wait for 50 ms plus a random part of spread (for a
// poller, a random phase of its interval), releases, and times until the
// waiter prints its grant.
func measure(p *pool.Pool, rounds int, waiter func() *exec.Cmd, env []string, queued bool, spread time.Duration) ([]time.Duration, error) {
	ctx := context.Background()
	var out []time.Duration
	for i := 0; i < rounds; i++ {
		g, err := p.Acquire(ctx, pool.AcquireRequest{Owner: "holder", NoWait: true})
		if err != nil {
			return nil, fmt.Errorf("round %d: holder acquire: %w", i, err)
		}
		cmd := waiter()
		cmd.Env = env
		cmd.Stderr = io.Discard
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		if queued {
			if err := waitQueued(p); err != nil {
				_ = cmd.Process.Kill()
				return nil, err
			}
		}
		time.Sleep(50*time.Millisecond + rand.N(spread))
		line := make(chan string, 1)
		go func() {
			s, _ := bufio.NewReader(stdout).ReadString('\n')
			line <- s
		}()
		start := time.Now()
		if _, err := p.Release(ctx, fmt.Sprint(g.Slot), g.Owner, g.Token, false); err != nil {
			return nil, fmt.Errorf("round %d: release: %w", i, err)
		}
		text := <-line
		elapsed := time.Since(start)
		if err := cmd.Wait(); err != nil {
			return nil, fmt.Errorf("round %d: waiter: %w (%s)", i, err, text)
		}
		var grant struct{ Token string }
		if err := json.Unmarshal([]byte(text), &grant); err != nil || grant.Token == "" {
			return nil, fmt.Errorf("round %d: waiter printed %q", i, text)
		}
		if _, err := p.Release(ctx, "1", "waiter", grant.Token, false); err != nil {
			return nil, fmt.Errorf("round %d: waiter release: %w", i, err)
		}
		out = append(out, elapsed)
	}
	return out, nil
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

func percentile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q / 100 * float64(len(s)-1))
	return s[i]
}

func report(name string, d []time.Duration) {
	fmt.Printf("%-34s n=%-4d median %8.2f ms   p99 %8.2f ms   min %8.2f ms   max %8.2f ms\n", name, len(d),
		ms(percentile(d, 50)), ms(percentile(d, 99)), ms(percentile(d, 0)), ms(percentile(d, 100)))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
