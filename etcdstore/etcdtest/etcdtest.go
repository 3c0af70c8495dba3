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
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Timing of every member: a 50 ms heartbeat and a 500 ms election
// timeout keep an election short while staying stable on a loaded test
// machine (with -race), and give the smallest etcd lease TTL there is,
// one second (etcd's minimum is 1.5 election timeouts, rounded up to
// whole seconds).
const (
	TickMs     = 50
	ElectionMs = 500
	// MinLeaseTTL is the cluster's minimum etcd lease TTL with this timing.
	MinLeaseTTL = time.Second
)

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
	t   testing.TB
}

// Member is one etcd member.
type Member struct {
	Name string
	// Endpoint is the member's client address, host:port.
	Endpoint string
	peerURL  string
	dir      string
	stop     func()
	once     sync.Once
	stopped  atomic.Bool
}

// Start starts a single-member cluster.
func Start(t testing.TB) *Cluster { return StartCluster(t, 1) }

// StartTLS starts a single-member cluster that serves clients over TLS
// with the certificates of [NewTLSFiles] and requires a client
// certificate.
func StartTLS(t testing.TB) *Cluster {
	t.Helper()
	f := NewTLSFiles(t)
	return start(t, 1, &f)
}

// StartCluster starts an n-member cluster and waits until it has a leader.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return start(t, n, nil)
}

func start(t testing.TB, n int, tlsFiles *TLSFiles) *Cluster {
	t.Helper()
	var lastErr error
	for try := 0; try < 3; try++ {
		c, err := startCluster(t, n, tlsFiles)
		if err == nil {
			return c
		}
		lastErr = err // most likely a port taken between picking and binding
	}
	t.Fatalf("etcdtest: start %d members: %v", n, lastErr)
	return nil
}

func startCluster(t testing.TB, n int, tlsFiles *TLSFiles) (*Cluster, error) {
	c := &Cluster{t: t, TLS: tlsFiles}
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
			dir:      t.TempDir(),
		}
		c.Members = append(c.Members, m)
		initial = append(initial, m.Name+"="+m.peerURL)
	}
	start := func(m *Member, initial, token string) (func(), <-chan struct{}, error) {
		return startEmbedded(m, initial, token, tlsFiles)
	}
	if bin := getenv(EnvBinary); bin != "" {
		start = func(m *Member, initial, token string) (func(), <-chan struct{}, error) {
			return startBinary(t, bin, m, initial, token, tlsFiles)
		}
	}
	readies := make([]<-chan struct{}, n)
	for i, m := range c.Members {
		stop, ready, err := start(m, strings.Join(initial, ","), token)
		if err != nil {
			c.stopAll()
			return nil, err
		}
		m.stop, readies[i] = stop, ready
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

// Stop stops the member abruptly, as a crash would: a leader hands over
// nothing, and the others elect a new one after the election timeout.
func (m *Member) Stop() {
	m.once.Do(func() {
		m.stopped.Store(true)
		if m.stop != nil {
			m.stop()
		}
	})
}

// Stopped reports whether Stop was called.
func (m *Member) Stopped() bool { return m.stopped.Load() }

// Endpoints are the client addresses of the members still running.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		if !m.Stopped() {
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

// Client returns a client of the running members, closed at cleanup.
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

// leaderOnce asks every running member for its status: all must name the
// same leader, one of the members.
func (c *Cluster) leaderOnce() (int, error) {
	cli, err := clientv3.New(c.clientConfig(time.Second))
	if err != nil {
		return -1, err
	}
	defer cli.Close()
	leader := uint64(0)
	ids := map[uint64]int{}
	for i, m := range c.Members {
		if m.Stopped() {
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
