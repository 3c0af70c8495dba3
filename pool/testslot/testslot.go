// Package testslot lets a Go test binary hold one slot of a pool for its
// whole run. go test ./... runs the test binaries of several packages at
// once; packages whose tests need a resource of their own (a database, a
// port) each take a slot of the same pool file in TestMain, and so never
// share one, whatever else (pool-run, another clone's go test) takes
// slots of that pool on the host:
//
//	func TestMain(m *testing.M) {
//		os.Exit(testslot.Main(m, "../testdata/dbs.json"))
//	}
//
// The tests then read the grant's environment (the pool file's grantEnv,
// such as DATABASE_URL) with os.Getenv, as a command under pool-run does.
package testslot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/durable-lease/durable-lease/dirstore"
	"github.com/durable-lease/durable-lease/dirstore/dirpool"
	"github.com/durable-lease/durable-lease/lease"
	"github.com/durable-lease/durable-lease/pool"
)

// ExitLost is the status [Main] exits with when the slot is lost while
// the tests run (pool-run's for the same case): whatever they were doing
// with the slot's resource may now collide with its next holder.
const ExitLost = 75

// M is what Main runs: a *testing.M.
type M interface{ Run() int }

// Option changes how [Main] takes its slot. It has [lease.Option]'s
// shape: an option that refuses its input makes Main fail before it
// takes anything.
type Option func(*options) error

type options struct {
	owner  string
	wait   time.Duration
	stderr io.Writer
}

// WithOwner makes owner the slot's holder, as pool status shows it. The
// default is "gotest@" and the name of the package's directory.
// It must not be empty (the store checks it against its owner pattern).
func WithOwner(owner string) Option {
	return func(o *options) error {
		if owner == "" {
			return errors.New("testslot: WithOwner: an empty owner")
		}
		o.owner = owner
		return nil
	}
}

// WithWait bounds the wait for a free slot; past it Main fails without
// running the tests. It must be positive; the default waits as long as it
// takes.
func WithWait(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("testslot: WithWait(%s): want a positive bound", d)
		}
		o.wait = d
		return nil
	}
}

// Main takes a slot of the pool file poolFile (relative to the package's
// directory, where go test runs its tests), waiting in the pool's queue,
// runs the pool's provision and health commands, puts the grant's
// environment and POOL_RUN_SLOT, POOL_RUN_OWNER and POOL_RUN_FENCE into
// this process's environment, runs m, gives the slot back and returns m's
// status. The slot's lease is heartbeated meanwhile; if it is lost
// anyway, the process exits at once with [ExitLost]. SIGINT and SIGTERM
// give the slot back and exit with 128 + the signal's number. Failing to
// take a slot, it says why on stderr and returns 1 (3 for a pool file,
// store or option it cannot use) without running the tests.
//
// The store is the one pool-run uses for the pool file: LEASE_STORE, else
// the file's "store", else the user's store of the host; a directory
// store only.
func Main(m M, poolFile string, opts ...Option) int {
	o := options{stderr: os.Stderr, owner: defaultOwner()}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			fmt.Fprintln(o.stderr, err)
			return 3
		}
	}
	// SIGINT or SIGTERM (a Ctrl-C, go test's own end) ends the wait, or
	// gives the slot back and exits with the signal's status.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got os.Signal
	stopped := make(chan struct{})
	go func() {
		select {
		case got = <-sigs:
			cancel()
		case <-stopped:
		}
	}()
	s, err := take(ctx, poolFile, o)
	if err != nil {
		fmt.Fprintf(o.stderr, "testslot: %s: %v\n", poolFile, err)
		switch {
		case ctx.Err() != nil:
			close(stopped)
			return 128 + int(got.(syscall.Signal))
		case errors.Is(err, pool.ErrConfig), errors.Is(err, lease.ErrInvalid):
			return 3
		}
		return 1
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-s.hold.Done():
			fmt.Fprintf(o.stderr, "testslot: slot %v of %s lost (%v): stopping the tests\n", s.grant.Slot, poolFile, s.hold.Err())
			os.Exit(ExitLost)
		case <-ctx.Done():
			s.hold.Release(context.Background())
			os.Exit(128 + int(got.(syscall.Signal)))
		case <-done:
		}
	}()
	code := m.Run()
	close(done)
	if err := s.hold.Release(context.Background()); err != nil {
		fmt.Fprintf(o.stderr, "testslot: giving slot %v of %s back: %v\n", s.grant.Slot, poolFile, err)
		if errors.Is(err, lease.ErrLost) && code == 0 {
			return ExitLost
		}
	}
	return code
}

// held is a slot taken and kept.
type held struct {
	grant *pool.Grant
	hold  *lease.Hold
}

// take opens the pool, takes a slot, keeps it and exports its grant.
func take(ctx context.Context, poolFile string, o options) (*held, error) {
	cfg, err := pool.LoadFile(poolFile)
	if err != nil {
		return nil, err
	}
	named, err := pool.StoreFor(os.Getenv("LEASE_STORE"), cfg)
	if err != nil {
		return nil, err
	}
	if lease.IsStoreURL(named) {
		return nil, fmt.Errorf("%w: store %s: testslot opens directory stores only", lease.ErrInvalid, named)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	where, err := dirstore.ResolveStore(named, "", cwd)
	if err != nil {
		return nil, err
	}
	store, err := dirstore.Open(where)
	if err != nil {
		return nil, err
	}
	if err := dirpool.ClaimHostStore(dirpool.RegistryFrom(os.Getenv), cfg, store.Dir(), named == "", time.Now(), true); err != nil {
		return nil, err
	}
	p, err := pool.Open(store, cfg, pool.Options{Log: o.stderr})
	if err != nil {
		return nil, err
	}
	g, err := p.Acquire(ctx, pool.AcquireRequest{Owner: o.owner, Wait: o.wait})
	if err != nil {
		return nil, err
	}
	h, err := p.Keep(context.Background(), g, lease.HoldOptions{})
	if err != nil {
		return nil, err
	}
	env := map[string]string{"POOL_RUN_SLOT": fmt.Sprint(g.Slot), "POOL_RUN_OWNER": g.Owner}
	if g.Fence > 0 {
		env["POOL_RUN_FENCE"] = strconv.FormatInt(g.Fence, 10)
	}
	for k, v := range g.Env {
		env[k] = v
	}
	for k, v := range env {
		if err := os.Setenv(k, v); err != nil {
			h.Release(context.Background())
			return nil, err
		}
	}
	return &held{grant: g, hold: h}, nil
}

// notOwnerChar is what an owner may not hold (lease.DefaultOwnerPattern).
var notOwnerChar = regexp.MustCompile(`[^A-Za-z0-9._:@-]`)

// defaultOwner is "gotest@" and the package directory's name, made fit
// for the default owner pattern.
func defaultOwner() string {
	name := "tests"
	if wd, err := os.Getwd(); err == nil {
		name = notOwnerChar.ReplaceAllString(filepath.Base(wd), "-")
	}
	owner := "gotest@" + name
	return owner[:min(len(owner), 128)]
}
