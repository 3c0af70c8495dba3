package etcdstore

import (
	"fmt"
	"net"
	"net/netip"
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

// MaxSegments bounds the segments of a prefix: opening a store reads one
// registration key per ancestor of the prefix, in one transaction.
const MaxSegments = 64

// ParseURL reads etcd://host[:port][,host2[:port]…]/prefix. The prefix is
// required (a store never shares keys with other users of the cluster by
// accident) and is made of at most [MaxSegments] path segments of letters,
// digits, '.', '_' and '-'; empty segments (a trailing slash, "//") are
// dropped. Credentials, a query or a fragment in the URL are refused:
// credentials belong in [Options], where they never reach an error
// message or a log. Errors match [lease.ErrInvalid] and show the URL
// redacted: no userinfo, no query value, no fragment.
func ParseURL(s string) (Location, error) {
	bad := func(format string, args ...any) (Location, error) {
		return Location{}, fmt.Errorf("%w: store URL %q: %s", lease.ErrInvalid, redactURL(s), fmt.Sprintf(format, args...))
	}
	rest, ok := strings.CutPrefix(s, Scheme+"://")
	if !ok {
		return bad("want %s://host:port[,host:port…]/prefix", Scheme)
	}
	// Refused before anything is cut, so no later message can show a
	// part of them (a password may hold a '/', a query value an '@').
	if strings.Contains(rest, "@") {
		return bad("credentials do not belong in the URL; pass them as options (LEASE_ETCD_USER, LEASE_ETCD_PASSWORD)")
	}
	if strings.ContainsAny(rest, "?#") {
		return bad("a query or fragment is not allowed; TLS and credentials are options (LEASE_ETCD_CACERT, LEASE_ETCD_CERT, LEASE_ETCD_KEY, LEASE_ETCD_USER, LEASE_ETCD_PASSWORD)")
	}
	hosts, path, _ := strings.Cut(rest, "/")
	var loc Location
	for h := range strings.SplitSeq(hosts, ",") {
		ep, err := endpoint(h)
		if err != nil {
			return bad("%s", err)
		}
		loc.Endpoints = append(loc.Endpoints, ep)
	}
	var segs []string
	for seg := range strings.SplitSeq(path, "/") {
		if seg == "" {
			continue
		}
		if !validSegment(seg) {
			return bad("prefix segment %q: want letters, digits, '.', '_' or '-', and not . or ..", seg)
		}
		segs = append(segs, seg)
	}
	switch {
	case len(segs) == 0:
		return bad("a key prefix is required after the endpoints, as in %s://host:%s/leases (the whole key space is no store's)", Scheme, DefaultPort)
	case len(segs) > MaxSegments:
		return bad("the prefix has %d segments; at most %d", len(segs), MaxSegments)
	}
	loc.Prefix = "/" + strings.Join(segs, "/")
	return loc, nil
}

// validPrefix reports whether p is a prefix as [ParseURL] makes them.
func validPrefix(p string) bool {
	rest, ok := strings.CutPrefix(p, "/")
	if !ok {
		return false
	}
	n := 0
	for seg := range strings.SplitSeq(rest, "/") {
		if n++; n > MaxSegments || !validSegment(seg) {
			return false
		}
	}
	return true
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
	if !validHost(host) {
		return "", fmt.Errorf("endpoint %q: bad host: want a name, an IPv4 address or an IPv6 address", h)
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

// validHost accepts a DNS name or IPv4 address (letters, digits, '.', '-'
// and '_') or an IPv6 address, with a zone or not.
func validHost(host string) bool {
	if strings.Contains(host, ":") {
		_, err := netip.ParseAddr(host)
		return err == nil
	}
	if host == "" {
		return false
	}
	for _, c := range host {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// redactURL is s as errors show it: what comes before the last '@' (the
// userinfo: a user, a password, or a token given as a user) is "…", so is
// every query value (each key stays, an item without '=' is "…" too) and
// the fragment. When a '?' or '#' comes before the last '@', which part
// is which cannot be told: all but the scheme is "…".
func redactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if ok {
		scheme += "://"
	} else {
		scheme, rest = "", s
	}
	at := strings.LastIndex(rest, "@")
	if q := strings.IndexAny(rest, "?#"); q >= 0 && q < at {
		return scheme + "…"
	}
	var b strings.Builder
	b.WriteString(scheme)
	if at >= 0 {
		b.WriteString("…@")
		rest = rest[at+1:]
	}
	rest, _, hasFrag := strings.Cut(rest, "#")
	rest, query, hasQuery := strings.Cut(rest, "?")
	b.WriteString(rest)
	if hasQuery {
		b.WriteByte('?')
		for i, item := range strings.Split(query, "&") {
			if i > 0 {
				b.WriteByte('&')
			}
			if k, _, hasV := strings.Cut(item, "="); hasV {
				b.WriteString(k + "=…")
			} else if item != "" {
				b.WriteString("…")
			}
		}
	}
	if hasFrag {
		b.WriteString("#…")
	}
	return b.String()
}
