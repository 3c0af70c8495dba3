package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// slack is how much later than its bound an error may come on a loaded
// test machine.
const slack = 1500 * time.Millisecond

// TestUnreachable: a cluster that does not answer is ErrUnreachable
// within the documented bound, never a hang: a closed port, a listener
// that never speaks, and a cluster gone after Open.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	closed := freeAddr(t)
	silent := silentListener(t)
	for _, tt := range []struct{ name, addr string }{
		{"closed port", closed},
		{"silent listener", silent},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, err := etcdstore.NewBackend(context.Background(), "etcd://"+tt.addr+"/x", etcdstore.Options{DialTimeout: time.Second})
			took := time.Since(start)
			if !errors.Is(err, etcdstore.ErrUnreachable) {
				t.Fatalf("Open = %v; want ErrUnreachable", err)
			}
			if took > time.Second+slack {
				t.Errorf("Open took %s; bound 1s", took)
			}
			t.Logf("%s: %v", took.Round(time.Millisecond), err)
		})
	}
	t.Run("caller's deadline first", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := etcdstore.NewBackend(ctx, "etcd://"+silent+"/x", etcdstore.Options{})
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, etcdstore.ErrUnreachable) {
			t.Errorf("Open = %v; want the caller's deadline", err)
		}
		if took := time.Since(start); took > 200*time.Millisecond+slack {
			t.Errorf("Open took %s past a 200 ms deadline", took)
		}
	})
	t.Run("cluster gone after open", func(t *testing.T) {
		c := etcdtest.Start(t)
		b := open(t, c, etcdstore.Options{RequestTimeout: time.Second})
		rec, err := acquire(context.Background(), b, "k", "a", 15)
		if err != nil {
			t.Fatal(err)
		}
		c.Members[0].Stop()
		calls := map[string]func() error{
			"read":   func() error { _, err := b.Read(context.Background(), "k"); return err },
			"renew":  func() error { _, err := renew(context.Background(), b, "k", rec.Token); return err },
			"names":  func() error { _, err := b.Names(context.Background()); return err },
			"watch":  func() error { _, err := b.Watch(context.Background(), "k"); return err },
			"update": func() error { _, err := acquire(context.Background(), b, "k2", "a", 15); return err },
		}
		// In parallel: each is bounded on its own.
		errs := make(chan string, len(calls))
		for name, call := range calls {
			go func() {
				start := time.Now()
				err := call()
				switch took := time.Since(start); {
				case !errors.Is(err, etcdstore.ErrUnreachable):
					errs <- fmt.Sprintf("%s = %v; want ErrUnreachable", name, err)
				case took > time.Second+slack:
					errs <- fmt.Sprintf("%s took %s; bound 1s per request", name, took)
				default:
					errs <- ""
				}
			}()
		}
		for range calls {
			if e := <-errs; e != "" {
				t.Error(e)
			}
		}
	})
}

