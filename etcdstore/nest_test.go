package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/etcdstore/etcdtest"
	"github.com/durable-lease/durable-lease/lease"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// openPrefix opens prefix on c, closed at cleanup, or returns the error.
func openPrefix(t testing.TB, c *etcdtest.Cluster, prefix string) (*etcdstore.Backend, error) {
	t.Helper()
	b, err := etcdstore.NewBackend(context.Background(), c.URL(prefix), etcdstore.Options{})
	if err == nil {
		t.Cleanup(func() { b.Close() })
	}
	return b, err
}

// refused checks that err refuses a store for nesting: a usage error that
// names both prefixes.
func refused(t testing.TB, err error, prefix, other string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("opened /%s beside the store /%s: nested stores share keys", prefix, other)
	case !errors.Is(err, lease.ErrInvalid):
		t.Errorf("open /%s beside /%s = %v; want an error matching lease.ErrInvalid", prefix, other, err)
	case !names(err.Error(), prefix) || !names(err.Error(), other):
		t.Errorf("the refusal does not name both /%s and /%s: %v", prefix, other, err)
	}
}

// names reports whether msg names the prefix /p: followed by a space, a
// punctuation mark or the end.
func names(msg, p string) bool {
	return regexp.MustCompile(regexp.QuoteMeta("/"+p) + `([ ,;:)]|$)`).MatchString(msg)
}

// TestNestedStoresRefused: a store whose prefix is inside an open store's,
// or around one, is refused, whichever opens first; siblings whose names
// share a beginning are not nested, and a store opens again and again.
func TestNestedStoresRefused(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	for _, tt := range []struct{ first, second string }{
		{"nest1", "nest1/journal/0"},
		{"nest2/journal/0", "nest2"},
		{"nest3/a", "nest3/a/lease/k"},
		{"nest4/a/b/c", "nest4/a"},
		{"nest5/pool/p/queue", "nest5"},
	} {
		t.Run(strings.ReplaceAll(tt.first+" then "+tt.second, "/", "-"), func(t *testing.T) {
			if _, err := openPrefix(t, c, tt.first); err != nil {
				t.Fatal(err)
			}
			_, err := openPrefix(t, c, tt.second)
			refused(t, err, tt.second, tt.first)
			t.Logf("%v", err)
			if _, err := openPrefix(t, c, tt.first); err != nil {
				t.Errorf("the first store no longer opens: %v", err)
			}
		})
	}
	t.Run("siblings", func(t *testing.T) {
		for _, p := range []string{"sib/a", "sib/a_b", "sib/ab", "sib/a.b", "sib/a-b", "sib/b/a", "sib/a", "sib2"} {
			if _, err := openPrefix(t, c, p); err != nil {
				t.Errorf("open /%s: %v", p, err)
			}
		}
	})
}

// TestNestedStoresNormalised: prefixes are compared after dropping empty
// segments (trailing or doubled slashes) and ignoring case; a store's keys
// stay where its prefix, as given, puts them.
func TestNestedStoresNormalised(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	b, err := openPrefix(t, c, "Norm/Leases")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := acquire(context.Background(), b, "k", "a", 15)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"Norm/Leases/", "Norm//Leases", "Norm/Leases//"} {
		again, err := openPrefix(t, c, p)
		if err != nil {
			t.Errorf("open %q, the same store: %v", p, err)
			continue
		}
		if got, err := again.Read(context.Background(), "k"); err != nil || got == nil || got.Token != rec.Token {
			t.Errorf("open %q: the lease reads %+v, %v; want the one acquired at /Norm/Leases", p, got, err)
		}
	}
	for _, p := range []string{"norm", "NORM/leases", "norm/leases", "Norm/Leases/x", "Norm//Leases//x/", "norm/LEASES/x/y"} {
		_, err := openPrefix(t, c, p)
		if err == nil {
			t.Errorf("open %q beside the store /Norm/Leases succeeded", p)
		} else if !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("open %q = %v; want an error matching lease.ErrInvalid", p, err)
		}
	}
	keys, err := c.Client().Get(context.Background(), "/Norm/Leases/lease/k/record", clientv3.WithCountOnly())
	if err != nil || keys.Count != 1 {
		t.Errorf("the record is not at /Norm/Leases/lease/k/record: %v %v", keys, err)
	}
}

