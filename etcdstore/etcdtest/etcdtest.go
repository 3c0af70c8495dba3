// Package etcdtest starts etcd for tests: in-process with
// go.etcd.io/etcd/server/v3/embed, each member on its own loopback ports
// and in its own temporary directory, stopped when the test ends. With
// ETCDTEST_BINARY set (for example to /usr/bin/etcd from the
// distribution's etcd-server package), members are that binary's
// processes instead, so the same tests check the client against that
// server's version.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Timing of every member of [Start], [StartTLS] and [StartCluster]: a
// 50 ms heartbeat and a 500 ms election timeout keep an election short
// while staying stable on a loaded test machine (with -race), and give
// the smallest etcd lease TTL there is, one second (etcd's minimum is 1.5
// election timeouts, rounded up to whole seconds).
const (
	TickMs     = 50
	ElectionMs = 500
	// MinLeaseTTL is the cluster's minimum etcd lease TTL with this timing.
	MinLeaseTTL = time.Second
)

// Timing is the raft timing of a cluster's members, in milliseconds: the
// heartbeat interval and the election timeout.
type Timing struct {
	TickMs, ElectionMs int
}

// Test is the timing of [StartCluster]: [TickMs] and [ElectionMs].
var Test = Timing{TickMs, ElectionMs}

// Default is etcd's own default timing (a 100 ms heartbeat and a 1 s
// election timeout), which a cluster runs with unless its operator tuned
// it: the timing the store's TTL floor on etcd assumes.
var Default = Timing{100, 1000}

// BcryptCost is the members' cost of hashing a password (etcd's default
// is 10): the cheapest there is, since the tests' passwords protect
// nothing, and under -race an authentication at the default costs about
// a second of CPU.
const BcryptCost = 4

// readyTimeout bounds the start of a cluster.
const readyTimeout = 30 * time.Second

// EnvBinary names an etcd executable to run instead of the embedded server.
const EnvBinary = "ETCDTEST_BINARY"

// Cluster is a running etcd cluster.
type Cluster struct {
	Members []*Member
	// TLS is set when the members serve clients over TLS only and require
	// a client certificate.
	TLS *TLSFiles
	// Timing is the members' raft timing.
	Timing Timing
	t      testing.TB
	binary bool
}

// Member is one etcd member.
type Member struct {
	Name string
	// Endpoint is the member's client address, host:port.
	Endpoint string
	peerURL  string
	dir      string
	// start starts the member (again, on a restart, from its data
	// directory) and returns its process when it runs as one.
	start func() (running, error)

	mu      sync.Mutex
	run     running
	stopped atomic.Bool
	paused  atomic.Bool
}

// running is a started member: stop ends it abruptly, ready is closed
// once it serves clients, and proc is its process, nil for a member in
// this process.
type running struct {
	stop  func()
	ready <-chan struct{}
	proc  *os.Process
}

// Start starts a single-member cluster.
func Start(t testing.TB) *Cluster { return StartCluster(t, 1) }

// StartTLS starts a single-member cluster that serves clients over TLS
// with the certificates of [NewTLSFiles] and requires a client
// certificate.
func StartTLS(t testing.TB) *Cluster {
	t.Helper()
	f := NewTLSFiles(t)
	return start(t, 1, &f, Options{})
}

// StartCluster starts an n-member cluster and waits until it has a leader.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return start(t, n, nil, Options{})
}

// Options choose how [StartClusterWith] runs the members.
type Options struct {
	// Timing is the members' raft timing; zero means [Test].
	Timing Timing
	// Binary is the etcd executable the members run as processes of; ""
	// means $ETCDTEST_BINARY, and the embedded server without it.
	Binary string
}

// StartClusterWith is [StartCluster] with o's timing and executable.
func StartClusterWith(t testing.TB, n int, o Options) *Cluster {
	t.Helper()
	return start(t, n, nil, o)
}

// DistributionBinary is the etcd executable a distribution's etcd-server
// package installs (/usr/bin/etcd), or "" when there is none.
func DistributionBinary() string {
	const bin = "/usr/bin/etcd"
	if st, err := os.Stat(bin); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return bin
	}
	return ""
}

func start(t testing.TB, n int, tlsFiles *TLSFiles, o Options) *Cluster {
	t.Helper()
	if o.Timing == (Timing{}) {
		o.Timing = Test
	}
	if o.Binary == "" {
		o.Binary = getenv(EnvBinary)
	}
	var lastErr error
	for try := 0; try < 3; try++ {
		c, err := startCluster(t, n, tlsFiles, o)
		if err == nil {
			return c
		}
		lastErr = err // most likely a port taken between picking and binding
	}
	t.Fatalf("etcdtest: start %d members: %v", n, lastErr)
	return nil
}

