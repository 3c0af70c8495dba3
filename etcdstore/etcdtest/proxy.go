package etcdtest

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP proxy a test puts between a client and a member, to cut
// the client off from the cluster and let it back in:
//
//	p := etcdtest.NewProxy(t, c.Members[0].Endpoint)
//	b, _ := etcdstore.NewBackend(ctx, "etcd://"+p.Endpoint()+"/x", opts)
//	p.Cut()     // a partition: nothing passes, nobody is told
//	p.Restore() // forwarding again; the connections cut are closed
//
// It is safe for concurrent use, and closed at the test's cleanup.
type Proxy struct {
	t      testing.TB
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu     sync.Mutex
	cut    bool
	closed bool
	pairs  map[*pair]struct{}
}

// pair is one client connection and, unless it was accepted while the
// proxy was cut, its connection to the member.
type pair struct {
	client, member net.Conn    // member is nil for a blackholed connection
	silent         atomic.Bool // nothing is forwarded any more; set under Proxy.mu
}

// NewProxy listens on a loopback port and forwards every connection to
// target (host:port), until Cut.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("etcdtest: proxy: %v", err)
	}
	p := &Proxy{t: t, target: target, ln: ln, pairs: map[*pair]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.Close)
	return p
}

// Endpoint is the proxy's address, host:port, to give the client instead
// of the member's.
func (p *Proxy) Endpoint() string { return p.ln.Addr().String() }

// Cut partitions the client from the member, as a pulled cable or a
// blackholed route would: from now on nothing passes either way, and
// neither side is told. Open connections stay open but go silent (what
// either side sends is read and dropped); new connections are accepted
// and treated the same, never reaching the member. The client finds out
// only through its own timeouts. Cut on a cut proxy does nothing.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for pr := range p.pairs {
		pr.silent.Store(true)
	}
}

// Drop closes every connection open now, as a reset would, whether the
// proxy is cut or not; later connections are treated as the proxy's state
// says. Cut followed by Drop is a partition the client sees begin: its
// connections fail and its reconnects go into the blackhole.
func (p *Proxy) Drop() {
	p.mu.Lock()
	prs := p.takePairs(func(*pair) bool { return true })
	p.mu.Unlock()
	for _, pr := range prs {
		pr.close(true)
	}
}

// Restore ends a Cut: new connections are forwarded again. The
// connections that were silenced are closed (bytes were dropped from
// their streams, so they cannot resume), which makes the client
// reconnect at once.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	prs := p.takePairs(func(pr *pair) bool { return pr.silent.Load() })
	p.mu.Unlock()
	for _, pr := range prs {
		pr.close(false)
	}
}

// Close stops listening, closes every connection and waits for the
// proxy's goroutines. It is idempotent.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	prs := p.takePairs(func(*pair) bool { return true })
	p.mu.Unlock()
	p.ln.Close()
	for _, pr := range prs {
		pr.close(false)
	}
	p.wg.Wait()
}

// takePairs removes the pairs keep selects from p.pairs and returns them;
// p.mu is held.
func (p *Proxy) takePairs(keep func(*pair) bool) []*pair {
	var out []*pair
	for pr := range p.pairs {
		if keep(pr) {
			delete(p.pairs, pr)
			out = append(out, pr)
		}
	}
	return out
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				p.t.Logf("etcdtest: proxy: accept: %v", err)
			}
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// serve connects c to the member, or blackholes it while the proxy is cut.
func (p *Proxy) serve(c net.Conn) {
	p.mu.Lock()
	cut := p.cut
	p.mu.Unlock()
	var m net.Conn
	if !cut {
		var err error
		if m, err = net.DialTimeout("tcp", p.target, 5*time.Second); err != nil {
			c.Close() // the member is down: the client sees it refused
			return
		}
	}
	pr := &pair{client: c, member: m}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		pr.close(false)
		return
	}
	pr.silent.Store(p.cut) // Cut may have come while dialing
	p.pairs[pr] = struct{}{}
	p.mu.Unlock()
	if m != nil {
		p.wg.Go(func() { p.pump(pr, m, c, false) })
	}
	p.pump(pr, c, m, true)
}

// pump copies from src to dst while pr is not silent, and drops what it
// reads once it is. A failure on the client's side ends the pair; one on
// the member's side does too, unless pr is silent: a partitioned client
// must learn nothing from the member's going away.
func (p *Proxy) pump(pr *pair, src, dst net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		memberFailed := err != nil && !fromClient
		if n > 0 && dst != nil && !pr.silent.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err, memberFailed = werr, fromClient
			}
		}
		if err == nil {
			continue
		}
		p.mu.Lock()
		end := !memberFailed || !pr.silent.Load()
		if end {
			delete(p.pairs, pr)
		}
		p.mu.Unlock()
		if end {
			pr.close(false)
		}
		return
	}
}

// close closes both connections; reset makes the client's close a TCP
// reset instead of an orderly end.
func (pr *pair) close(reset bool) {
	if tc, ok := pr.client.(*net.TCPConn); ok && reset {
		_ = tc.SetLinger(0)
	}
	pr.client.Close()
	if pr.member != nil {
		pr.member.Close()
	}
}
