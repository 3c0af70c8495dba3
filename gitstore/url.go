package gitstore

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/durable-lease/durable-lease/lease"
)

// Scheme is the store scheme this package serves: every git+… URL.
const Scheme = "git"

// DefaultNamespace is the namespace of a URL without a fragment.
const DefaultNamespace = "default"

var nsPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// Location is a parsed store URL.
type Location struct {
	Remote    string // the URL given to git
	Namespace string
	File      bool // a git+file:// remote: the file protocol is allowed
	HTTP      bool // smart HTTP(S): replies carry the server's Date
}

// String is the store URL.
func (l Location) String() string {
	return "git+" + l.Remote + "#" + l.Namespace
}

// ParseURL parses git+<remote>[#namespace]. It refuses credentials in the
// URL: they belong in a git credential helper (or ssh keys).
func ParseURL(raw string) (Location, error) {
	rest, ok := strings.CutPrefix(raw, "git+")
	if !ok {
		return Location{}, badURL("want git+<remote>[#namespace]")
	}
	remote, ns, hasNS := strings.Cut(rest, "#")
	if !hasNS {
		ns = DefaultNamespace
	}
	if !nsPattern.MatchString(ns) {
		return Location{}, badURL("namespace %q must match %s", ns, nsPattern)
	}
	if remote == "" || strings.HasPrefix(remote, "-") || strings.ContainsAny(remote, "\x00\n\r") {
		return Location{}, badURL("bad remote")
	}
	refuse := badURL("it carries credentials; remove them and configure a git credential helper (git config credential.helper) or an ssh key instead")
	loc := Location{Remote: remote, Namespace: ns}
	if strings.Contains(remote, "://") {
		u, err := url.Parse(remote)
		if err != nil {
			// Unparsed, it could not be checked for credentials.
			return Location{}, badURL("the remote is not a valid URL")
		}
		switch u.Scheme {
		case "file", "git", "ssh", "http", "https", "git+ssh", "ssh+git":
		default:
			return Location{}, badURL("unsupported remote scheme %q", u.Scheme)
		}
		if u.User != nil {
			if _, hasPw := u.User.Password(); hasPw || u.Scheme == "http" || u.Scheme == "https" {
				return Location{}, refuse
			}
		}
		if u.RawQuery != "" || u.ForceQuery {
			// A query is where signed URLs keep their secrets (token=,
			// sig=, X-Amz-Signature=); no git remote needs one here.
			return Location{}, refuse
		}
		loc.File = u.Scheme == "file"
		loc.HTTP = u.Scheme == "http" || u.Scheme == "https"
	} else {
		// No scheme: scp-like [user@]host:path (a colon before any
		// slash), else a local path, which the file protocol serves
		// only when the URL says so.
		colon := strings.Index(remote, ":")
		switch {
		case strings.Contains(remote, "::"):
			return Location{}, badURL("%q names a git remote helper (<transport>::<address>); a store takes file, git, ssh, http(s) or scp-like remotes only", remote)
		case colon < 0 || strings.Contains(remote[:colon], "/"):
			return Location{}, badURL("%q is a local path; write it as git+file://<absolute path> (the file protocol is allowed only for git+file stores)", remote)
		}
		if i := strings.Index(remote, "@"); i >= 0 && strings.Contains(remote[:i], ":") {
			// scp-like user:password@host:path
			return Location{}, refuse
		}
	}
	return loc, nil
}

// badURL is ParseURL's refusal: [lease.ErrInvalid] with one prefix, the
// sentinel's ("lease: invalid argument: store URL: …"), as etcdstore's
// store URL errors read; the URL itself is not repeated, since a refused
// one may carry a secret.
func badURL(format string, args ...any) error {
	return fmt.Errorf("%w: store URL: "+format, append([]any{lease.ErrInvalid}, args...)...)
}