// TestAuth: a user restricted to the store's prefix can use it; a wrong
// password is refused without being shown.
func TestAuth(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	ctx := context.Background()
	raw := c.Client()
	prefix := "/" + testPrefix(t)
	const rootPW, agentPW = "root-Secret-1", "agent-Secret-2"
	steps := []func() error{
		func() error { _, err := raw.RoleAdd(ctx, "root"); return err },
		func() error { _, err := raw.UserAdd(ctx, "root", rootPW); return err },
		func() error { _, err := raw.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := raw.RoleAdd(ctx, "leases"); return err },
		func() error {
			_, err := raw.RoleGrantPermission(ctx, "leases", prefix+"/", clientv3.GetPrefixRangeEnd(prefix+"/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := raw.UserAdd(ctx, "agent", agentPW); return err },
		func() error { _, err := raw.UserGrantRole(ctx, "agent", "leases"); return err },
		func() error { _, err := raw.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("auth setup step %d: %v", i, err)
		}
	}
	url := c.URL(testPrefix(t))
	// The bound is a safety net: each Open below is answered (or refused)
	// by the cluster, and bcrypt under -race on a busy host takes seconds.
	opts := etcdstore.Options{DialTimeout: 30 * time.Second}

	_, err := etcdstore.NewBackend(ctx, url, opts)
	if err == nil {
		t.Error("Open without credentials succeeded on a cluster with auth")
	}
	opts.User, opts.Password = "agent", "wrong-Secret-3"
	_, err = etcdstore.NewBackend(ctx, url, opts)
	if err == nil {
		t.Error("Open with a wrong password succeeded")
	}
	noSecret(t, err, "wrong-Secret-3")
	t.Logf("wrong password: %v", err)

	_, err = etcdstore.NewBackend(ctx, strings.Replace(url, "etcd://", "etcd://agent:"+agentPW+"@", 1), etcdstore.Options{})
	if err == nil {
		t.Error("Open with credentials in the URL succeeded")
	}
	noSecret(t, err, agentPW)

	opts.Password = agentPW
	b, err := etcdstore.NewBackend(ctx, url, opts)
	if err != nil {
		t.Fatalf("Open as agent: %v", err)
	}
	defer b.Close()
	wake, err := b.Watch(ctx, "baton")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := acquire(ctx, b, "baton", "agent", 15)
	if err != nil {
		t.Fatalf("acquire as agent: %v", err)
	}
	if _, err := renew(ctx, b, "baton", rec.Token); err != nil {
		t.Fatalf("renew as agent: %v", err)
	}
	if err := release(ctx, b, "baton", rec.Token); err != nil {
		t.Fatalf("release as agent: %v", err)
	}
	waitWake(t, wake, 5*time.Second, "a release")
	if _, err := etcdstore.NewBackend(ctx, c.URL("elsewhere"), opts); err == nil {
		t.Error("Open of a prefix the user may not read succeeded")
	}
}

// TestOptionsFromEnv maps the LEASE_ETCD_* variables.
func TestOptionsFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"LEASE_ETCD_CACERT": "ca.pem", "LEASE_ETCD_CERT": "c.pem", "LEASE_ETCD_KEY": "k.pem",
		"LEASE_ETCD_USER": "u", "LEASE_ETCD_PASSWORD": "p",
	}
	got := etcdstore.OptionsFromEnv(func(k string) string { return env[k] })
	want := etcdstore.Options{CACert: "ca.pem", Cert: "c.pem", Key: "k.pem", User: "u", Password: "p"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("OptionsFromEnv = %+v; want %+v", got, want)
	}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// silentListener accepts connections and never answers.
func silentListener(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// TestTLS: a cluster that requires client certificates is used with the
// TLS options, and refused without them.
func TestTLS(t *testing.T) {
	t.Parallel()
	c := etcdtest.StartTLS(t)
	ctx := context.Background()
	url := c.URL(testPrefix(t))
	f := c.TLS
	for _, tt := range []struct {
		name string
		opts etcdstore.Options
	}{
		{"no TLS", etcdstore.Options{}},
		{"no client certificate", etcdstore.Options{CACert: f.CACert}},
		{"unknown authority", etcdstore.Options{CACert: f.ClientCert, Cert: f.ClientCert, Key: f.ClientKey}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.DialTimeout = time.Second
			b, err := etcdstore.NewBackend(ctx, url, tt.opts)
			t.Logf("%v", err)
			if err == nil {
				b.Close()
				t.Error("Open succeeded")
			}
		})
	}
	if _, err := etcdstore.NewBackend(ctx, url, etcdstore.Options{Cert: f.ClientCert}); err == nil {
		t.Error("Open with a certificate and no key succeeded")
	}
	b, err := etcdstore.NewBackend(ctx, url, etcdstore.Options{CACert: f.CACert, Cert: f.ClientCert, Key: f.ClientKey})
	if err != nil {
		t.Fatalf("Open with TLS: %v", err)
	}
	defer b.Close()
	rec, err := acquire(ctx, b, "baton", "agent", 15)
	if err != nil {
		t.Fatal(err)
	}
	if err := release(ctx, b, "baton", rec.Token); err != nil {
		t.Fatal(err)
	}
}