func startCluster(t testing.TB, n int, tlsFiles *TLSFiles, o Options) (*Cluster, error) {
	timing, bin := o.Timing, o.Binary
	c := &Cluster{t: t, TLS: tlsFiles, Timing: timing}
	token := fmt.Sprintf("etcdtest-%d", time.Now().UnixNano())
	var initial []string
	for i := range n {
		ports, err := freePorts(2)
		if err != nil {
			return nil, err
		}
		m := &Member{
			Name:     fmt.Sprintf("m%d", i),
			Endpoint: fmt.Sprintf("127.0.0.1:%d", ports[0]),
			peerURL:  fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
			dir:      dataDir(t, bin != ""),
		}
		c.Members = append(c.Members, m)
		initial = append(initial, m.Name+"="+m.peerURL)
	}
	c.binary = bin != ""
	readies := make([]<-chan struct{}, n)
	for i, m := range c.Members {
		m.start = func() (running, error) {
			if bin != "" {
				return startBinary(t, bin, m, strings.Join(initial, ","), token, tlsFiles, timing)
			}
			return startEmbedded(m, strings.Join(initial, ","), token, tlsFiles, timing)
		}
		r, err := m.start()
		if err != nil {
			c.stopAll()
			return nil, err
		}
		m.run, readies[i] = r, r.ready
	}
	t.Cleanup(c.stopAll)
	deadline := time.After(readyTimeout)
	for i, ready := range readies {
		select {
		case <-ready:
		case <-deadline:
			c.stopAll()
			return nil, fmt.Errorf("member %s not ready within %s", c.Members[i].Name, readyTimeout)
		}
	}
	if _, err := c.waitLeader(readyTimeout); err != nil {
		c.stopAll()
		return nil, err
	}
	return c, nil
}

// stopAll stops the members together (each stop waits up to a second
// for peer connections to close).
func (c *Cluster) stopAll() {
	var wg sync.WaitGroup
	for _, m := range c.Members {
		wg.Go(m.Stop)
	}
	wg.Wait()
}

// Stop stops the member abruptly, as a crash would (SIGKILL of a
// member's process): a leader hands over nothing, and the others elect a
// new one after the election timeout. Stop on a stopped member does
// nothing.
func (m *Member) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped.Swap(true) {
		return
	}
	if m.paused.Swap(false) && m.run.proc != nil {
		_ = m.run.proc.Signal(syscall.SIGCONT) // SIGKILL ends it either way; this reaps it sooner
	}
	if m.run.stop != nil {
		m.run.stop()
	}
}

// Stopped reports whether the member is stopped (Stop was called and no
// Restart since).
func (m *Member) Stopped() bool { return m.stopped.Load() }

// Restart starts a stopped member again from its data directory, as an
// operator restarts a crashed one, and returns once it serves clients
// (it may still be catching up with the leader).
func (m *Member) Restart() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.stopped.Load() {
		return fmt.Errorf("etcdtest: restart %s: it is running", m.Name)
	}
	r, err := m.start()
	if err != nil {
		return fmt.Errorf("etcdtest: restart %s: %w", m.Name, err)
	}
	select {
	case <-r.ready:
	case <-time.After(readyTimeout):
		r.stop()
		return fmt.Errorf("etcdtest: restart %s: not ready within %s", m.Name, readyTimeout)
	}
	m.run = r
	m.stopped.Store(false)
	return nil
}

// ErrInProcess is the error of [Member.Pause] for a member that runs in
// the test's own process (the embedded server), which cannot be stopped
// alone: set ETCDTEST_BINARY.
var ErrInProcess = errors.New("etcdtest: the member runs in this process (embedded), not as a process of its own; set " + EnvBinary)

// Pause hangs the member (SIGSTOP of its process): its connections stay
// open and nothing answers, as with a member stuck on a disk or starved
// of CPU. Only a member of the etcd binary can be paused ([ErrInProcess]).
func (m *Member) Pause() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.run.proc == nil {
		return ErrInProcess
	}
	if m.stopped.Load() || m.paused.Load() {
		return fmt.Errorf("etcdtest: pause %s: it is not running", m.Name)
	}
	if err := m.run.proc.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	m.paused.Store(true)
	return nil
}

// Resume continues a paused member (SIGCONT).
func (m *Member) Resume() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.paused.Load() {
		return fmt.Errorf("etcdtest: resume %s: it is not paused", m.Name)
	}
	m.paused.Store(false)
	return m.run.proc.Signal(syscall.SIGCONT)
}

