package etcdstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/durable-lease/durable-lease/lease"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrUnreachable reports that the cluster did not answer in time: no
// endpoint accepted a connection, or none answered a request within the
// bound that applies ([Options.DialTimeout] for [NewBackend],
// [Options.RequestTimeout] for each request after it).
var ErrUnreachable = fmt.Errorf("%w: etcd cluster unreachable", lease.ErrUnavailable)

// DefaultDialTimeout bounds [NewBackend]: connecting, authenticating and one
// linearizable read must be done by then. Five seconds covers a leader
// election with etcd's default timing (1 s election timeout) several times
// over, and is short enough for a CLI to report a wrong URL promptly.
const DefaultDialTimeout = 5 * time.Second

// DefaultRequestTimeout bounds each request after [NewBackend] (a read, a grant,
// a keep-alive, a transaction), whatever the caller's context allows, so
// a cluster lost mid-way is an error, never a hang. An [Backend.Update]
// makes a few requests, each under this bound.
const DefaultRequestTimeout = 5 * time.Second

// Options configure the connection. The zero value is a plain-text,
// unauthenticated connection with the default timeouts.
type Options struct {
	// CACert is a PEM file of the certificate authorities that sign the
	// servers' certificates; setting it (or Cert) turns TLS on.
	CACert string
	// Cert and Key are a PEM client certificate and its key, for clusters
	// that authenticate clients by certificate. Both or neither.
	Cert, Key string
	// User and Password log in to a cluster with authentication enabled.
	// Both or neither. Neither appears in an error.
	User, Password string
	// DialTimeout bounds Open; 0 means [DefaultDialTimeout].
	DialTimeout time.Duration
	// RequestTimeout bounds each later request; 0 means
	// [DefaultRequestTimeout].
	RequestTimeout time.Duration
	// Clock is the wall clock for the times written into records
	// (heartbeat, acquiredAt); nil means time.Now. Liveness never depends
	// on it: the cluster decides.
	Clock func() time.Time
}

// Environment variables read by [OptionsFromEnv].
const (
	EnvCACert   = "LEASE_ETCD_CACERT"
	EnvCert     = "LEASE_ETCD_CERT"
	EnvKey      = "LEASE_ETCD_KEY"
	EnvUser     = "LEASE_ETCD_USER"
	EnvPassword = "LEASE_ETCD_PASSWORD"
)

// OptionsFromEnv returns the TLS and authentication options named by the
// LEASE_ETCD_* variables, read with getenv (os.Getenv, or a test's map).
func OptionsFromEnv(getenv func(string) string) Options {
	return Options{
		CACert: getenv(EnvCACert), Cert: getenv(EnvCert), Key: getenv(EnvKey),
		User: getenv(EnvUser), Password: getenv(EnvPassword),
	}
}

// Backend is a lease store on etcd: a [lease.Backend] and a
// [lease.Watcher]. It is safe for concurrent use. Close it when done.
type Backend struct {
	cli     *clientv3.Client
	loc     Location
	opts    Options
	checked bool
	aside   *aside // the endpoints that left an attempt unanswered

	electionMu  sync.Mutex // ElectionTimeout's answer, once learnt
	election    time.Duration
	electionWhy string
}

// NewBackend parses url ([ParseURL]) and connects to the cluster. It returns
// once the cluster has answered one linearizable read of the prefix (so
// the endpoints, the credentials and the permissions on the prefix are
// good), or an error: [ErrUnreachable] when no answer came within
// [Options.DialTimeout], ctx's error when ctx ended first.
//
// The same read checks the cluster's registry of stores
// ([RegistryPrefix]): a store whose prefix is inside another's, or around
// one, is refused with [ErrNestedStore]; one not yet registered is
// registered, by one more transaction, on its first open. A user who may
// not read the registry opens the store unchecked ([Backend.Checked]).
func NewBackend(ctx context.Context, url string, opts Options) (*Backend, error) {
	loc, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	return NewBackendAt(ctx, loc, opts)
}

