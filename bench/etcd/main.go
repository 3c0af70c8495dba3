//go:build ignore

// The build tag keeps this benchmark out of `go install ./...`, which
// pre-commit runs to install the repository's commands. bench/etcd.sh
// builds it by file name (go build -o BIN bench/etcd/main.go).

// Command etcd is bench/etcd.sh's helper for leases on etcd. It has two
// jobs:
//
//	etcd prep -store URL -kind K -free
//	etcd prep -store URL -kind K -held FILE
//
// hyperfine's untimed --prepare step: make K free (delete its record
// through the etcd backend, which also revokes its etcd lease), or make it
// held by the record in FILE (the output of one `lease acquire`, whose
// record, token included, is stored again through the backend as a new
// acquisition), so that a timed `lease acquire` always finds K free and a
// timed `lease release --token T` always finds it held under T.
//
//	etcd handoff -store URL -endpoints HOST:PORT -bin DIR [-rounds 30]
//
// Hand-off latency, release to next holder: this process holds a lock,
// starts one waiter process, lets it settle, releases, and stops the clock
// when the waiter prints that it holds the lock. Two kinds of waiter take
// turns, round by round, on the same etcd:
//
//   - `lease --store URL acquire --wait-ms ...` behind a lease this
//     process holds through the library (package lease on package
//     etcdstore) and gives back with Store.Release;
//   - `etcdctl lock NAME` behind an etcd mutex this process holds through
//     the client's concurrency package (the mutex etcdctl itself uses) and
//     gives back with Mutex.Unlock; etcdctl prints the lock's key once it
//     holds it.
//
// The clock starts just before the release call, so the release itself is
// in the hand-off, and stops when the waiter's first line is read (stamped
// by the reading goroutine). It prints a markdown table.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/lease"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: etcd prep|handoff FLAGS")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "prep":
		err = prep(os.Args[2:])
	case "handoff":
		err = handoff(os.Args[2:])
	default:
		err = fmt.Errorf("unknown job %q: want prep or handoff", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/etcd:", err)
		os.Exit(1)
	}
}

func openStore(ctx context.Context, url string) (*etcdstore.Backend, *lease.Store, error) {
	b, err := etcdstore.NewBackend(ctx, url, etcdstore.OptionsFromEnv(os.Getenv))
	if err != nil {
		return nil, nil, err
	}
	st, err := lease.New(b)
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	return b, st, nil
}