// TestNestedPruneKeepsLease is the case of issue 17: with the stores
// etcd://h/nest and etcd://h/nest/journal/0 both open, the first one's
// journal pruning (one range delete of the oldest keys under
// /nest/journal/) deleted the second one's live lease, which then read
// free. Whichever opens first, the other must be refused, or the lease
// must survive the pruning.
func TestNestedPruneKeepsLease(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	for _, childFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("child first %v", childFirst), func(t *testing.T) {
			ctx := context.Background()
			parentPrefix := fmt.Sprintf("nest%v", childFirst)
			childPrefix := parentPrefix + "/journal/0"
			var parent, child *etcdstore.Backend
			var errParent, errChild error
			if childFirst {
				child, errChild = openPrefix(t, c, childPrefix)
				parent, errParent = openPrefix(t, c, parentPrefix)
			} else {
				parent, errParent = openPrefix(t, c, parentPrefix)
				child, errChild = openPrefix(t, c, childPrefix)
			}
			switch {
			case errParent != nil && errChild != nil:
				t.Fatalf("both refused: %v; %v", errParent, errChild)
			case errParent != nil:
				refused(t, errParent, parentPrefix, childPrefix)
				return
			case errChild != nil:
				refused(t, errChild, childPrefix, parentPrefix)
				return
			}
			// Both open: fill the parent's journal to its bound, then
			// journal until a prune has run.
			rec, err := acquire(ctx, child, "baton", "agent", 15)
			if err != nil {
				t.Fatal(err)
			}
			raw := c.Client()
			const keep = 10000
			old := time.Now().Add(-time.Hour).UnixMilli()
			for i := 0; i < keep; i += 100 {
				var ops []clientv3.Op
				for j := i; j < i+100; j++ {
					ops = append(ops, clientv3.OpPut(fmt.Sprintf("/%s/journal/%016d-%08x", parentPrefix, old, j), `{"event":"planted"}`))
				}
				if _, err := raw.Txn(ctx).Then(ops...).Commit(); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 3000; i++ {
				if err := parent.Journal(ctx, lease.Event{Event: lease.EventForceRelease, Kind: "other", By: "op"}); err != nil {
					t.Fatal(err)
				}
				n, err := raw.Get(ctx, "/"+parentPrefix+"/journal/", clientv3.WithPrefix(), clientv3.WithCountOnly())
				if err != nil {
					t.Fatal(err)
				}
				if n.Count <= keep {
					break
				}
			}
			got, err := child.Read(ctx, "baton")
			if err != nil {
				t.Fatal(err)
			}
			if got == nil || got.Token != rec.Token || !got.Seen.Live {
				t.Errorf("the nested store's live lease reads %+v after the parent pruned its journal; want it held", got)
			}
		})
	}
}

// TestNestedOpenRace: stores that nest, opened at once on a fresh
// cluster, never all succeed: at most one of them opens.
func TestNestedOpenRace(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	for round := range 20 {
		prefixes := []string{
			fmt.Sprintf("race%d", round),
			fmt.Sprintf("race%d/pool/p", round),
			fmt.Sprintf("race%d/pool/p/x", round),
			fmt.Sprintf("RACE%d/POOL", round),
		}
		errs := make([]error, len(prefixes))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, p := range prefixes {
			wg.Go(func() {
				<-start
				_, errs[i] = openPrefix(t, c, p)
			})
		}
		close(start)
		wg.Wait()
		var opened []string
		for i, err := range errs {
			switch {
			case err == nil:
				opened = append(opened, prefixes[i])
			case !errors.Is(err, lease.ErrInvalid):
				t.Errorf("round %d: open /%s = %v; want success or a refusal", round, prefixes[i], err)
			}
		}
		if len(opened) > 1 {
			t.Errorf("round %d: nested stores %v all opened", round, opened)
		}
	}
}

// TestRootPrefixRefused: no store covers the whole key space (it would
// contain every other store), nor has a prefix that ParseURL would not
// make, whose keys would not be where the URL says.
func TestRootPrefixRefused(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	for _, url := range []string{c.URL(""), c.URL("/"), c.URL("//")} {
		if _, err := etcdstore.NewBackend(context.Background(), url, etcdstore.Options{}); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Open(%q) = %v; want an error matching lease.ErrInvalid", url, err)
		}
	}
	for _, p := range []string{"", "/", "a", "/a/", "/a//b", "/a/../b", "/a b"} {
		loc := etcdstore.Location{Endpoints: []string{c.Members[0].Endpoint}, Prefix: p}
		b, err := etcdstore.NewBackendAt(context.Background(), loc, etcdstore.Options{DialTimeout: 2 * time.Second})
		if err == nil {
			b.Close()
		}
		if !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("NewBackendAt(prefix %q) = %v; want an error matching lease.ErrInvalid", p, err)
		}
	}
}