// NewBackendAt is [NewBackend] with a parsed location.
func NewBackendAt(ctx context.Context, loc Location, opts Options) (*Backend, error) {
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if !validPrefix(loc.Prefix) {
		return nil, fmt.Errorf("%w: etcdstore: prefix %q: want \"/\" and 1 to %d segments of letters, digits, '.', '_' or '-', not . or .., as ParseURL makes them (the whole key space is no store's)",
			lease.ErrInvalid, loc.Prefix, MaxSegments)
	}
	if (opts.User == "") != (opts.Password == "") {
		return nil, fmt.Errorf("etcdstore: %s: a user needs a password and a password a user", loc)
	}
	tlsConfig, err := opts.tlsConfig()
	if err != nil {
		return nil, fmt.Errorf("etcdstore: %s: %w", loc, err)
	}
	deadline := time.Now().Add(opts.DialTimeout)
	cfg := clientv3.Config{
		Endpoints:   loc.Endpoints,
		DialTimeout: opts.DialTimeout,
		// Probe an idle connection, so a watch on a dead one is noticed.
		// etcd refuses pings more often than every 5 s.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		TLS:                  tlsConfig,
		Username:             opts.User,
		Password:             opts.Password,
		// The client logs retries to stderr, which is for people here.
		Logger: zap.NewNop(),
		// Each request notes which member it went to, so that one left
		// unanswered can be set aside (endpoints.go).
		DialOptions: peerTracking(),
	}
	type dialed struct {
		cli *clientv3.Client
		err error
	}
	// clientv3.New takes no context (with credentials it authenticates
	// within DialTimeout): run it beside ctx.
	done := make(chan dialed, 1)
	go func() {
		cli, err := clientv3.New(cfg)
		done <- dialed{cli, err}
	}()
	var d dialed
	select {
	case d = <-done:
	case <-ctx.Done():
		go func() {
			if d := <-done; d.cli != nil {
				d.cli.Close()
			}
		}()
		return nil, fmt.Errorf("etcdstore: %s: %w", loc, ctx.Err())
	}
	if d.err != nil {
		return nil, dialError(ctx, loc, opts.DialTimeout, d.err)
	}
	b := &Backend{cli: d.cli, loc: loc, opts: opts, aside: newAside(d.cli, loc.Endpoints)}
	rctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if b.checked, err = b.check(rctx); err != nil {
		b.Close()
		if errors.Is(err, ErrNestedStore) {
			return nil, err
		}
		return nil, dialError(ctx, loc, opts.DialTimeout, err)
	}
	return b, nil
}

// probe makes the first read, a count of the keys under the prefix
// together with the reads ops (in one read-only transaction, so at one
// revision and in one round trip), until it is answered or ctx ends, and
// returns the answers to ops. It fails fast while no endpoint can be
// reached and tries again, so that an error can say why (connection
// refused, a certificate refused, no leader) instead of only that time ran
// out.
func (b *Backend) probe(ctx context.Context, ops []*pb.RequestOp) ([]*pb.ResponseOp, error) {
	kv := pb.NewKVClient(b.cli.ActiveConnection())
	p := b.loc.Prefix + "/"
	count := &pb.RangeRequest{Key: []byte(p), RangeEnd: []byte(clientv3.GetPrefixRangeEnd(p)), CountOnly: true}
	txn := &pb.TxnRequest{Success: append(ops[:len(ops):len(ops)], &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: count}})}
	for {
		var err error
		var resp *pb.TxnResponse
		if ops == nil {
			_, err = kv.Range(ctx, count, grpc.WaitForReady(false))
		} else if resp, err = kv.Txn(ctx, txn, grpc.WaitForReady(false)); err == nil {
			return resp.Responses[:min(len(ops), len(resp.Responses))], nil
		}
		if err == nil {
			return nil, nil
		}
		if ctx.Err() != nil || status.Code(err) != codes.Unavailable {
			return nil, rpctypes.Error(err)
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, &unavailable{rpctypes.Error(err)}
		case <-t.C:
		}
	}
}

// unavailable is the last error seen when time ran out.
type unavailable struct{ last error }

func (u *unavailable) Error() string { return u.last.Error() }

func dialError(ctx context.Context, loc Location, bound time.Duration, err error) error {
	var u *unavailable
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("etcdstore: %s: %w", loc, ctx.Err())
	case errors.As(err, &u):
		return fmt.Errorf("%w: %s: no answer within %s: %v", ErrUnreachable, loc, bound, u.last)
	case errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded:
		return fmt.Errorf("%w: %s: no answer within %s: %v", ErrUnreachable, loc, bound, err)
	}
	return fmt.Errorf("etcdstore: %s: %w", loc, err)
}