func prep(args []string) error {
	fs := flag.NewFlagSet("prep", flag.ExitOnError)
	url := fs.String("store", "", "etcd:// store URL")
	kind := fs.String("kind", "", "lease kind")
	free := fs.Bool("free", false, "make the kind free")
	held := fs.String("held", "", "make the kind held by the record in this `lease acquire` output")
	fs.Parse(args)
	if *url == "" || *kind == "" || *free == (*held != "") {
		return errors.New("prep: want -store, -kind and one of -free, -held FILE")
	}
	var rec *lease.Record
	if *held != "" {
		data, err := os.ReadFile(*held)
		if err != nil {
			return err
		}
		var out struct {
			Record json.RawMessage `json:"record"`
		}
		if err := json.Unmarshal(data, &out); err != nil || len(out.Record) == 0 {
			return fmt.Errorf("prep: no record in %s (%v)", *held, err)
		}
		rec = lease.DecodeRecord(*kind, out.Record)
		if rec == nil || rec.Corrupt || rec.Token == "" {
			return fmt.Errorf("prep: the record in %s does not decode", *held)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, _, err := openStore(ctx, *url)
	if err != nil {
		return err
	}
	defer b.Close()
	_, err = b.Update(ctx, *kind, func(cur *lease.Record) (lease.Change, error) {
		if rec == nil {
			if cur == nil {
				return lease.Change{}, nil
			}
			return lease.Change{Op: lease.OpDelete}, nil
		}
		if cur != nil {
			return lease.Change{}, fmt.Errorf("prep: %s is not free (held by %q)", *kind, cur.Owner)
		}
		return lease.Change{Op: lease.OpAcquire, Record: rec}, nil
	})
	return err
}

// waiter is one waiting process; its first stdout line arrives on got,
// stamped when it was read.
type waiter struct {
	cmd    *exec.Cmd
	got    chan stamped
	stderr *bytes.Buffer
}

type stamped struct {
	text string
	at   time.Time
	err  error
}

func start(name string, args ...string) (*waiter, error) {
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr // read only after Wait
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w := &waiter{cmd: cmd, got: make(chan stamped, 1), stderr: &stderr}
	go func() {
		s, err := bufio.NewReader(stdout).ReadString('\n')
		w.got <- stamped{s, time.Now(), err}
	}()
	return w, nil
}

// settle waits for the waiter to get into its wait; it fails if the
// waiter got the lock (or ended) while it was still held.
func (w *waiter) settle(d time.Duration) error {
	select {
	case s := <-w.got:
		return fmt.Errorf("the waiter printed %q (%v) before the release; stderr: %s", s.text, s.err, w.kill())
	case <-time.After(d + rand.N(d)):
		return nil
	}
}

func (w *waiter) next(t0 time.Time) (string, time.Duration, error) {
	select {
	case s := <-w.got:
		if s.err != nil {
			return "", 0, fmt.Errorf("waiter: %v (%q); stderr: %s", s.err, s.text, w.kill())
		}
		return s.text, s.at.Sub(t0), nil
	case <-time.After(30 * time.Second):
		return "", 0, fmt.Errorf("the waiter did not get the lock within 30 s of the release; stderr: %s", w.kill())
	}
}

func (w *waiter) stop(sig syscall.Signal) error {
	if sig != 0 {
		_ = w.cmd.Process.Signal(sig)
	}
	done := make(chan error, 1)
	go func() { done <- w.cmd.Wait() }()
	select {
	case err := <-done:
		if sig != 0 {
			return nil // killed on purpose
		}
		if err != nil {
			return fmt.Errorf("%v: %s", err, strings.TrimSpace(w.stderr.String()))
		}
		return nil
	case <-time.After(10 * time.Second):
		_ = w.cmd.Process.Kill()
		<-done
		return errors.New("the waiter did not exit")
	}
}

// kill ends the waiter and returns what it wrote to stderr.
func (w *waiter) kill() string {
	w.stop(syscall.SIGKILL)
	return strings.TrimSpace(w.stderr.String())
}

type sample struct {
	handoff, release time.Duration
}

func handoff(args []string) error {
	fs := flag.NewFlagSet("handoff", flag.ExitOnError)
	url := fs.String("store", "", "etcd:// store URL")
	endpoints := fs.String("endpoints", "", "etcd client endpoint(s), comma-separated, for etcdctl and the mutex")
	bin := fs.String("bin", "", "directory holding the lease and durable-lease-etcd binaries")
	etcdctl := fs.String("etcdctl", "/usr/bin/etcdctl", "etcdctl binary")
	rounds := fs.Int("rounds", 30, "hand-offs per kind of waiter")
	settle := fs.Duration("settle", 200*time.Millisecond, "pause before each release (plus a random part of the same length)")
	kind := fs.String("kind", "bench-handoff", "lease kind")
	lockName := fs.String("lock", "bench-handoff-lock", "etcdctl lock name")
	fs.Parse(args)
	if *url == "" || *endpoints == "" || *bin == "" || *rounds < 1 {
		return errors.New("handoff: want -store, -endpoints, -bin and -rounds >= 1")
	}
	ctx := context.Background()
	b, st, err := openStore(ctx, *url)
	if err != nil {
		return err
	}
	defer b.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(*endpoints, ","), DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(60))
	if err != nil {
		return err
	}
	defer sess.Close()
	mu := concurrency.NewMutex(sess, *lockName)
	lcli := filepath.Join(*bin, "lease")

	leaseRound := func() (sample, error) {
		acq, err := st.Acquire(ctx, lease.Request{Kind: *kind, Owner: "holder", TTLMinutes: 10})
		if err != nil {
			return sample{}, fmt.Errorf("holder acquire: %w", err)
		}
		w, err := start(lcli, "--store", *url, "acquire", "--kind", *kind, "--owner", "waiter", "--ttl", "10", "--wait-ms", "60000")
		if err != nil {
			return sample{}, err
		}
		if err := w.settle(*settle); err != nil {
			return sample{}, err
		}
		t0 := time.Now()
		if _, err := st.Release(ctx, acq.Record.Ref()); err != nil {
			w.stop(syscall.SIGKILL)
			return sample{}, fmt.Errorf("holder release: %w", err)
		}
		rel := time.Since(t0)
		text, d, err := w.next(t0)
		if err != nil {
			return sample{}, err
		}
		if err := w.stop(0); err != nil {
			return sample{}, fmt.Errorf("waiter: %v (%s)", err, text)
		}
		var out struct {
			Code   string `json:"code"`
			Record struct {
				Token string `json:"token"`
			} `json:"record"`
		}
		if err := json.Unmarshal([]byte(text), &out); err != nil || out.Code != "acquired" || out.Record.Token == "" {
			return sample{}, fmt.Errorf("the waiter printed %q, not an acquisition", text)
		}
		if _, err := st.Release(ctx, lease.Ref{Kind: *kind, Owner: "waiter", Token: out.Record.Token}); err != nil {
			return sample{}, fmt.Errorf("releasing the waiter's lease: %w", err)
		}
		return sample{d, rel}, nil
	}

	etcdctlRound := func() (sample, error) {
		if err := mu.Lock(ctx); err != nil {
			return sample{}, fmt.Errorf("holder lock: %w", err)
		}
		w, err := start(*etcdctl, "--endpoints="+*endpoints, "lock", *lockName)
		if err != nil {
			return sample{}, err
		}
		if err := w.settle(*settle); err != nil {
			return sample{}, err
		}
		// The waiter must be queued behind the holder: two keys under the
		// lock's prefix, the holder's first.
		resp, err := cli.Get(ctx, *lockName+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		if err != nil || len(resp.Kvs) != 2 || string(resp.Kvs[0].Key) != mu.Key() {
			w.stop(syscall.SIGKILL)
			return sample{}, fmt.Errorf("the etcdctl waiter is not queued behind the holder (%v)", err)
		}
		waiterKey := string(resp.Kvs[1].Key)
		t0 := time.Now()
		if err := mu.Unlock(ctx); err != nil {
			w.stop(syscall.SIGKILL)
			return sample{}, fmt.Errorf("holder unlock: %w", err)
		}
		rel := time.Since(t0)
		text, d, err := w.next(t0)
		if err != nil {
			return sample{}, err
		}
		if strings.TrimSpace(text) != waiterKey {
			w.stop(syscall.SIGKILL)
			return sample{}, fmt.Errorf("etcdctl printed %q, not its key %q", text, waiterKey)
		}
		// etcdctl unlocks on SIGTERM and exits; wait until it has.
		w.stop(syscall.SIGTERM)
		for i := 0; ; i++ {
			resp, err := cli.Get(ctx, *lockName+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err == nil && resp.Count == 0 {
				break
			}
			if i > 200 {
				return sample{}, errors.New("etcdctl left its lock key behind")
			}
			time.Sleep(10 * time.Millisecond)
		}
		return sample{d, rel}, nil
	}

	names := []string{"`lease acquire --wait-ms` on etcd", "`etcdctl lock NAME`"}
	fns := []func() (sample, error){leaseRound, etcdctlRound}
	got := make([][]sample, 2)
	for r := 0; r < *rounds; r++ {
		order := []int{0, 1}
		if r%2 == 1 {
			order = []int{1, 0} // neither always goes first
		}
		for _, i := range order {
			s, err := fns[i]()
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, names[i], err)
			}
			got[i] = append(got[i], s)
		}
		fmt.Fprintf(os.Stderr, "hand-off round %d/%d: lease %.2f ms, etcdctl %.2f ms\n", r+1, *rounds,
			ms(got[0][r].handoff), ms(got[1][r].handoff))
	}
	fmt.Println("| waiter | hand-offs | median | p90 | min | max | release call, median |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for i, name := range names {
		h := col(got[i], func(s sample) time.Duration { return s.handoff })
		rel := col(got[i], func(s sample) time.Duration { return s.release })
		fmt.Printf("| %s | %d | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %.2f ms |\n", name, len(h),
			ms(percentile(h, 50)), ms(percentile(h, 90)), ms(percentile(h, 0)), ms(percentile(h, 100)), ms(percentile(rel, 50)))
	}
	l := col(got[0], func(s sample) time.Duration { return s.handoff })
	e := col(got[1], func(s sample) time.Duration { return s.handoff })
	fmt.Printf("\nhand-off, lease / etcdctl: median %.2fx, p90 %.2fx\n",
		float64(percentile(l, 50))/float64(percentile(e, 50)), float64(percentile(l, 90))/float64(percentile(e, 90)))
	return nil
}

func col(s []sample, f func(sample) time.Duration) []time.Duration {
	out := make([]time.Duration, len(s))
	for i, x := range s {
		out[i] = f(x)
	}
	return out
}

// percentile is the nearest-rank q-th percentile (q in 0..100).
func percentile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(q/100*float64(len(s)-1)+0.5)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