// TestURLSecretsNeverShown: whatever an etcd:// URL carries in its
// userinfo, its query or its fragment, ParseURL, NewBackend and Open
// refuse it without repeating it; a query's keys are shown, its values
// not.
func TestURLSecretsNeverShown(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t"
	for _, tt := range []struct{ url, shown string }{
		{"etcd://user:pw-s3cr3t@h:2379/x", "etcd://…@h:2379/x"},
		{"etcd://tok-s3cr3t@h/x", "…@h/x"},
		{"etcd://user:pw-s3cr3t/slash@h/x", "…@h/x"},
		{"etcd://u:s3cr3t-a/b@h/x", "…@h/x"},
		{"etcd://h:2379/x?password=pw-s3cr3t&user=u", "password=…&user=…"},
		{"etcd://h:2379/x?tls=1&token=s3cr3t", "tls=…&token=…"},
		{"etcd://h:2379/x?s3cr3t", "x?…"},
		{"etcd://h?token=tk-s3cr3t/x", "token=…"},
		{"etcd://h?token=tk-s3cr3t", "token=…"},
		{"etcd://h/x#frag-s3cr3t", "x#…"},
		{"etcd://h/x?k=v-s3cr3t#frag-s3cr3t", "k=…#…"},
		{"etcd://u:p?w-s3cr3t@h/x", "etcd://…"},
		{"etcd://h/x?next=a@b-s3cr3t", "etcd://…"},
		{"etcd://u:pw#s3cr3t@h/x", "etcd://…"},
		{"etcd://h:2379/x y?pw=s3cr3t", "pw=…"},
		{"http://user:pw-s3cr3t@h/x?k=v-s3cr3t", "http://…@h/x?k=…"},
		{"user:pw-s3cr3t@h/x", "…@h/x"},
	} {
		_, err := etcdstore.ParseURL(tt.url)
		if !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("ParseURL(%q) = %v; want an error matching lease.ErrInvalid", tt.url, err)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("ParseURL(%q) shows a secret: %v", tt.url, err)
		}
		if !strings.Contains(err.Error(), tt.shown) {
			t.Errorf("ParseURL(%q) = %v; want it to show %q", tt.url, err, tt.shown)
		}
		_, err = etcdstore.NewBackend(context.Background(), tt.url, etcdstore.Options{DialTimeout: 100 * time.Millisecond})
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("NewBackend(%q) = %v; want an error without the secret", tt.url, err)
		}
		_, _, err = etcdstore.Open(context.Background(), tt.url)
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("Open(%q) = %v; want an error without the secret", tt.url, err)
		}
	}
}

// FuzzURLSecretsNeverShown: a password, a user, a query value or a
// fragment holding a secret is never repeated by ParseURL's error,
// whatever surrounds it.
func FuzzURLSecretsNeverShown(f *testing.F) {
	f.Add("h:2379", "x/y", "k", 0)
	f.Add("a,b", "p", "pw", 1)
	f.Add("[::1]", "", "a&b", 2)
	f.Add("h/x?", "x#", "k=", 3)
	f.Add("h@", "@/", "?@#", 4)
	f.Fuzz(func(t *testing.T, host, path, key string, where int) {
		const secret = "Zq9s3cr3tZq9"
		if strings.Contains(host+path+key, "Zq9") {
			t.Skip()
		}
		var url string
		switch uint(where) % 5 {
		case 0:
			url = "etcd://user:" + secret + "@" + host + "/" + path
		case 1:
			url = "etcd://" + secret + "@" + host + "/" + path
		case 2:
			url = "etcd://" + host + "/" + path + "?" + key + "=" + secret
		case 3:
			url = "etcd://" + host + "/" + path + "#" + secret
		case 4:
			url = "etcd://" + host + "?" + key + "=" + secret + "/" + path
		}
		loc, err := etcdstore.ParseURL(url)
		if err == nil {
			if strings.Contains(loc.String(), "Zq9") {
				t.Errorf("ParseURL(%q) kept the secret: %v", url, loc)
			}
			return
		}
		if strings.Contains(err.Error(), "Zq9") {
			t.Errorf("ParseURL(%q) shows the secret: %v", url, err)
		}
	})
}

// BenchmarkOpenClose: Open and Close of a store already opened before
// (registered), the whole cost of an open as a CLI call pays it.
func BenchmarkOpenClose(b *testing.B) {
	c := etcdtest.Start(b)
	url := c.URL("bench")
	for b.Loop() {
		be, err := etcdstore.NewBackend(context.Background(), url, etcdstore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		be.Close()
	}
}