func (o Options) tlsConfig() (*tls.Config, error) {
	if o.CACert == "" && o.Cert == "" && o.Key == "" {
		return nil, nil
	}
	if (o.Cert == "") != (o.Key == "") {
		return nil, errors.New("a client certificate needs its key and a key its certificate")
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CACert != "" {
		pem, err := os.ReadFile(o.CACert)
		if err != nil {
			return nil, fmt.Errorf("CA certificate: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA certificate %s: no PEM certificate in it", o.CACert)
		}
	}
	if o.Cert != "" {
		pair, err := tls.LoadX509KeyPair(o.Cert, o.Key)
		if err != nil {
			// The error names the files, never their contents.
			return nil, fmt.Errorf("client certificate %s and key %s: %w", o.Cert, o.Key, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// Close ends the connection. Leases held through it are not released:
// they expire on the cluster at their TTL unless renewed through another.
func (b *Backend) Close() error {
	b.aside.close()
	return b.cli.Close()
}

// Checked reports whether Open checked the store against the cluster's
// registry of stores and found it registered there (or registered it): false
// when the user's permissions do not cover the registry, so that a store
// nested with this one would not have been found.
func (b *Backend) Checked() bool { return b.checked }

// Location is where the store is.
func (b *Backend) Location() Location { return b.loc }

// Now is the clock for the times written into records ([Options.Clock]).
func (b *Backend) Now() time.Time {
	if b.opts.Clock != nil {
		return b.opts.Clock()
	}
	return time.Now()
}

// request runs one request under [Options.RequestTimeout] and ctx, and
// says which ended it when one did. It is never sent twice (a grant, a
// write that is not idempotent); one left unanswered sets its member
// aside for the requests after it (endpoints.go). The cluster's "not now"
// (no leader, a leader change) is [ErrUnreachable] as a timeout is: the
// caller may try again later.
func (b *Backend) request(ctx context.Context, what string, f func(ctx context.Context) error) error {
	rctx, cancel := context.WithTimeout(ctx, b.opts.RequestTimeout)
	defer cancel()
	sctx, slot := withPeerSlot(rctx)
	err := f(sctx)
	if err != nil && (rctx.Err() != nil || deadline(err)) && ctx.Err() == nil {
		b.aside.suspect(slot.get())
	}
	return b.requestError(ctx, rctx, what, err)
}

// requestError is the error of a request that ended with err, ctx being
// the caller's context and rctx the request's own bound.
func (b *Backend) requestError(ctx, rctx context.Context, what string, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("etcdstore: %s: %w", what, ctx.Err())
	case rctx.Err() != nil || deadline(err):
		return fmt.Errorf("%w: %s: %s: no answer within %s: %v", ErrUnreachable, b.loc, what, b.opts.RequestTimeout, err)
	case retryable(err):
		return fmt.Errorf("%w: %s: %s: %v", ErrUnreachable, b.loc, what, err)
	}
	return fmt.Errorf("etcdstore: %s: %w", what, err)
}

// retrying runs an idempotent request (a read, a keep-alive) like
// [Backend.request], within the same overall bound, but gives each
// attempt only part of the time: an attempt that is not answered soon is
// given up and sent again, which the client's balancer sends to the next
// member, and its member is suspected (endpoints.go). One member that
// stopped answering (killed while the request was on its way, hung,
// forwarding to a leader that is gone) thus costs an attempt, not the
// whole bound: a renewal must land before the lease lapses, and a lease
// may be shorter than [Options.RequestTimeout]. A request sent while the
// cluster elects a leader is not answered when the election ends (a
// proposal is dropped, a read waits for the old leader's answer for
// seconds; seen on etcd 3.4 and 3.7), so it too must be sent again, and
// short attempts are what let a renewal follow an election closely.
//
// expires is when the caller's lease lapses as last confirmed (zero when
// there is none). The first attempt gets a third of the time left to it
// or to ctx's deadline, within [minAttempt, maxAttempt]; each later one
// twice the one before, but never more than a third of the time left
// (and never less than minAttempt): a member that is only slow (a loaded
// host) answers one of them, and a lease about to lapse still gets
// several tries.
func (b *Backend) retrying(ctx context.Context, what string, expires time.Time, f func(ctx context.Context) error) error {
	rctx, cancel := context.WithTimeout(ctx, b.opts.RequestTimeout)
	defer cancel()
	if dl, ok := ctx.Deadline(); ok && (expires.IsZero() || dl.Before(expires)) {
		expires = dl
	}
	var err error
	for attempt := min(b.share(expires), maxAttempt); ; {
		attempt = max(attempt, minAttempt)
		actx, acancel := context.WithTimeout(rctx, attempt)
		sctx, slot := withPeerSlot(actx)
		err = f(sctx)
		timedOut := actx.Err() != nil || deadline(err)
		acancel()
		if err == nil || rctx.Err() != nil || !(timedOut || retryable(err)) {
			break
		}
		if timedOut {
			b.aside.suspect(slot.get())
			attempt = min(2*attempt, b.share(expires))
			continue
		}
		// Refused at once (no leader yet, a connection refused): pause.
		if !sleepCtx(rctx, retryPause) {
			break
		}
	}
	return b.requestError(ctx, rctx, what, err)
}

// Bounds of one attempt of [Backend.retrying], and the pause after an
// attempt refused at once. An answer takes milliseconds on a LAN and
// tens of them under load or across regions: maxAttempt is a first
// attempt ten times that, and a tenth of the default request bound.
const (
	minAttempt = 250 * time.Millisecond
	maxAttempt = 500 * time.Millisecond
	retryPause = 20 * time.Millisecond
)

// share is a third of the time left before expires, or of the request
// bound when expires is zero.
func (b *Backend) share(expires time.Time) time.Duration {
	if expires.IsZero() {
		return b.opts.RequestTimeout / 3
	}
	return time.Until(expires) / 3
}

// deadline says whether err is a request's deadline: the client's, or
// the member's, which got the deadline with the request and may give up
// a moment before the client does ("rpc error: code = Unknown desc =
// context deadline exceeded", seen from members waiting for a leader).
func deadline(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
		return true
	}
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unknown && st.Message() == context.DeadlineExceeded.Error()
}

// retryable says whether err is the cluster's "not now": no endpoint
// reachable, no leader, a leader change or a timeout inside the cluster.
// Such a request may be sent again at once to another member.
func retryable(err error) bool {
	if c := status.Code(err); c == codes.Unavailable || deadline(err) {
		return true
	}
	switch rpctypes.Error(err) {
	case rpctypes.ErrNoLeader, rpctypes.ErrLeaderChanged, rpctypes.ErrTimeout,
		rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrTimeoutDueToConnectionLost:
		return true
	}
	return false
}

// String names the store: its URL.
func (b *Backend) String() string { return b.loc.String() }

// JournalWhere names the journal's keys, for messages.
func (b *Backend) JournalWhere() string { return b.loc.Prefix + journalDir }

// ExpiryMargin implements [lease.ExpiryMarginer]: a holder declares its
// lease lost a quarter of the TTL (at least a second, at most half the
// TTL) before the expiry it last had confirmed, since the cluster, not the
// holder, decides when the lease lapses and may grant it to another client
// at that moment. A holder cut off from the cluster thus stops its work
// while the lease is still its own on the server. (Half the TTL is the
// bound for TTLs under 2 s: a margin of the whole TTL would declare every
// such lease lost the moment it was taken.)
func (b *Backend) ExpiryMargin(ttl time.Duration) time.Duration {
	return min(max(ttl/4, time.Second), ttl/2)
}

// Open opens url as a [lease.Store] on this backend, with the TLS and
// authentication of the LEASE_ETCD_* variables, and returns the function
// that closes the connection. It has the shape of an internal/cli/storeopen
// opener, which the executables serving etcd:// stores register.
func Open(ctx context.Context, url string, opts ...lease.Option) (*lease.Store, func() error, error) {
	b, err := NewBackend(ctx, url, OptionsFromEnv(os.Getenv))
	if err != nil {
		return nil, nil, err
	}
	s, err := lease.New(b, opts...)
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	return s, b.Close, nil
}
