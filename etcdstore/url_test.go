package etcdstore_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/durable-lease/durable-lease/etcdstore"
	"github.com/durable-lease/durable-lease/lease"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, url string
		eps       []string
		prefix    string
	}{
		{"one endpoint", "etcd://127.0.0.1:2379/leases", []string{"127.0.0.1:2379"}, "/leases"},
		{"several", "etcd://a:1,b:2,c/x/y", []string{"a:1", "b:2", "c:2379"}, "/x/y"},
		{"default port", "etcd://etcd.internal/ci", []string{"etcd.internal:2379"}, "/ci"},
		{"trailing slash", "etcd://h:2379/ci/", []string{"h:2379"}, "/ci"},
		{"empty segments", "etcd://h:2379//ci//leases//", []string{"h:2379"}, "/ci/leases"},
		{"deepest", "etcd://h/" + strings.Repeat("a/", etcdstore.MaxSegments), []string{"h:2379"}, strings.TrimSuffix(strings.Repeat("/a", etcdstore.MaxSegments), "/")},
		{"ipv6", "etcd://[::1]:2379,[fe80::1]/p", []string{"[::1]:2379", "[fe80::1]:2379"}, "/p"},
		{"bare ipv6", "etcd://::1/p", []string{"[::1]:2379"}, "/p"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			loc, err := etcdstore.ParseURL(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(loc.Endpoints, tt.eps) || loc.Prefix != tt.prefix {
				t.Errorf("ParseURL = %v %q; want %v %q", loc.Endpoints, loc.Prefix, tt.eps, tt.prefix)
			}
		})
	}
	for _, tt := range []struct{ name, url, secret string }{
		{"other scheme", "http://h:2379/x", ""},
		{"no prefix", "etcd://h:2379", ""},
		{"empty prefix", "etcd://h:2379/", ""},
		{"no endpoint", "etcd:///x", ""},
		{"empty endpoint", "etcd://a:1,,b:2/x", ""},
		{"bad port", "etcd://h:99999/x", ""},
		{"port not a number", "etcd://h:ab/x", ""},
		{"dot segment", "etcd://h/x/../y", ""},
		{"odd character", "etcd://h/x y", ""},
		{"query", "etcd://h/x?y=1", ""},
		{"query in the endpoints", "etcd://h?y=1/x", ""},
		{"fragment", "etcd://h/x#y", ""},
		{"only slashes", "etcd://h//", ""},
		{"too deep", "etcd://h/" + strings.Repeat("a/", etcdstore.MaxSegments+1), ""},
		{"odd host", "etcd://h;x/p", ""},
		{"bad ipv6", "etcd://[::g]/p", ""},
		{"credentials", "etcd://user:hunter2@h:2379/x", "hunter2"},
		{"credentials with a slash", "etcd://user:hun/ter2@h:2379/x", "ter2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := etcdstore.ParseURL(tt.url)
			if !errors.Is(err, lease.ErrInvalid) {
				t.Fatalf("ParseURL(%q) = %v; want ErrInvalid", tt.url, err)
			}
			if tt.secret != "" && strings.Contains(err.Error(), tt.secret) {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}

// FuzzParseURL: a parsed location prints as a URL that parses to itself,
// and an error never repeats what follows an '@'.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"etcd://h:2379/x", "etcd://a,b:1/x/y", "etcd://[::1]/p", "etcd://u:p@h/x", "etcd://h/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		loc, err := etcdstore.ParseURL(s)
		if err != nil {
			if i := strings.LastIndex(s, "@"); i >= 0 && strings.Contains(err.Error(), s[:i+1]) && strings.Contains(s[:i], ":") {
				t.Errorf("error repeats the credentials of %q: %v", s, err)
			}
			return
		}
		again, err := etcdstore.ParseURL(loc.String())
		if err != nil || !slices.Equal(again.Endpoints, loc.Endpoints) || again.Prefix != loc.Prefix {
			t.Errorf("%q parsed to %v, which parses to %v, %v", s, loc, again, err)
		}
	})
}

// TestExpiryMargin: a quarter of the TTL, at least a second, and never
// more than half the TTL (a one-second lease is not lost on arrival).
func TestExpiryMargin(t *testing.T) {
	t.Parallel()
	var b etcdstore.Backend
	for _, tt := range []struct{ ttl, want time.Duration }{
		{time.Second, 500 * time.Millisecond},
		{2 * time.Second, time.Second},
		{3 * time.Second, time.Second},
		{8 * time.Second, 2 * time.Second},
		{time.Hour, 15 * time.Minute},
	} {
		if got := b.ExpiryMargin(tt.ttl); got != tt.want {
			t.Errorf("ExpiryMargin(%s) = %s, want %s", tt.ttl, got, tt.want)
		}
	}
}
