package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
)

// Roles of the test binary when a test re-runs it as a racing client.
const (
	envRole  = "ETCDSTORE_TEST_ROLE"
	envURL   = "ETCDSTORE_TEST_URL"
	envStart = "ETCDSTORE_TEST_START_MS"
	envOwner = "ETCDSTORE_TEST_OWNER"
)

func TestMain(m *testing.M) {
	if os.Getenv(envRole) == "acquire" {
		os.Exit(racer())
	}
	// Most tests wait on etcd lease TTLs and watches rather than
	// compute: more of them at once than there are cores (35 s against
	// 17 s under -race on 2 cores).
	testrun.Main(m, testrun.Parallel(8))
}

// racer is one racing process: open, wait for the common start instant,
// try to acquire, print "won <fence>" or "lost".
func racer() int {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := etcdstore.NewBackend(ctx, os.Getenv(envURL), etcdstore.Options{})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer b.Close()
	ms, _ := strconv.ParseInt(os.Getenv(envStart), 10, 64)
	late := ""
	if wait := time.Until(time.UnixMilli(ms)); wait > 0 {
		time.Sleep(wait)
	} else {
		late = " late"
	}
	rec, err := acquire(ctx, b, "slot", os.Getenv(envOwner), 15)
	switch {
	case errors.Is(err, errHeld):
		fmt.Println("lost" + late)
	case err != nil:
		fmt.Println("error", err)
		return 1
	default:
		fmt.Println("won"+late, rec.Fence)
	}
	return 0
}

// TestRacingGoroutines: clients racing for one kind, each on its own
// connection, get exactly one winner per round, and the winners' fences
// grow round after round.
func TestRacingGoroutines(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	const racers, rounds = 12, 4
	bs := make([]*etcdstore.Backend, racers)
	for i := range bs {
		bs[i] = open(t, c, etcdstore.Options{})
	}
	ctx := context.Background()
	var last int64
	for round := range rounds {
		type result struct {
			i     int
			fence int64
			token string
			err   error
		}
		results := make(chan result, racers)
		var start sync.WaitGroup
		start.Add(1)
		for i, b := range bs {
			go func() {
				start.Wait()
				rec, err := acquire(ctx, b, "slot", fmt.Sprintf("agent-%d", i), 15)
				if err != nil {
					results <- result{i: i, err: err}
					return
				}
				results <- result{i: i, fence: rec.Fence, token: rec.Token}
			}()
		}
		start.Done()
		var winners []result
		for range racers {
			r := <-results
			switch {
			case r.err == nil:
				winners = append(winners, r)
			case !errors.Is(r.err, errHeld):
				t.Errorf("round %d racer %d: %v", round, r.i, r.err)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d winners %+v; want 1", round, len(winners), winners)
		}
		w := winners[0]
		if w.fence <= last {
			t.Errorf("round %d: fence %d after %d; want it to grow", round, w.fence, last)
		}
		last = w.fence
		if err := release(ctx, bs[w.i], "slot", w.token); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRacingProcesses: processes (this test binary, re-run) racing for one
// kind from their own clients get exactly one winner.
func TestRacingProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Parallel()
	c := etcdtest.Start(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const racers = 6
	start := time.Now().Add(1500 * time.Millisecond).UnixMilli()
	cmds := make([]*exec.Cmd, racers)
	outs := make([]*strings.Builder, racers)
	for i := range cmds {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), envRole+"=acquire", envURL+"="+c.URL(testPrefix(t)),
			envStart+"="+strconv.FormatInt(start, 10), envOwner+"="+fmt.Sprintf("proc-%d", i))
		outs[i] = &strings.Builder{}
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	won, late := 0, 0
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("racer %d: %v: %s", i, err, outs[i])
			continue
		}
		out := strings.TrimSpace(outs[i].String())
		if strings.Contains(out, " late") {
			late++
			out = strings.Replace(out, " late", "", 1)
		}
		switch {
		case strings.HasPrefix(out, "won "):
			won++
		case out != "lost":
			t.Errorf("racer %d said %q", i, out)
		}
	}
	if won != 1 {
		t.Errorf("%d winners among %d processes; want 1", won, racers)
	}
	if late > 0 {
		t.Logf("%d of %d racers were ready only after the start instant", late, racers)
	}
}

// TestFencesAcrossHolders: fences grow across holders, whatever happens
// to the kind in between (a release, an expiry and a takeover, writes to
// other kinds), and a renewal keeps the holder's.
func TestFencesAcrossHolders(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	a, b2 := open(t, c, etcdstore.Options{}), open(t, c, etcdstore.Options{})
	ctx := context.Background()
	var fences []int64
	take := func(b *etcdstore.Backend, owner string, ttl float64) string {
		t.Helper()
		rec, err := acquire(ctx, b, "deploy", owner, ttl)
		if err != nil {
			t.Fatalf("%s: %v", owner, err)
		}
		fences = append(fences, rec.Fence)
		return rec.Token
	}
	tok := take(a, "a", 15)
	if r, err := renew(ctx, a, "deploy", tok); err != nil || r.Fence != fences[0] {
		t.Fatalf("renew = %+v, %v; want fence %d", r, err, fences[0])
	}
	if err := release(ctx, a, "deploy", tok); err != nil {
		t.Fatal(err)
	}
	if _, err := acquire(ctx, a, "other", "a", 15); err != nil {
		t.Fatal(err)
	}
	wake, err := b2.Watch(ctx, "deploy")
	if err != nil {
		t.Fatal(err)
	}
	take(b2, "b", 0.001)
	waitWake(t, wake, 10*time.Second, "b's etcd lease's TTL")
	tok = take(a, "c", 15) // a takeover
	if err := release(ctx, a, "deploy", tok); err != nil {
		t.Fatal(err)
	}
	take(b2, "d", 15)
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Errorf("fences %v; want strictly increasing", fences)
		}
	}
}
