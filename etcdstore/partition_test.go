package etcdstore_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
	"github.com/durable-lease/durable-lease/lease"
)

// TestHolderCutOff: a holder whose client is cut off from the cluster (a
// partition: its connection goes silent, nothing is refused) declares its
// lease lost before the server expires it; a waiter on another client
// takes the lease over only after that expiry, with a larger fence; once
// the holder is reconnected, its heartbeat and its release fail with the
// fencing error, ErrNotOwner.
func TestHolderCutOff(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	p := etcdtest.NewProxy(t, c.Members[0].Endpoint)
	ctx := context.Background()
	prefix := testPrefix(t)
	// The holder's client has the default request timeout (5 s), longer
	// than the TTL: a heartbeat sent into the partition would block past
	// the server's expiry unless the Hold bounds it.
	ba, err := etcdstore.NewBackend(ctx, "etcd://"+p.Endpoint()+"/"+prefix, etcdstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ba.Close() })
	bb := open(t, c, etcdstore.Options{})
	sa, err := lease.New(ba)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := lease.New(bb)
	if err != nil {
		t.Fatal(err)
	}

	// Four seconds: eight heartbeats, a one-second margin (max(TTL/4, 1 s)),
	// and room for etcd's lessor, which revokes expired leases every 500 ms.
	const ttl = 4.0 / 60
	const kind = "baton"
	acq, err := sa.Acquire(ctx, lease.Request{Kind: kind, Owner: "holder", TTLMinutes: ttl})
	if err != nil {
		t.Fatal(err)
	}
	a := acq.Record
	hold, err := sa.Keep(ctx, kind, "holder", a.Token, lease.HoldOptions{Acquired: a})
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Stop()

	// The server's expiry, seen by a client of its own: the liveness key
	// bound to the etcd lease is deleted when the lease lapses.
	expired := etcdtest.WatchDelete(t, c.Client(), "/"+prefix+"/lease/"+kind+"/live")
	lost := make(chan time.Time, 1)
	go func() {
		<-hold.Done()
		lost <- time.Now()
	}()
	type took struct {
		at  time.Time
		acq *lease.Acquisition
		err error
	}
	taken := make(chan took, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		acq, err := sb.AcquireWait(wctx, lease.Request{Kind: kind, Owner: "waiter", TTLMinutes: ttl})
		taken <- took{time.Now(), acq, err}
	}()

	// Cut once the holder has renewed a few times.
	time.Sleep(1200 * time.Millisecond)
	confirmed := hold.Record().Seen.ExpiresAt
	if !confirmed.After(a.Seen.ExpiresAt) {
		t.Fatalf("no renewal confirmed before the cut: expiry %s, acquired with %s", confirmed, a.Seen.ExpiresAt)
	}
	cutAt := time.Now()
	p.Cut()

	var lossAt, expiryAt time.Time
	var tk took
	deadline := time.After(20 * time.Second)
	for lossAt.IsZero() || expiryAt.IsZero() || tk.at.IsZero() {
		select {
		case lossAt = <-lost:
		case expiryAt = <-expired:
		case tk = <-taken:
			if tk.err != nil {
				t.Fatalf("waiter: %v", tk.err)
			}
		case <-deadline:
			t.Fatalf("after the cut: loss %v, server expiry %v, takeover %v", !lossAt.IsZero(), !expiryAt.IsZero(), !tk.at.IsZero())
		}
	}
	since := func(at time.Time) time.Duration { return at.Sub(cutAt).Round(time.Millisecond) }
	t.Logf("after the cut: holder's loss %s, server's expiry %s, waiter's takeover %s (last confirmed expiry %s)",
		since(lossAt), since(expiryAt), since(tk.at), since(confirmed))
	if !errors.Is(hold.Err(), lease.ErrLost) {
		t.Errorf("hold's error = %v; want ErrLost", hold.Err())
	}
	if !lossAt.Before(expiryAt) {
		t.Errorf("the holder declared the loss %s after the server's expiry", lossAt.Sub(expiryAt))
	}
	if !lossAt.Before(tk.at) {
		t.Errorf("the holder declared the loss %s after the takeover", lossAt.Sub(tk.at))
	}
	if !tk.acq.TookOverExpired || tk.acq.Previous == nil || tk.acq.Previous.Token != a.Token {
		t.Errorf("the waiter's acquisition = %+v; want a takeover of the holder's record", tk.acq)
	}
	if tk.acq.Record.Fence <= a.Fence {
		t.Errorf("waiter's fence %d; want more than the holder's %d", tk.acq.Record.Fence, a.Fence)
	}

	// Reconnected, the old holder is refused with the fencing error.
	p.Restore()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := sa.Heartbeat(rctx, lease.Ref{Kind: kind, Owner: "holder", Token: a.Token}); !errors.Is(err, lease.ErrNotOwner) {
		t.Errorf("the old holder's heartbeat = %v; want ErrNotOwner", err)
	}
	if _, err := sa.Release(rctx, lease.Ref{Kind: kind, Owner: "holder", Token: a.Token}); !errors.Is(err, lease.ErrNotOwner) {
		t.Errorf("the old holder's release = %v; want ErrNotOwner", err)
	}
	if err := hold.Release(rctx); !errors.Is(err, lease.ErrLost) {
		t.Errorf("the hold's release = %v; want its loss", err)
	}
	st, err := sb.Status(rctx, kind)
	if err != nil || st.State != lease.Held || st.Record.Token != tk.acq.Record.Token {
		t.Errorf("status = %+v, %v; want held by the waiter", st, err)
	}
}