// Paused reports whether the member is paused.
func (m *Member) Paused() bool { return m.paused.Load() }

// Pid is the member's process id, 0 for a member in this process.
func (m *Member) Pid() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.run.proc == nil {
		return 0
	}
	return m.run.proc.Pid
}

// Processes reports whether the members are processes of the etcd
// binary ([EnvBinary]), which can be killed, paused and resumed one by
// one, rather than servers embedded in the test's process.
func (c *Cluster) Processes() bool { return c.binary }

// Endpoints are the client addresses of the members running and not
// paused.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		if !m.Stopped() && !m.Paused() {
			eps = append(eps, m.Endpoint)
		}
	}
	return eps
}

// URL is the store URL etcd://<every member>/<prefix>; prefix must not
// start with a slash.
func (c *Cluster) URL(prefix string) string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.Endpoint)
	}
	return "etcd://" + strings.Join(eps, ",") + "/" + prefix
}

// Client returns a client of the members running and not paused, closed
// at cleanup.
func (c *Cluster) Client() *clientv3.Client {
	c.t.Helper()
	cli, err := clientv3.New(c.clientConfig(5 * time.Second))
	if err != nil {
		c.t.Fatalf("etcdtest: client: %v", err)
	}
	c.t.Cleanup(func() { cli.Close() })
	return cli
}

func (c *Cluster) clientConfig(dial time.Duration) clientv3.Config {
	cfg := clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: dial, Logger: zap.NewNop()}
	if c.TLS != nil {
		cfg.TLS = c.TLS.clientTLS(c.t)
	}
	return cfg
}

// Leader waits for the running members to agree on a leader and returns
// its index in Members.
func (c *Cluster) Leader() int {
	c.t.Helper()
	i, err := c.waitLeader(readyTimeout)
	if err != nil {
		c.t.Fatalf("etcdtest: %v", err)
	}
	return i
}

func (c *Cluster) waitLeader(within time.Duration) (int, error) {
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		i, err := c.leaderOnce()
		if err == nil {
			return i, nil
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	return -1, fmt.Errorf("no leader within %s: %v", within, last)
}

// leaderOnce asks every running member (not paused) for its status: all
// must name the same leader, one of the members.
func (c *Cluster) leaderOnce() (int, error) {
	cli, err := clientv3.New(c.clientConfig(time.Second))
	if err != nil {
		return -1, err
	}
	defer cli.Close()
	leader := uint64(0)
	ids := map[uint64]int{}
	for i, m := range c.Members {
		if m.Stopped() || m.Paused() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := cli.Status(ctx, m.Endpoint)
		cancel()
		if err != nil {
			return -1, fmt.Errorf("status of %s: %v", m.Name, err)
		}
		if st.Leader == 0 || (leader != 0 && st.Leader != leader) {
			return -1, fmt.Errorf("members disagree on the leader")
		}
		leader = st.Leader
		ids[st.Header.MemberId] = i
	}
	i, ok := ids[leader]
	if !ok {
		return -1, fmt.Errorf("leader %x is not a running member", leader)
	}
	return i, nil
}

// dataDir is a member's data directory, removed at cleanup. A member of
// the binary keeps it on a tmpfs (/dev/shm) where there is one: etcd
// before 3.5 has no --unsafe-no-fsync, and its fsyncs of the WAL on a
// disk that the rest of a test run keeps busy take long enough to miss
// heartbeats (an election with no fault injected) and delay every write
// by seconds. The embedded member does not sync at all (UnsafeNoFsync).
func dataDir(t testing.TB, binary bool) string {
	if binary {
		if d, err := os.MkdirTemp("/dev/shm", "etcdtest-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// freePorts picks n loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func mustURL(s string) url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return *u
}

func dialTimeout(addr string) (net.Conn, error) {
	return net.DialTimeout("tcp", addr, 100*time.Millisecond)
}

// WatchDelete delivers the time at which key is first deleted (an expiry
// of the etcd lease it is bound to, a delete, a revoke), as seen by a
// watch opened on cli before WatchDelete returns.
func WatchDelete(t testing.TB, cli *clientv3.Client, key string) <-chan time.Time {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// Watching from the revision after a read misses no deletion after it.
	resp, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	wch := cli.Watch(ctx, key, clientv3.WithRev(resp.Header.Revision+1))
	out := make(chan time.Time, 1)
	go func() {
		for resp := range wch {
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					out <- time.Now()
					return
				}
			}
		}
	}()
	return out
}
