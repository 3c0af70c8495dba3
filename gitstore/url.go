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
		return Location{}, fmt.Errorf("%w: gitstore: store URL must start with git+", lease.ErrInvalid)
	}
	remote, ns, hasNS := strings.Cut(rest, "#")
	if !hasNS {
		ns = DefaultNamespace
	}
	if !nsPattern.MatchString(ns) {
		return Location{}, fmt.Errorf("%w: gitstore: namespace %q must match %s", lease.ErrInvalid, ns, nsPattern)
	}
	if remote == "" || strings.HasPrefix(remote, "-") || strings.ContainsAny(remote, "\x00\n\r") {
		return Location{}, fmt.Errorf("%w: gitstore: bad remote in store URL", lease.ErrInvalid)
	}
	refuse := fmt.Errorf("%w: gitstore: the store URL carries credentials; remove them and configure a git credential helper (git config credential.helper) or an ssh key instead", lease.ErrInvalid)
	loc := Location{Remote: remote, Namespace: ns}
	if strings.Contains(remote, "://") {
		u, err := url.Parse(remote)
		if err != nil {
			// Unparsed, it could not be checked for credentials.
			return Location{}, fmt.Errorf("%w: gitstore: the remote of the store URL is not a valid URL", lease.ErrInvalid)
		}
		switch u.Scheme {
		case "file", "git", "ssh", "http", "https", "git+ssh", "ssh+git":
		default:
			return Location{}, fmt.Errorf("%w: gitstore: unsupported remote scheme %q", lease.ErrInvalid, u.Scheme)
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
			return Location{}, fmt.Errorf("%w: gitstore: %q names a git remote helper (<transport>::<address>); a store takes file, git, ssh, http(s) or scp-like remotes only", lease.ErrInvalid, remote)
		case colon < 0 || strings.Contains(remote[:colon], "/"):
			return Location{}, fmt.Errorf("%w: gitstore: %q is a local path; write it as git+file://<absolute path> (the file protocol is allowed only for git+file stores)", lease.ErrInvalid, remote)
		}
		if i := strings.Index(remote, "@"); i >= 0 && strings.Contains(remote[:i], ":") {
			// scp-like user:password@host:path
			return Location{}, refuse
		}
	}
	return loc, nil
}