// TestProxy: the proxy forwards, goes silent on Cut (open connections and
// new ones alike, none closed), forwards new connections after Restore
// (closing the silenced ones), and Drop resets what is open.
func TestProxy(t *testing.T) {
	t.Parallel()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	p := etcdtest.NewProxy(t, echo.Addr().String())
	dial := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", p.Endpoint())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	// roundTrip sends a line and reads the reply: "" on a timeout, "EOF"
	// when the connection ended.
	roundTrip := func(c net.Conn, r *bufio.Reader, line string) string {
		t.Helper()
		if _, err := io.WriteString(c, line+"\n"); err != nil {
			return "EOF"
		}
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		got, err := r.ReadString('\n')
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			return ""
		case err != nil:
			return "EOF"
		}
		return strings.TrimSuffix(got, "\n")
	}

	c1, r1 := dial()
	if got := roundTrip(c1, r1, "one"); got != "one" {
		t.Fatalf("forwarding: got %q", got)
	}
	p.Cut()
	if got := roundTrip(c1, r1, "two"); got != "" {
		t.Fatalf("an open connection after Cut: got %q; want silence", got)
	}
	c2, r2 := dial() // accepted, never forwarded
	if got := roundTrip(c2, r2, "three"); got != "" {
		t.Fatalf("a new connection after Cut: got %q; want silence", got)
	}
	p.Restore()
	if got := roundTrip(c1, r1, "four"); got != "EOF" {
		t.Fatalf("a silenced connection after Restore: got %q; want it closed", got)
	}
	if got := roundTrip(c2, r2, "five"); got != "EOF" {
		t.Fatalf("a blackholed connection after Restore: got %q; want it closed", got)
	}
	c3, r3 := dial()
	if got := roundTrip(c3, r3, "six"); got != "six" {
		t.Fatalf("a new connection after Restore: got %q", got)
	}
	p.Drop()
	if got := roundTrip(c3, r3, "seven"); got != "EOF" {
		t.Fatalf("after Drop: got %q; want the connection closed", got)
	}
	c4, r4 := dial()
	if got := roundTrip(c4, r4, "eight"); got != "eight" {
		t.Fatalf("a new connection after Drop: got %q", got)
	}
}
