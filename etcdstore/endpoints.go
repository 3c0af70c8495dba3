package etcdstore

import (
	"context"
	"net"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
)

// An endpoint that left an attempt unanswered, and then does not answer
// a status request either, is set aside: the client's balancer (round
// robin) stops sending it requests until it answers a status request
// again. A member that hangs (stopped, a disk stuck, a partition between
// it and the client) keeps its connection open and silent, so without
// this every third request of a three-member cluster would go there and
// wait out its attempt until the client's keep-alive pings found the
// connection dead (13 s); with it, one attempt is lost, and the requests
// after it go to the members that answer.
//
// The status request tells a hung member from one that is only waiting
// for the cluster: while the cluster elects a leader every member leaves
// requests unanswered, and each still answers for its status. At most a
// minority of the endpoints is set aside at once, since a cluster that
// keeps its quorum has at most that many bad members.

// probeEvery is how often an endpoint set aside is asked for its status,
// and probeTimeout how long it has to answer. A member that answers is
// given requests again at once.
const (
	probeEvery   = 500 * time.Millisecond
	probeTimeout = 500 * time.Millisecond
)

// aside is the set of endpoints set aside, shared by a Backend's requests.
type aside struct {
	cli  *clientv3.Client
	all  []string // the store's endpoints, in the URL's order
	done chan struct{}

	// dialMu orders the balancer's endpoints being set and a status
	// request's dial: the client's Dial reads its endpoints without the
	// lock SetEndpoints takes (etcd client v3.7.3, client.go's dial).
	dialMu sync.Mutex

	mu       sync.Mutex
	since    map[string]time.Time // endpoint -> when it was set aside
	checking map[string]bool      // endpoints being asked for their status
	ips      map[string][]string  // endpoint -> its addresses (ip:port)
	closed   bool
}

func newAside(cli *clientv3.Client, endpoints []string) *aside {
	return &aside{cli: cli, all: endpoints, done: make(chan struct{}),
		since: map[string]time.Time{}, checking: map[string]bool{}, ips: map[string][]string{}}
}

func (a *aside) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.closed {
		a.closed = true
		close(a.done)
	}
}

// minority is how many endpoints may be set aside at once: none of one or
// two.
func (a *aside) minority() int { return (len(a.all) - 1) / 2 }

// suspect reports that an attempt sent to the member at addr (a peer
// address, ip:port) went unanswered. The member is asked for its status
// in the background and set aside if it does not answer in time; the
// caller goes on at once (its next attempt goes to another member anyway,
// the balancer taking turns).
func (a *aside) suspect(addr string) {
	if a.minority() == 0 || addr == "" {
		return
	}
	a.mu.Lock()
	if a.closed || len(a.since) >= a.minority() {
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	go func() {
		ep := a.endpointAt(addr)
		if ep == "" {
			return
		}
		a.mu.Lock()
		if _, ok := a.since[ep]; ok || a.checking[ep] {
			a.mu.Unlock()
			return
		}
		a.checking[ep] = true
		a.mu.Unlock()
		answers := a.answers(ep)
		a.mu.Lock()
		defer a.mu.Unlock()
		delete(a.checking, ep)
		if answers || a.closed || len(a.since) >= a.minority() {
			return
		}
		at := time.Now()
		a.since[ep] = at
		a.apply()
		go a.probe(ep, at)
	}()
}

// answers reports whether ep answers a status request within
// probeTimeout, on a connection of its own.
func (a *aside) answers(ep string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	a.dialMu.Lock()
	conn, err := a.cli.Dial(ep) // does not wait for the connection
	a.dialMu.Unlock()
	if err != nil {
		return false
	}
	defer conn.Close()
	_, err = pb.NewMaintenanceClient(conn).Status(ctx, &pb.StatusRequest{})
	return err == nil
}

// apply gives the balancer the endpoints not set aside; a.mu is held.
func (a *aside) apply() {
	eps := make([]string, 0, len(a.all))
	for _, e := range a.all {
		if _, ok := a.since[e]; !ok {
			eps = append(eps, e)
		}
	}
	a.dialMu.Lock()
	defer a.dialMu.Unlock()
	a.cli.SetEndpoints(eps...)
}

// probe asks ep for its status until it answers, then gives it back to
// the balancer; it ends when the Backend is closed.
func (a *aside) probe(ep string, at time.Time) {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-a.done:
			return
		case <-t.C:
		}
		if !a.answers(ep) {
			continue
		}
		a.mu.Lock()
		if t, ok := a.since[ep]; ok && t.Equal(at) && !a.closed {
			delete(a.since, ep)
			a.apply()
		}
		a.mu.Unlock()
		return
	}
}

// endpointAt is the endpoint whose connection has the peer address addr
// (ip:port, as the connection reports it): an endpoint written as an
// address is compared as it is, one with a host name by the addresses the
// name resolves to (looked up once, within a short bound).
func (a *aside) endpointAt(addr string) string {
	for _, ep := range a.all {
		if ep == addr {
			return ep
		}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	for _, ep := range a.all {
		h, p, err := net.SplitHostPort(ep)
		if err != nil || p != port {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			if ip.Equal(net.ParseIP(host)) {
				return ep
			}
			continue
		}
		if slices.Contains(a.resolved(ep, h, p), net.JoinHostPort(host, port)) {
			return ep
		}
	}
	return ""
}

func (a *aside) resolved(ep, host, port string) []string {
	a.mu.Lock()
	ips, ok := a.ips[ep]
	a.mu.Unlock()
	if ok {
		return ips
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	names, _ := net.DefaultResolver.LookupHost(ctx, host)
	for _, n := range names {
		ips = append(ips, net.JoinHostPort(n, port))
	}
	a.mu.Lock()
	a.ips[ep] = ips
	a.mu.Unlock()
	return ips
}

// peerKey is the context key of an attempt's *peerSlot: where the
// interceptors below write the address each request of the attempt went
// to.
type peerKey struct{}

// peerSlot is the address of the member an attempt's last request went
// to, "" before any did.
type peerSlot struct {
	mu   sync.Mutex
	addr string
}

func (s *peerSlot) set(addr string) {
	s.mu.Lock()
	s.addr = addr
	s.mu.Unlock()
}

func (s *peerSlot) get() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// withPeerSlot is ctx carrying a fresh slot for the address its requests
// go to.
func withPeerSlot(ctx context.Context) (context.Context, *peerSlot) {
	s := &peerSlot{}
	return context.WithValue(ctx, peerKey{}, s), s
}

// peerTracking are the dial options that note, for a request whose
// context carries a slot ([withPeerSlot]), the address of the member it
// was sent to: the balancer picks it, and nothing else tells.
func peerTracking() []grpc.DialOption {
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		slot, _ := ctx.Value(peerKey{}).(*peerSlot)
		if slot == nil {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		var p peer.Peer
		err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Peer(&p))...)
		if p.Addr != nil {
			slot.set(p.Addr.String())
		}
		return err
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if slot, _ := ctx.Value(peerKey{}).(*peerSlot); slot != nil && cs != nil {
			if p, ok := peer.FromContext(cs.Context()); ok && p.Addr != nil {
				slot.set(p.Addr.String())
			}
		}
		return cs, err
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}
}
