package etcdstore

import (
	"fmt"
	"net"
	"strings"

	"github.com/durable-lease/durable-lease/lease"
)

// Scheme is the store URL scheme this package serves.
const Scheme = "etcd"

// DefaultPort is the client port assumed for an endpoint given without one.
const DefaultPort = "2379"

// Location is a parsed store URL: the cluster's client endpoints and the
// key prefix every key of the store starts with.
type Location struct {
	// Endpoints are host:port pairs, in the order given.
	Endpoints []string
	// Prefix is the URL's path without a trailing slash, "/" first, for
	// example "/ci/leases".
	Prefix string
}

// ParseURL reads etcd://host[:port][,host2[:port]…]/prefix. The prefix is
// required (a store never shares keys with other users of the cluster by
// accident) and is made of path segments of letters, digits, '.', '_' and
// '-'. Credentials in the URL are refused: they belong in [Options], where
// they never reach an error message or a log. Errors match
// [lease.ErrInvalid] and repeat no part of the URL after an '@'.
func ParseURL(s string) (Location, error) {
	bad := func(format string, args ...any) (Location, error) {
		return Location{}, fmt.Errorf("%w: store URL %q: %s", lease.ErrInvalid, redactURL(s), fmt.Sprintf(format, args...))
	}
	rest, ok := strings.CutPrefix(s, Scheme+"://")
	if !ok {
		return bad("want %s://host:port[,host:port…]/prefix", Scheme)
	}
	hosts, path, _ := strings.Cut(rest, "/")
	if strings.Contains(hosts, "@") {
		return bad("credentials do not belong in the URL; pass them as options (LEASE_ETCD_USER, LEASE_ETCD_PASSWORD)")
	}
	if strings.ContainsAny(path, "?#") {
		return bad("a query or fragment is not allowed")
	}
	var loc Location
	for h := range strings.SplitSeq(hosts, ",") {
		ep, err := endpoint(h)
		if err != nil {
			return bad("%s", err)
		}
		loc.Endpoints = append(loc.Endpoints, ep)
	}
	path = strings.TrimSuffix(path, "/")
	if path == "" {
		return bad("a key prefix is required after the endpoints, as in %s://host:%s/leases", Scheme, DefaultPort)
	}
	for seg := range strings.SplitSeq(path, "/") {
		if !validSegment(seg) {
			return bad("prefix segment %q: want letters, digits, '.', '_' or '-', and not . or ..", seg)
		}
	}
	loc.Prefix = "/" + path
	return loc, nil
}

// String is the URL form of l.
func (l Location) String() string {
	return Scheme + "://" + strings.Join(l.Endpoints, ",") + l.Prefix
}

func endpoint(h string) (string, error) {
	if h == "" {
		return "", fmt.Errorf("empty endpoint")
	}
	host, port := h, DefaultPort
	if strings.HasPrefix(h, "[") || strings.Count(h, ":") == 1 {
		var err error
		if host, port, err = net.SplitHostPort(h); err != nil {
			if !strings.HasSuffix(h, "]") {
				return "", fmt.Errorf("endpoint %q: %v", h, err)
			}
			host, port = strings.Trim(h, "[]"), DefaultPort
		}
	}
	if host == "" || strings.ContainsAny(host, "/ \t[]") {
		return "", fmt.Errorf("endpoint %q: bad host", h)
	}
	if !validPort(port) {
		return "", fmt.Errorf("endpoint %q: bad port", h)
	}
	return net.JoinHostPort(host, port), nil
}

func validPort(p string) bool {
	if p == "" || len(p) > 5 {
		return false
	}
	n := 0
	for _, c := range p {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n > 0 && n < 65536
}

func validSegment(seg string) bool {
	if seg == "" || seg == "." || seg == ".." {
		return false
	}
	for _, c := range seg {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// redactURL hides anything between the scheme and an '@', where a URL
// carries credentials.
func redactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		if i := strings.LastIndex(s, "@"); i >= 0 {
			return "…@" + s[i+1:]
		}
		return s
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		return scheme + "://…@" + rest[i+1:]
	}
	return s
}
